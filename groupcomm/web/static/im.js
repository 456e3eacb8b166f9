// The chat page: what `groupcomm im` shows in a terminal, in a browser tab. Messages are
// shown in delivery order (the causality module in the gateway holds a reply that
// overtook its cause), each with its sender (the person: no incarnation or tab suffix),
// the time it was said (the sender's clock, in this viewer's local time) and its
// identity, the same for every viewer (ann·3: the sender's own count of its lines); one
// concurrent with messages already shown is marked "concurrent with bob·2"; a newcomer
// first sees the conversation so far, and a tab back after a drop adds only the lines
// it had not shown, in their place. A line said
// while the connection is down (or on its way when it dropped) is shown as waiting to
// be sent, kept in the tab's session storage (also across a reload) and sent once the
// tab is a member again, exactly once: a public line the conversation received already
// holds is not sent again; a private line (which no conversation holds) carries an id the
// tab made for it, and a receiving tab shows a line of one id once. A line the gateway
// answered as sent is kept too (not shown as waiting) until the gateway says every
// receiver's process has it (`stable`): a gateway killed before the line left it would
// lose it. Back as a member, the tab sends again those the conversation it gets does not
// hold, under their lasting ids (receivers show a line of one id once).
import { keeping, lineId } from "/static/chat_kept.js";
import { Connection, claimNote, claimStorage, concurrent, displayName, person, tabLine } from "/static/client.js";

// a member that leaves is said to have left after this long, unless it is back
const LEFT_GRACE = 3000;
// an own message still held this long after it was sent is shown as pending
const PENDING_AFTER = 500;
const HELP = "commands: plain text = to everyone else, /to NAME text, /who, /held, /release NAME, /quit, /help";
const log = document.getElementById("log");

// The persons members stand for, each once.
function people(members) {
  return [...new Set(members.map(person))];
}

// HH:MM of `said` (seconds since the epoch) in this viewer's local time.
function clock(said) {
  if (!said) return "--:--";
  const at = new Date(said * 1000);
  return `${String(at.getHours()).padStart(2, "0")}:${String(at.getMinutes()).padStart(2, "0")}`;
}

const input = document.getElementById("input");

const chat = {
  me: null,
  members: [],
  shown: [],          // [identity, sender, clock] of the lines shown live
  divs: new Map(),    // message id or identity -> the line shown for it
  held: new Map(),    // message id -> {div, on} of a line shown waiting (held by the module)
  joinedAt: {},       // member -> shown.length when its join was seen
  known: new Set(),
  leftAt: new Map(),  // display name -> when its member left (a return soon after is not news)
  started: false,
  unsent: new Map(),       // own message id -> {number, said} while the module holds it
  transmitted: new Set(),  // own messages that left before their "sent" answer came
  outbox: [],              // own lines not answered yet: {local, line, text, to, member, wire}
  outboxKey: null,
  kept: [],                // own lines answered, not known to be stable: {..., id}
  keptKey: null,
  keptDropped: 0,          // kept lines dropped past the cap (chat_kept.js)
  stableEarly: new Set(),  // ids said stable before their answer came
  lines: [],               // ids of private lines shown ("sender/line"), newest last
  linesKey: null,
  storage: null,           // this tab's key in session storage (claimStorage)
  claim: null,             // what claimStorage found (a copy of another tab?)
  statusBefore: null,      // the status line while the replaced store's state is awaited
  nextLocal: 1,
  limits: null,

  line(text, cls = "") {
    const div = document.createElement("div");
    div.textContent = text;
    if (cls) div.className = cls;
    log.appendChild(div);
    div.scrollIntoView({ block: "end" });
    return div;
  },

  // A line of the conversation: who said it, when, its identity, its text (`where`:
  // {after: line} or {before: line}; else at the end).
  message(who, said, ident, text, ids, where = null) {
    const div = document.createElement("div");
    div.className = "message";
    div.dataset.ident = ident;
    const head = document.createElement("div");
    head.className = "head";
    const name = document.createElement("span");
    name.className = "who";
    name.textContent = who;
    const time = document.createElement("time");
    time.textContent = clock(said);
    if (said) time.dateTime = new Date(said * 1000).toISOString();
    const id = document.createElement("span");
    id.className = "ident";
    id.textContent = ident;
    head.append(name, " ", time, " ", id);
    const body = document.createElement("div");
    body.className = "text";
    body.textContent = text;
    div.append(head, body);
    if (where && where.before) where.before.before(div);
    else if (where && where.after) where.after.after(div);
    else log.appendChild(div);
    for (const key of ids) if (key) this.divs.set(key, div);
    div.scrollIntoView({ block: "end" });
    return div;
  },

  show(sender, who, clock, text, ident, said, id, released = "") {
    const since = this.joinedAt[sender] || 0;
    const marks = this.shown.slice(since)
      .filter(([, other, otherClock]) => other !== sender && concurrent(clock, otherClock))
      .map(([other]) => other);
    this.shown.push([ident, sender, clock]);
    const div = this.message(who, said, ident, text, [id, ident]);
    div.dataset.sender = sender;
    if (marks.length) {
      const mark = document.createElement("div");
      mark.className = "concurrent";
      mark.textContent = `concurrent with ${marks.join(", ")}`;
      div.appendChild(mark);
    }
    if (released) {
      const mark = document.createElement("div");
      mark.className = "released";
      mark.textContent = released;
      div.appendChild(mark);
    }
  },

  // The module holds a line (it overtook its cause): shown at once as waiting, for the
  // lines its sender had seen that are not shown here (else a line of whom it waits on).
  holding(event) {
    if (this.divs.has(event.id) || this.held.has(event.id)) return;
    let on = (event.seen || []).map(([p, n]) => `${p}·${n}`).filter((i) => !this.divs.has(i));
    if (!on.length) on = event.waits.map((m) => `a line of ${person(m)}'s`);
    const div = this.message(event.private ? `${person(event.sender)} -> you` : person(event.sender),
      event.said, event.ident, event.text, []);
    div.classList.add("held");
    const mark = document.createElement("div");
    mark.className = "waiting-for";
    mark.textContent = `waiting for ${on.join(", ")}`;
    div.appendChild(mark);
    this.held.set(event.id, { div, on });
  },

  // The released mark of a line shown waiting, now delivered ("" if it was not).
  released(id) {
    const held = this.held.get(id);
    if (!held) return "";
    this.held.delete(id);
    held.div.remove();
    return `was waiting for ${held.on.join(", ")}; released`;
  },

  // The lines of `history` (the conversation so far) not shown yet, each in its place:
  // after the line before it that is shown, else before the next one shown. How many.
  addHistory(history) {
    const entries = history.map(([who, text, id, said, n]) =>
      ({ who, text, id, said: said || 0, ident: n > 0 ? `${person(who)}·${n}` : id }));
    let after = null;
    let added = 0;
    entries.forEach((e, at) => {
      // by message id only: two tabs of one person saying a line at once give both the
      // same identity, and neither may hide the other
      const shown = this.divs.get(e.id);
      if (shown) {
        after = shown;
        return;
      }
      const next = entries.slice(at + 1).map((x) => this.divs.get(x.id))
        .find((d) => d);
      const div = this.message(person(e.who), e.said, e.ident, e.text, [e.id, e.ident],
        after ? { after } : (next ? { before: next } : null));
      div.classList.add("history");
      after = div;
      added += 1;
    });
    return added;
  },

  drawMembers() {
    document.getElementById("members").textContent = people(this.members).join(", ");
  },

  start(welcome) {
    this.limits = welcome.limits || null;
    document.getElementById("tabline").textContent = tabLine(welcome,
      "A line you send while the connection is down is shown as waiting and sent when " +
      "it is back (also after a reload); closing the tab drops what is not sent yet." +
      claimNote(this.claim));
    this.attach(`groupcomm-chat:${this.storage}:${welcome.session}:${welcome.user}`);
    this.attachKept(`groupcomm-chat-kept:${this.storage}:${welcome.session}:${welcome.user}`);
    this.attachLines(`groupcomm-chat-lines:${this.storage}:${welcome.session}:${welcome.user}`);
    this.me = welcome.member;
    this.members = welcome.members;
    for (const m of welcome.members) this.known.add(m);
    this.drawMembers();
    if (this.started) this.line("* reconnected", "notice");
    const back = this.started;
    this.started = true;
    if (!back) this.line(`* ${welcome.user} joined with causality ${welcome.module} (members: ${people(welcome.members_at_join).join(", ")}); /help for commands`, "notice");
    const history = welcome.state.history || [];
    // back after a drop: only the lines not shown yet, in their place
    const first = !this.shownHistory;
    this.shownHistory = true;
    const added = this.addHistory(history);
    // alone in the session, the history can only be the store's (groupcomm serve --store)
    if (first && (welcome.members_at_join.length > 1 || history.length)) {
      this.line(`* up to date (${history.length} earlier message(s))`, "notice");
    } else if (!first && added) {
      this.line(`* ${added} missed message(s) added`, "notice");
    }
    this.resend(history);
  },

  // -- lines waiting to be sent (what is kept: chat_kept.js) ---------------------------
  // Say `text` (to `to`, or everyone else): kept and shown as waiting until the gateway
  // answers that it sent it.
  say(text, to) {
    const entry = { local: `c${this.nextLocal++}`, line: lineId(), text, to, member: this.me,
      wire: false, said: Date.now() / 1000 };
    this.outbox.push(entry);
    this.drawWaiting(entry);
    this.trySend(entry);
    this.save();
  },

  trySend(entry) {
    if (!connection.isOpen || (entry.to === null && !this.members.some((m) => m !== this.me))) {
      return;  // sent when the tab is back, or when someone else is here
    }
    entry.member = this.me;
    entry.wire = connection.send({ type: "say", applied: 0, text: entry.text, to: entry.to,
      local: entry.local, line: entry.line, said: entry.said });
  },

  drawWaiting(entry) {
    const div = document.createElement("div");
    div.className = "waiting";
    div.textContent = `(waiting to be sent) ${entry.to ? `/to ${entry.to} ` : ""}${entry.text}`;
    document.getElementById("waiting").appendChild(div);
    entry.div = div;
  },

  // A member again (welcome): a line sent before the connection dropped that the
  // conversation received holds reached the others (only the answer was lost), the
  // rest go out now, in the order they were said.
  resend(history) {
    // an answered line is kept in case its gateway died before it left: one the
    // conversation holds arrived; the others go again, first (they were said first),
    // under their lasting ids
    const held = new Set(history.map((h) => h[2]));
    const again = this.kept.filter((e) => e.to !== null || !held.has(e.id));
    for (const entry of again) {
      entry.local = `c${this.nextLocal++}`;
      entry.wire = false;
      entry.shown = this.divs.has(entry.id) ? [entry.id, entry.member] : null;
    }
    this.kept = [];
    this.outbox = again.concat(this.outbox);
    const used = new Set();
    for (const entry of [...this.outbox]) {
      if (entry.wire && entry.to === null) {
        const at = history.findIndex(([who, text, id]) => !used.has(id)
          && who === entry.member && text === entry.text);
        if (at >= 0) {
          used.add(history[at][2]);
          this.line(`* sent before the connection dropped: ${entry.text}`, "notice");
          this.answered(entry.local);
          continue;
        }
      }
      entry.wire = false;
      this.trySend(entry);
    }
    this.save();
  },

  event(event) {
    switch (event.type) {
      case "deliver":
        if (event.sender === this.me) return;
        if (event.repeat || (event.line && this.shownBefore(event.sender, event.line))) {
          // a line sent again, shown already (if it is also shown waiting, that goes)
          const held = this.held.get(event.id);
          if (held) held.div.remove();
          this.held.delete(event.id);
          return;
        }
        if (this.divs.has(event.id)) return;  // a line of the conversation handed over
        this.show(event.sender, event.private ? `${person(event.sender)} -> you`
          : person(event.sender), event.vc, event.text, event.ident, event.said, event.id,
        this.released(event.id));
        return;
      case "holding":
        this.holding(event);
        return;
      case "stable":
        this.stable(event.ids);
        return;
      case "sent": {
        const entry = event.local ? this.answered(event.local, event.id) : null;
        if (entry && entry.shown) {
          // sent again after a drop, shown already: the line shown is this message now
          const [was, by] = entry.shown;
          const div = this.divs.get(was);
          this.divs.set(event.id, div);
          const mine = this.shown.find(([ident, sender]) => ident === div.dataset.ident
            && sender === by);
          if (mine) mine.splice(1, 2, this.me, event.vc);
          return;
        }
        const others = people(event.destinations.filter((d) => d !== this.me));
        this.show(this.me, `you -> ${others.join(", ") || "yourself"}`, event.vc, event.text,
          event.ident, event.said, event.id);
        if (!event.transmitted && !this.transmitted.has(event.id)) {
          // a sender-side module (mfss) holds it until an earlier one is acknowledged
          const entry = { number: event.ident, said: false };
          this.unsent.set(event.id, entry);
          setTimeout(() => {
            if (this.unsent.get(event.id) !== entry) return;
            entry.said = true;
            this.line(`* ${entry.number} pending: the causality module has not sent it yet ` +
              "(it waits for an earlier message's acknowledgement)", "notice");
          }, PENDING_AFTER);
        }
        return;
      }
      case "transmitted": {
        const entry = this.unsent.get(event.id);
        if (entry === undefined) {
          this.transmitted.add(event.id);
          return;
        }
        this.unsent.delete(event.id);
        if (entry.said) this.line(`* ${entry.number} sent`, "notice");
        return;
      }
      case "joined":
        this.members = event.members;
        this.drawMembers();
        for (const entry of this.outbox) if (!entry.wire) this.trySend(entry);
        if (displayName(event.member) === displayName(this.me || "")) return;
        if (this.known.has(event.member)) return;  // it rejoined a restarted server
        if ([...this.known].some((m) => displayName(m) === displayName(event.member))) {
          // the next incarnation of a member still listed: not news
          this.known.add(event.member);
          this.joinedAt[event.member] = this.shown.length;
          return;
        }
        if (person(event.member) === person(this.me || "")) {
          this.known.add(event.member);
          this.line("* another tab of yours joined", "notice");
          return;
        }
        this.known.add(event.member);
        this.joinedAt[event.member] = this.shown.length;
        if (Date.now() - (this.leftAt.get(displayName(event.member)) || -Infinity) < LEFT_GRACE) {
          return;  // back within LEFT_GRACE: its leaving was not said either
        }
        this.line(`* ${person(event.member)} joined (${people(event.members).join(", ")})`,
          "notice");
        return;
      case "left":
        this.members = event.members;
        this.known.delete(event.member);
        this.leftAt.set(displayName(event.member), Date.now());
        this.drawMembers();
        if (event.waiting) {
          const who = event.member;
          this.line(`* ${person(who)} left`, "notice");
          this.line(`* ${event.waiting} held message(s) wait on ${who}; /release ${who} delivers ` +
            `them anyway (out of order if ${who}'s messages are still on their way)`, "notice");
          return;
        }
        // a member back within LEFT_GRACE (a dropped connection, a reload) did not
        // leave: an old incarnation leaving is not news once its next one is here
        setTimeout(() => {
          if (![...this.known].some((m) => displayName(m) === displayName(event.member))) {
            this.line(`* ${person(event.member)} left`, "notice");
          }
        }, LEFT_GRACE);
        return;
      case "held":
        if (!event.held.length) {
          this.line("* held: none", "notice");
          return;
        }
        this.line(`* held: ${event.held.length}`, "notice");
        for (const h of event.held) {
          const who = h.to ? `to ${people(h.to).join(", ")}, not sent yet` : `from ${person(h.from)}`;
          const why = h.waits.length ? `waits on ${h.waits.join(", ")}` : "waits behind earlier messages";
          this.line(`  ${h.ident || h.id} ${who}: '${h.text}' (${why})`, "held");
        }
        return;
      case "notice":
        this.line(`* ${event.text}`, "notice");
        return;
      case "generation": {
        const status = document.getElementById("status");
        this.statusBefore = [status.textContent, status.className];
        this.status("the stored session was replaced; getting the conversation again…",
          "connecting");
        return;
      }
      case "state": {
        // the replaced store's conversation; the lines not answered go (again) into it
        if (!event.replaced) return;
        if (this.statusBefore) this.status(...this.statusBefore);
        const history = event.state.history || [];
        const added = this.addHistory(history);
        this.line(`* the stored session was replaced; ${this.outbox.some((e) => !e.wire)
          ? "your unsent lines were sent again" : "no line of yours was waiting"} ` +
          `(conversation so far: ${history.length} message(s), ${added} not shown before)`,
          "notice");
        // (one on its way gets its answer: this connection stayed; the member's queue
        // carries what it sent into the fresh session)
        for (const entry of this.outbox) if (!entry.wire) this.trySend(entry);
        this.save();
        return;
      }
      case "error":
      case "fatal":
        this.line(`! ${event.error}`, "error");
        return;
      default:
        return;
    }
  },

  status(text, state) {
    const status = document.getElementById("status");
    status.textContent = text;
    status.className = state;
  },
};

Object.assign(chat, keeping);  // what the tab keeps in its session storage
const connection = new Connection("im", chat);

function handle(line) {
  if (!line.trim()) return;
  if (line.startsWith("/")) {
    const [command, ...rest] = line.split(" ");
    const argument = rest.join(" ").trim();
    if (command === "/quit") {
      connection.close();
      chat.line("* bye", "notice");
    } else if (command === "/who") {
      chat.line(`* members: ${people(chat.members).join(", ")}`, "notice");
    } else if (command === "/help") {
      chat.line(HELP, "notice");
    } else if (command === "/held") {
      connection.send({ type: "held" });
    } else if (command === "/release") {
      if (!argument) chat.line("usage: /release NAME", "notice");
      else connection.send({ type: "release", member: argument });
    } else if (command === "/to") {
      const [name, ...words] = argument.split(" ");
      const text = words.join(" ").trim();
      if (!name || !text) chat.line("usage: /to NAME text", "notice");
      else if (fits(text)) chat.say(text, name);
      else return false;
    } else {
      chat.line(`unknown command ${command}; ${HELP}`, "notice");
    }
    return;
  }
  if (connection.isOpen && !chat.members.some((m) => m !== chat.me)) {
    chat.line("* nobody else is here yet", "notice");
    return true;
  }
  if (!fits(line)) return false;
  chat.say(line, null);
  return true;
}

// Whether the gateway takes a line this long; if not, the reason is shown and the line
// stays in the input box (nothing is sent, nothing lost).
function fits(text) {
  const most = chat.limits ? chat.limits.text : 16384;
  if ([...text].length <= most) return true;  // code points, as the gateway counts
  chat.line(`! not sent: the line has ${[...text].length.toLocaleString("en")} characters; ` +
    `at most ${most.toLocaleString("en")} (split it)`, "error");
  return false;
}

document.getElementById("say").addEventListener("submit", (event) => {
  event.preventDefault();
  if (handle(input.value) !== false) input.value = "";
});
window.chat = chat;
window.connection = connection;
window.addEventListener("pagehide", () => chat.save());
claimStorage("im").then((claim) => {
  chat.storage = claim.key;
  chat.claim = claim;
  connection.open();
});
