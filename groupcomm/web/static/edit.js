// The editor page: the tab's editor replica (editor.js, the Python EditorReplica in
// JavaScript) on the gateway's WebSocket, drawn with the others' cursors in their
// colours. Typing is applied at once, with a provisional id and the clock the tab
// expects; the gateway sends the edit and answers with the id and tag it got, which the
// replica takes (confirmed). If that tag is not the one the tab expected, or the gateway
// refused an edit, the page starts again from the gateway's state of this member
// (resync), keys pressed meanwhile waiting for it: a refused edit is taken back, its
// reason shown. A paste goes out as inserts within the limits the gateway's welcome
// states. Edits the gateway has not confirmed (typed while the connection is down, on
// their way when it dropped, or waiting for a resync the drop cut short) are kept
// (outbox.js, also across a reload) and put back on the state the tab gets when it is a
// member again; the cursor stays at its text. When the session's store was replaced
// (a `generation` event), edits wait in the outbox for the fresh state, onto which
// they and the own edits the gateway lists go again as new edits.
import { Connection, claimNote, claimStorage, displayName, tabLine } from "/static/client.js";
import { EditorReplica, RUN_LIMIT, isPresence, presence } from "/static/editor.js";
import { Outbox } from "/static/outbox.js";

const COLOURS = 6;
const view = document.getElementById("text");
// milliseconds of drawing above which the text is drawn less often (renderSoon)
const SLOW_RENDER = 30;
// bytes of an edit request besides its text (type, ids, counts), with room to spare
const REQUEST_OVERHEAD = 1024;

// The longest insert the gateway takes, in code points, as its welcome states: its
// limit on an insert's characters, and the request's size in bytes even when every
// character takes the most JSON does (6 bytes: an escaped control character or lone
// surrogate).
function runLimit(limits) {
  if (!limits) return RUN_LIMIT;
  const bytes = Math.floor((limits.message - REQUEST_OVERHEAD) / 6);
  return Math.max(1, Math.min(limits.text, bytes));
}

const editor = {
  replica: null,
  connection: null,
  clock: {},                // this tab's application clock, as the gateway will tag with
  nextLocal: 1,
  runLimit: RUN_LIMIT,
  openStatus: null,         // the status line while connected ([text, state])
  resyncing: false,
  replacing: false,         // the session's store was replaced; its fresh state not in yet
  takingBack: false,        // a refused edit's reason shown, its resync not done yet
  resyncs: 0,
  waiting: [],              // keys pressed while resyncing
  colours: {},
  outbox: new Outbox(),
  storage: null,            // this tab's key in session storage (claimStorage)
  claim: null,              // what claimStorage found (a copy of another tab?)
  saveDue: false,
  rebased: 0,               // edits put back after a reconnect or a reload
  renderDue: false,
  renderCost: 0,            // how long the last drawing took (ms), and when it ended
  lastRender: 0,

  colour(member) {
    const name = displayName(member);
    if (!(name in this.colours)) this.colours[name] = `c${Object.keys(this.colours).length % COLOURS}`;
    return this.colours[name];
  },

  // -- the connection's events --------------------------------------------------------
  start(welcome) {
    this.runLimit = runLimit(welcome.limits);
    this.outbox.attach(`groupcomm-outbox:${this.storage}:${welcome.session}:${welcome.user}`);
    if (this.replica !== null) this.keepCursor();
    this.resyncing = false;
    this.replacing = false;  // a new member: the gateway sends its edits again
    this.startFrom(welcome, welcome.member, () => this.rebase(welcome.state.seen));
    document.getElementById("tabline").textContent = tabLine(welcome,
      "What you type while the connection is down is kept in this tab (also across a " +
      "reload) and sent when it is back; closing the tab drops what is not sent yet." +
      claimNote(this.claim));
  },

  // The connection dropped. A resync under way cannot end now (its state will not
  // come): the keys that waited for it are applied to the text as it is, as keys typed
  // while the connection is down are (kept in the outbox, also across a reload), and so
  // are the next ones; the welcome's state takes them all.
  dropped() {
    if (!this.resyncing || this.replica === null) return;
    this.resyncing = false;
    this.takingBack = false;
    const waiting = this.waiting;
    this.waiting = [];
    for (const act of waiting) act();
    this.save(true);
    this.render();
  },

  // The fresh state of a replaced store: the own edits every member may not hold (the
  // gateway's list), and the unsent ones, are made again onto it as new edits, unless
  // its `seen` clock says it holds them.
  replaced(event) {
    const me = this.replica.me;
    if (this.replica.pending !== null) this.replica.flush();
    this.outbox.replaced(event.replaced.carried || [], this.replica.text);
    this.replacing = false;
    this.resyncing = false;
    this.keepCursor();
    this.refusal("");
    const kept = this.outbox.entries.length;
    this.startFrom(event, me, () => this.rebase(event.state.seen));
    const notice = document.getElementById("notice");
    const unsendable = notice.textContent;  // what rebase() could not make again
    notice.textContent = "the stored session was replaced; " +
      (kept ? "your unsent edits were re-applied" : "you had no unsent edits") +
      (unsendable ? ` (${unsendable})` : "");
  },

  // Put the kept edits back on the state just received (outbox.js; `seen`: the state's
  // clock of what its maker had applied).
  rebase(seen) {
    const waiting = this.outbox.entries.length;
    if (!waiting && !this.outbox.cursor) return;
    const unsendable = this.outbox.rebase(this.replica, seen || null);
    this.rebased += waiting;
    if (unsendable.length) this.refusal(`not sent: ${unsendable.join("; ")}`);
    this.save(true);
  },

  keepCursor() {
    const replica = this.replica;
    if (replica.pending !== null) replica.flush();
    this.outbox.keepCursor(replica.text, replica.cursor);
  },

  // Keep the outbox in session storage: soon after a change, at once when leaving the
  // page (and after a rebase).
  save(now = false) {
    if (now) {
      this.saveDue = false;
      if (this.replica !== null) this.keepCursor();
      const kept = this.outbox.save() ? 0 : this.outbox.characters();
      // said on the page while the storage cannot hold them (and gone once it can)
      const line = document.getElementById("kept");
      line.textContent = kept ? `${kept.toLocaleString("en")} characters are kept in this ` +
        "tab only: a reload would lose them" : "";
      line.className = kept ? "error" : "";
      return;
    }
    if (this.saveDue) return;
    this.saveDue = true;
    setTimeout(() => { if (this.saveDue) this.save(true); }, 200);
  },

  // A welcome, or a state the gateway sent when asked (resync): a fresh replica.
  startFrom(event, me, then = null) {
    this.replica = new EditorReplica(me, (payload) => this.send(payload),
      { members: event.members, runLimit: this.runLimit });
    this.replica.install(event.state);
    this.clock = { ...event.clock };
    if (this.resyncing && this.openStatus) this.status(...this.openStatus);
    this.resyncing = false;
    this.takingBack = false;
    if (then) then();
    const waiting = this.waiting;
    this.waiting = [];
    for (const act of waiting) act();
    this.render();
  },

  event(event) {
    if (this.replica === null) return;
    switch (event.type) {
      case "deliver":
        if (!this.resyncing) this.delivered(event);  // else the state holds it
        break;
      case "sent":
        this.outbox.confirmed(this.replica.me, event.local, event.id);
        this.save();
        if (this.resyncing) return;
        this.merge(event.vc);
        if (!this.replica.confirmed(`${this.replica.me}#${event.local}`, event.id, event.vc)) {
          this.resync();
        }
        break;
      case "generation":
        // edits wait in the outbox until the fresh state is in (the gateway would not
        // send them: they name the old text's characters)
        this.replacing = true;
        this.refusal("the stored session was replaced; getting the text again (your " +
          "unsent edits are kept)");
        return;
      case "state":
        if (event.replaced) {
          this.replaced(event);
          return;
        }
        // the gateway's state holds what it sent; what it refused is taken back
        this.outbox.resynced(this.replica.me);
        this.keepCursor();
        this.startFrom(event, this.replica.me, () => this.rebase(event.state.seen));
        return;
      case "joined":
        this.replica.memberJoined(event.member, event.members);
        break;
      case "left":
        this.replica.memberLeft(event.member);
        break;
      case "acknowledged":
        if (!this.resyncing) this.replica.acknowledged(event.member, event.vc);
        return;
      case "error":
        if (event.ref || this.replica.unconfirmed.length) {
          // an own edit was refused (one too large to read names none, hence any error
          // while edits wait): the text goes back to the gateway's, without it
          // (the first reason: the edits after a refused one are refused in turn)
          if (!this.takingBack) this.refusal(`edit refused and taken back: ${event.error}`);
          this.takingBack = true;
          this.resync();
        } else {
          this.status(`! ${event.error}`, "error");
        }
        return;
      case "fatal":
        this.status(`! ${event.error}`, "error");
        return;
      default:
        return;
    }
    this.renderSoon();
  },

  // Draw once when the message from the gateway that brought these events is handled
  // (a batch of deliveries draws the text once, not once each): a microtask, which a
  // browser does not slow down in a background tab as it does a timer.
  // A text that takes long to draw (a paste of a megabyte: some 100 ms) is drawn at
  // most every few times that long, so that drawing does not hold up taking the rest.
  renderSoon() {
    if (this.renderDue) return;
    this.renderDue = true;
    const draw = () => {
      this.renderDue = false;
      if (this.replica !== null) this.render();
    };
    const wait = this.renderCost > SLOW_RENDER ? this.lastRender + 4 * this.renderCost - performance.now() : 0;
    if (wait > 0) setTimeout(draw, wait);
    else queueMicrotask(draw);
  },

  merge(clock) {
    for (const [k, v] of Object.entries(clock)) if ((this.clock[k] || 0) < v) this.clock[k] = v;
  },

  delivered(event) {
    const me = this.replica.me;
    this.merge(event.vc);
    this.clock[me] = (this.clock[me] || 0) + 1;
    let payload = event.other;
    if ("cursor" in event) payload = presence(event.cursor);
    else if ("op" in event) payload = event.op;
    this.replica.delivered(event.sender, payload, event.vc, event.id, event.superseded);
  },

  // The replica's send: through the gateway, with a provisional id for an edit.
  send(payload) {
    const me = this.replica.me;
    this.clock[me] = (this.clock[me] || 0) + 1;
    const clock = { ...this.clock };
    if (isPresence(payload)) {
      if (!this.replacing) this.connection.send({ type: "cursor", applied: 0, anchor: payload[1] });
      this.save();
      return { id: null, clock };
    }
    const local = `~L${this.nextLocal++}`;
    // kept until the gateway confirms it: sent now if connected, else after the rebase
    // on the state the tab gets back
    const wire = this.connection.isOpen && !this.replacing
      && this.connection.send({ type: "edit", applied: 0, local, op: payload });
    this.outbox.add(me, local, payload, wire, this.replica.text, clock[me]);
    this.save();
    return { id: `${me}#${local}`, clock, confirmed: false };
  },

  resync() {
    if (this.resyncing || !this.connection.isOpen) return;  // a welcome starts it again
    this.resyncing = true;
    this.resyncs += 1;
    this.status("starting again from the gateway's copy…", "connecting");
    this.connection.send({ type: "resync" });
  },

  // -- own edits (keys, and the tests) ----------------------------------------------------
  act(change) {
    if (this.replica === null) return;
    if (this.resyncing) {
      this.waiting.push(() => this.act(change));
      return;
    }
    change(this.replica);
    this.render();
  },

  // (an own edit clears the reason a previous one was taken back)
  insert(text) {
    if (text) this.act((replica) => { this.refusal(""); replica.insert(text); });
  },

  backspace() {
    this.act((replica) => { this.refusal(""); replica.backspace(); });
  },

  deleteForward() {
    this.act((replica) => { this.refusal(""); replica.delete(); });
  },

  moveTo(position) {
    this.act((replica) => replica.moveTo(position));
  },

  move(step) {
    this.act((replica) => replica.moveTo(replica.position + step));
  },

  // -- drawing ---------------------------------------------------------------------------
  render() {
    const started = performance.now();
    this.draw();
    this.lastRender = performance.now();
    this.renderCost = this.lastRender - started;
  },

  draw() {
    const replica = this.replica;
    const [text, mine, others] = replica.view();
    // positions count code points; a text without surrogate pairs (most) is cut as it
    // is, others as an array of code points
    const simple = !/[\uD800-\uDFFF]/.test(text);
    const value = simple ? text : [...text];
    const piece = simple ? (a, b) => text.slice(a, b) : (a, b) => value.slice(a, b).join("");
    const at = new Map();  // position -> members whose cursor is there
    for (const [member, position] of Object.entries(others)) {
      if (!at.has(position)) at.set(position, []);
      at.get(position).push(member);
    }
    // the text in one node per stretch between cursors (not a node per character: a
    // paste of 200 KiB would take seconds to draw)
    const marks = new Set([...at.keys(), mine].filter((p) => p >= 0 && p <= value.length));
    const parts = document.createDocumentFragment();
    let from = 0;
    for (const p of [...marks].sort((a, b) => a - b)) {
      if (p > from) parts.appendChild(document.createTextNode(piece(from, p)));
      from = p;
      for (const member of at.get(p) || []) {
        const span = document.createElement("span");
        span.className = `cursor ${this.colour(member)}`;
        span.dataset.member = member;
        span.dataset.position = p;
        parts.appendChild(span);
      }
      if (p === mine) {
        const caret = document.createElement("span");
        caret.className = "caret";
        caret.dataset.position = p;
        parts.appendChild(caret);
      }
    }
    if (from < value.length) parts.appendChild(document.createTextNode(piece(from, value.length)));
    view.replaceChildren(parts);
    const members = document.getElementById("members");
    members.replaceChildren(...replica.members.map((m) => {
      const span = document.createElement("span");
      span.textContent = m === replica.me ? `${m} (you)` : m;
      span.className = this.colour(m);
      span.dataset.member = m;
      return span;
    }));
    const unsent = this.outbox.entries.filter((e) => !e.wire).length;
    document.getElementById("footer").textContent =
      `${value.length} characters; ${replica.text.length - value.length} deleted kept; ` +
      `${replica.unconfirmed.length} unconfirmed` +
      (unsent ? ` (${unsent} kept until the connection is back)` : "") +
      `; ${replica.failures} failed`;
    view.dataset.applied = replica.applied;
    view.dataset.unconfirmed = replica.unconfirmed.length;
  },

  status(text, state) {
    const status = document.getElementById("status");
    status.textContent = text;
    status.className = state;
    if (state === "open") this.openStatus = [text, state];
  },

  // Why an own edit was taken back: shown until the next own edit.
  refusal(text) {
    const notice = document.getElementById("notice");
    notice.textContent = text;
    notice.className = text ? "error" : "";
  },
};

// Where the cursor's line starts and ends (in code points, as positions count).
function lineStart(replica) {
  const at = replica.position;
  return at ? [...replica.text.value].lastIndexOf("\n", at - 1) + 1 : 0;
}

function lineEnd(replica) {
  const value = [...replica.text.value];
  const k = value.indexOf("\n", replica.position);
  return k < 0 ? value.length : k;
}

view.addEventListener("keydown", (event) => {
  if (!editor.replica || event.ctrlKey || event.metaKey || event.altKey) return;
  let handled = true;
  if (event.key === "Enter") editor.insert("\n");
  else if (event.key === "Backspace") editor.backspace();
  else if (event.key === "Delete") editor.deleteForward();
  else if (event.key === "ArrowLeft") editor.move(-1);
  else if (event.key === "ArrowRight") editor.move(1);
  else if (event.key === "Home") editor.act((replica) => replica.moveTo(lineStart(replica)));
  else if (event.key === "End") editor.act((replica) => replica.moveTo(lineEnd(replica)));
  else if ([...event.key].length === 1) editor.insert(event.key);
  else handled = false;
  if (handled) event.preventDefault();
});

view.addEventListener("paste", (event) => {
  event.preventDefault();
  editor.insert(event.clipboardData.getData("text/plain"));
});

view.addEventListener("click", () => {
  // put the cursor where the click landed (the character offset in the view)
  const selection = window.getSelection();
  if (!selection.rangeCount || !editor.replica) return;
  const range = selection.getRangeAt(0);
  const before = document.createRange();
  before.selectNodeContents(view);
  before.setEnd(range.startContainer, range.startOffset);
  editor.moveTo([...before.toString()].length);
});

// leaving the page (a reload): what is not confirmed is kept for the next page
window.addEventListener("pagehide", () => editor.save(true));

editor.connection = new Connection("edit", editor);
window.editor = editor;
claimStorage("edit").then((claim) => {
  editor.storage = claim.key;
  editor.claim = claim;
  editor.connection.open();
});
view.focus();
