// The editor page: the tab's editor replica (editor.js, the Python EditorReplica in
// JavaScript) on the gateway's WebSocket, shown and edited in CodeMirror 6 (edit_view.js,
// bound to the replica by cm_binding.js) with the others' cursors in their person's
// colour (colours.js: the same in every tab and in the terminal). Typing is applied at once, with a provisional id and the clock the tab
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
import { Binding, itemsIn, offsetAfter, rangesOf, remote } from "/static/cm_binding.js";
import { deleteCharForward } from "/static/codemirror.js";
import { colourSlot } from "/static/colours.js";
import { EditorReplica, RUN_LIMIT, isPresence, presence } from "/static/editor.js";
import { deleteClusterBackward, makeView, setCursors } from "/static/edit_view.js";
import { Outbox } from "/static/outbox.js";

const box = document.getElementById("text");
const PROVISIONAL_ID = /^(.*#~L\d+)(\+\d+)?$/;
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

// The most ids of a delete the gateway takes, and its bytes of ids.
function deleteLimits(limits) {
  if (!limits) return [RUN_LIMIT, 64 * 1024];
  return [limits.delete, limits.message - REQUEST_OVERHEAD];
}

const editor = {
  replica: null,
  view: null,               // CodeMirror's
  binding: null,
  stale: true,              // the view may not show the replica's text (a new replica)
  held: null,               // the edits made while resyncing (a change set: later())
  selectionEnd: undefined,  // the own selection's other end as last told (undefined: none)
  deleteLimit: RUN_LIMIT,
  deleteBytes: 64 * 1024,
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

  colour(member) {
    return `c${colourSlot(displayName(member))}`;
  },

  // -- the connection's events --------------------------------------------------------
  start(welcome) {
    this.runLimit = runLimit(welcome.limits);
    [this.deleteLimit, this.deleteBytes] = deleteLimits(welcome.limits);
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

  // An id the tab gave (provisional) by the message id the gateway confirmed it as,
  // when it did (a confirmation that came during a resync did not rename the characters).
  realId(id) {
    const parts = PROVISIONAL_ID.exec(id);
    const real = parts && this.outbox.renamed[parts[1]];
    return real ? real + (parts[2] || "") : id;
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
    this.binding.pending = [];  // the state holds what they would change
    this.binding.rebind(this.replica.text, (id) => this.realId(id));
    this.stale = true;
    this.clock = { ...event.clock };
    if (this.resyncing && this.openStatus) this.status(...this.openStatus);
    this.resyncing = false;
    this.takingBack = false;
    if (then) then();
    const waiting = this.waiting;
    this.waiting = [];
    this.syncView(true);
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
      case "stable":
        this.outbox.stable(event.ids);
        this.save();
        return;
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
  // (a batch of deliveries is one CodeMirror transaction, not one each): a microtask,
  // which a browser does not slow down in a background tab as it does a timer, and
  // which runs before the next key: the view shows the replica's text whenever the
  // person's next transaction is made.
  renderSoon() {
    if (this.renderDue) return;
    this.renderDue = true;
    queueMicrotask(() => {
      this.renderDue = false;
      if (this.replica !== null) this.render();
    });
  },

  merge(clock) {
    for (const [k, v] of Object.entries(clock)) if ((this.clock[k] || 0) < v) this.clock[k] = v;
  },

  delivered(event) {
    const me = this.replica.me;
    this.merge(event.vc);
    this.clock[me] = (this.clock[me] || 0) + 1;
    let payload = event.other;
    if ("cursor" in event) payload = presence(event.cursor, event.other);
    else if ("op" in event) payload = event.op;
    const replica = this.replica;
    const failures = replica.failures;
    const after = event.sender === me ? null : this.binding.delivering(payload, event.id);
    replica.delivered(event.sender, payload, event.vc, event.id, event.superseded);
    if (after !== null) after(replica.failures === failures);
  },

  // The replica's send: through the gateway, with a provisional id for an edit.
  send(payload) {
    const me = this.replica.me;
    this.clock[me] = (this.clock[me] || 0) + 1;
    const clock = { ...this.clock };
    if (isPresence(payload)) {
      const request = { type: "cursor", applied: 0, anchor: payload[1] };
      if (payload.length === 3) request.other = payload[2];  // a selection's other end
      if (!this.replacing) this.connection.send(request);
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

  // -- the view's transactions ----------------------------------------------------------
  // Every CodeMirror transaction: the person's edits are sent (the replica applies them
  // with provisional ids) before the view takes them; the replica's own changes (marked
  // remote) are only shown. While the page starts again from the gateway's state
  // (resync), an edit waits for it, held by the ids of the characters it names.
  dispatch(trs, view) {
    for (const tr of trs) {
      if (tr.docChanged && !tr.annotation(remote) && !this.local(tr)) return;
      view.update([tr]);
      if (!tr.annotation(remote) && (tr.selection || tr.docChanged)) this.announce();
    }
    if (trs.some((tr) => tr.docChanged && !tr.annotation(remote))) this.renderSoon();
  },

  local(tr) {
    const replica = this.replica;
    if (replica === null) return false;
    if (this.resyncing) {
      this.later(tr);
      return false;
    }
    this.refusal("");  // an own edit clears the reason a previous one was taken back
    this.binding.record(this.binding.send(tr), tr);
    return true;
  },

  // The edits made while resyncing, as a function that makes them again on the text to
  // come. The view does not take them meanwhile, so each one is in the offsets of the
  // text before them all: they are gathered in one change set (a later one mapped after
  // the earlier ones: keys typed one after the other stay in their order), and made
  // again by the ids of the characters they delete and insert after, the cursor after
  // the last insert.
  later(tr) {
    if (this.held !== null) {
      this.held = this.held.compose(tr.changes.map(this.held));
      return;
    }
    this.held = tr.changes;
    const text = this.replica.text;
    this.waiting.push(() => {
      const changes = [];
      this.held.iterChanges((fromA, toA, _fromB, _toB, inserted) => {
        const { before, items } = itemsIn(text, fromA, toA);
        changes.push({ ids: items.map((i) => i.id), after: before === null ? null : before.id,
          insert: inserted.toString() });
      });
      this.held = null;
      for (const change of changes) {
        const now = this.replica.text;
        const parts = rangesOf(now, change.ids).map(([from, to]) => ({ from, to }));
        const at = offsetAfter(now, change.after);
        const spec = { userEvent: "input" };
        if (change.insert && at !== null) {
          parts.push({ from: at, insert: change.insert });
          spec.selection = { anchor: at + change.insert.length };
          // (the deletes before it in this change shift it back)
          for (const { from, to } of parts) if (to !== undefined && to <= at) spec.selection.anchor -= to - from;
        }
        if (parts.length) this.view.dispatch({ ...spec, changes: parts });
      }
    });
  },

  // Tell the others where the own cursor is (after the character before it) and the
  // other end of the own selection, when either moved.
  announce() {
    const replica = this.replica;
    if (replica === null || this.resyncing) return;
    const { head, anchor: end, empty } = this.view.state.selection.main;
    const idBefore = (at) => {
      const { before } = itemsIn(replica.text, at, at);
      return before === null ? null : before.id;
    };
    const anchor = idBefore(head);
    const other = empty ? undefined : idBefore(end);
    if (anchor === replica.cursor && other === this.selectionEnd) return;
    this.selectionEnd = other;
    replica._own(presence(anchor, other));
  },

  // The view as the replica's text, by one change between what differs (a new replica:
  // a resync, a reload's kept edits put back), the own cursor where the replica has it
  // when `cursor`.
  syncView(cursor = false) {
    const view = this.view;
    const doc = view.state.doc.toString();
    const value = this.replica.text.value;
    this.stale = false;
    const spec = { annotations: remote.of(true) };
    if (doc !== value) {
      let from = 0;
      const most = Math.min(doc.length, value.length);
      while (from < most && doc.charCodeAt(from) === value.charCodeAt(from)) from += 1;
      let tail = 0;
      while (tail < most - from
             && doc.charCodeAt(doc.length - 1 - tail) === value.charCodeAt(value.length - 1 - tail)) {
        tail += 1;
      }
      // never between the two halves of a surrogate pair
      if (from > 0 && /[\uD800-\uDBFF]/.test(doc[from - 1])) from -= 1;
      if (tail > 0 && /[\uDC00-\uDFFF]/.test(doc[doc.length - tail])) tail -= 1;
      spec.changes = { from, to: doc.length - tail, insert: value.slice(from, value.length - tail) };
    }
    if (cursor) {
      const at = offsetAfter(this.replica.text, this.replica.cursor);
      spec.selection = { anchor: Math.min(at === null ? 0 : at, value.length) };
    }
    if (spec.changes || spec.selection) view.dispatch(spec);
  },

  // -- own edits as a person makes them (the tests and the benchmark) --------------------
  act(change) {
    if (this.replica === null) return;
    if (this.resyncing) {
      this.waiting.push(() => this.act(change));
      return;
    }
    this.binding.flush();
    change(this.view);
  },

  insert(text) {
    if (text) this.act((view) => view.dispatch(view.state.replaceSelection(text), { userEvent: "input.type" }));
  },

  backspace() {
    this.act((view) => deleteClusterBackward(view));
  },

  deleteForward() {
    this.act((view) => deleteCharForward(view));
  },

  // Put the cursor before the character at `position` (code points, as the replica counts).
  moveTo(position) {
    this.act((view) => {
      const clamped = Math.max(0, Math.min(position, this.replica.text.visibleLength()));
      const at = offsetAfter(this.replica.text, this.replica.text.anchor(clamped));
      view.dispatch({ selection: { anchor: at }, scrollIntoView: true, userEvent: "select" });
    });
  },

  // The own cursor's place in code points.
  get position() {
    const head = this.view.state.selection.main.head;
    return [...this.view.state.doc.sliceString(0, head)].length;
  },

  move(step) {
    this.moveTo(this.position + step);
  },

  text() {
    return this.view.state.doc.toString();
  },

  undo() {
    return this.replica !== null && !this.resyncing && this.binding.undo();
  },

  redo() {
    return this.replica !== null && !this.resyncing && this.binding.redo();
  },

  // -- drawing ---------------------------------------------------------------------------
  render() {
    this.binding.flush();
    if (this.stale) this.syncView();
    this.draw();
  },

  draw() {
    const replica = this.replica;
    const text = replica.text;
    // the others' cursors, one widget per place (their names never overprint)
    const at = new Map();
    for (const [member, anchor] of Object.entries(replica.cursors)) {
      if (!replica.members.includes(member)) continue;
      const offset = offsetAfter(text, anchor);
      if (offset === null) continue;
      if (!at.has(offset)) at.set(offset, []);
      at.get(offset).push([member, this.colour(member)]);
    }
    const length = this.view.state.doc.length;
    const cursors = [...at.entries()].filter(([p]) => p <= length).sort((a, b) => a[0] - b[0]);
    // their selections, from the cursor to the other end
    const selections = [];
    for (const [member, other] of Object.entries(replica.selections)) {
      if (!replica.members.includes(member) || !(member in replica.cursors)) continue;
      const ends = [offsetAfter(text, replica.cursors[member]), offsetAfter(text, other)];
      if (ends.includes(null) || ends[0] === ends[1] || Math.max(...ends) > length) continue;
      selections.push([Math.min(...ends), Math.max(...ends), member, this.colour(member)]);
    }
    this.view.dispatch({ effects: setCursors.of({ cursors, selections }),
      annotations: remote.of(true) });
    const members = document.getElementById("members");
    members.replaceChildren(...replica.members.map((m) => {
      const span = document.createElement("span");
      span.textContent = m === replica.me ? `${m} (you)` : m;
      span.className = this.colour(m);
      span.dataset.member = m;
      return span;
    }));
    const unsent = this.outbox.entries.filter((e) => !e.wire).length;
    const shown = text.visibleLength();
    document.getElementById("counters").textContent =
      `${shown} characters; ${text.length - shown} deleted kept; ` +
      `${replica.unconfirmed.length} unconfirmed` +
      (unsent ? ` (${unsent} kept until the connection is back)` : "") +
      `; ${replica.failures} failed`;
    box.dataset.applied = replica.applied;
    box.dataset.unconfirmed = replica.unconfirmed.length;
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

editor.binding = new Binding(editor);
editor.view = makeView(box, {
  dispatch: (trs, view) => editor.dispatch(trs, view),
  undo: () => editor.undo(),
  redo: () => editor.redo(),
});
editor.binding.view = editor.view;

// leaving the page (a reload): what is not confirmed is kept for the next page
window.addEventListener("pagehide", () => editor.save(true));

editor.connection = new Connection("edit", editor);
window.editor = editor;
claimStorage("edit").then((claim) => {
  editor.storage = claim.key;
  editor.claim = claim;
  editor.connection.open();
});
editor.view.focus();
