// The editor page: a replica of the shared text in the tab (text_sequence.js, the same
// rules as the Python type), so typing is applied at once. An own edit is applied with
// a provisional id ("~L1") and the clock this tab expects; the gateway sends it and
// answers with the message id and tag it got, and the tab then takes back its edits
// not yet confirmed, applies the confirmed one with its real id and tag, and applies
// the others again: nothing else can refer to them yet, so the result is the text
// every other replica has. The others' cursors are drawn in their colours.
import { Connection, displayName } from "/static/client.js";
import { Stability, TextSequence } from "/static/text_sequence.js";

const COLLECT_EVERY = 64;
const COLOURS = 6;
const view = document.getElementById("text");

const editor = {
  me: null,
  text: new TextSequence(),
  stability: null,
  members: [],
  colours: {},
  cursor: null,             // anchor of this tab's cursor
  cursors: {},              // member -> anchor
  clock: {},                // this tab's estimate of its application clock
  pending: [],              // own edits not confirmed: {local, op, clock, done}
  renamed: new Map(),       // provisional id -> message id
  nextLocal: 1,
  applied: 0,
  failures: 0,
  connection: null,

  // -- ids ----------------------------------------------------------------------------
  real(id) {
    if (id === null || !id.startsWith("~")) return id;
    const [base, offset] = id.split("+");
    const found = this.renamed.get(base);
    if (found === undefined) return id;
    return offset === undefined ? found : `${found}+${offset}`;
  },

  translate(op) {
    if (op[0] === "insert") return ["insert", this.real(op[1]), op[2]];
    const target = op[1];
    return ["delete", typeof target === "string" ? this.real(target) : target.map((t) => this.real(t))];
  },

  colour(member) {
    const name = displayName(member);
    if (!(name in this.colours)) this.colours[name] = `c${Object.keys(this.colours).length % COLOURS}`;
    return this.colours[name];
  },

  // -- the connection's events --------------------------------------------------------
  start(welcome) {
    this.me = welcome.member;
    this.members = welcome.members;
    this.text = TextSequence.fromState(welcome.state.items);
    this.cursors = { ...welcome.state.cursors };
    delete this.cursors[this.me];
    this.cursor = null;
    this.clock = { ...welcome.clock };
    this.pending = [];
    this.renamed = new Map();
    this.stability = new Stability(this.me, this.members);
    this.render();
  },

  event(event) {
    switch (event.type) {
      case "deliver":
        this.delivered(event);
        break;
      case "sent":
        this.confirmed(event);
        break;
      case "joined":
        this.members = event.members;
        this.stability.memberJoined(event.member);
        break;
      case "left":
        this.members = event.members;
        this.stability.memberLeft(event.member);
        delete this.cursors[event.member];
        break;
      case "error":
      case "fatal":
        this.status(`! ${event.error}`, "error");
        if (event.ref) this.dropPending(event.ref);
        return;
      default:
        return;
    }
    this.render();
  },

  merge(clock) {
    for (const [k, v] of Object.entries(clock)) if ((this.clock[k] || 0) < v) this.clock[k] = v;
  },

  delivered(event) {
    this.merge(event.vc);
    this.clock[this.me] = (this.clock[this.me] || 0) + 1;
    if (event.sender === this.me) return;  // an own edit sent to oneself: applied already
    if ("cursor" in event) {
      if (!event.superseded) this.cursors[event.sender] = event.cursor;
      return;
    }
    if (!("op" in event)) return;
    try {
      this.text.effect(event.op, event.vc, event.id);
    } catch (error) {
      this.failures += 1;
      console.warn(`could not apply ${event.id}: ${error.message}`);
      return;
    }
    this.follow(event.sender, event.op, event.id);
    this.stability.delivered(event.sender, event.vc);
    this.appliedOne();
  },

  follow(sender, op, id) {
    if (op[0] === "insert") {
      this.cursors[sender] = op[2].length === 1 ? id : `${id}+${[...op[2]].length - 1}`;
    } else {
      const first = typeof op[1] === "string" ? op[1] : op[1][0];
      this.cursors[sender] = this.text.anchor(Math.max(0, this.text.position(first) || 0));
    }
  },

  appliedOne() {
    this.applied += 1;
    if (this.applied % COLLECT_EVERY === 0 && !this.pending.length) {
      // anchors on tombstones move to the visible character before them first
      this.cursor = this.text.anchor(this.place(this.cursor));
      for (const m of Object.keys(this.cursors)) this.cursors[m] = this.text.anchor(this.place(this.cursors[m]));
      this.text.collect(this.stability);
    }
  },

  // The gateway sent the oldest pending edit as message `id` with tag `vc`.
  confirmed(event) {
    if (!this.pending.length || this.pending[0].local !== event.local) return;
    for (const p of [...this.pending].reverse()) this.text.undo(p.done);
    const first = this.pending.shift();
    this.renamed.set(first.local, event.id);
    first.done = this.text.effect(this.translate(first.op), event.vc, event.id);
    this.merge(event.vc);
    this.stability.delivered(this.me, event.vc);
    for (const p of this.pending) {
      p.op = this.translate(p.op);
      p.done = this.text.effect(p.op, p.clock, p.local);
    }
    this.cursor = this.real(this.cursor);
    this.appliedOne();
  },

  dropPending(local) {
    // the gateway refused an own edit: take it back with those made after it
    const at = this.pending.findIndex((p) => p.local === local);
    if (at < 0) return;
    for (const p of this.pending.slice(at).reverse()) this.text.undo(p.done);
    this.pending = this.pending.slice(0, at);
    this.cursor = this.text.anchor(this.place(this.cursor));
    this.render();
  },

  // -- own edits ------------------------------------------------------------------------
  place(anchor) {
    const found = this.text.position(anchor);
    return found === null ? 0 : found;
  },

  edit(op) {
    const local = `~L${this.nextLocal++}`;
    this.clock[this.me] = (this.clock[this.me] || 0) + 1;
    const clock = { ...this.clock };
    const done = this.text.effect(op, clock, local);
    this.pending.push({ local, op, clock, done });
    this.connection.send({ type: "edit", applied: 0, local, op });
    return local;
  },

  insert(text) {
    if (!text) return;
    const op = this.text.prepareInsert(this.place(this.cursor), text);
    const local = this.edit(op);
    const length = [...text].length;
    this.cursor = length === 1 ? local : `${local}+${length - 1}`;
    this.render();
  },

  backspace() {
    const at = this.place(this.cursor);
    if (at === 0) return;
    const before = this.text.anchor(at - 1);
    this.edit(this.text.prepareDelete(at - 1));
    this.cursor = before;
    this.render();
  },

  deleteForward() {
    const at = this.place(this.cursor);
    if (at >= this.text.visibleLength()) return;
    this.edit(this.text.prepareDelete(at));
    this.render();
  },

  moveTo(position) {
    const clamped = Math.max(0, Math.min(position, this.text.visibleLength()));
    const anchor = this.text.anchor(clamped);
    if (anchor === this.cursor) return;
    this.cursor = anchor;
    this.clock[this.me] = (this.clock[this.me] || 0) + 1;
    this.connection.send({ type: "cursor", applied: 0, anchor });
    this.render();
  },

  // -- drawing ---------------------------------------------------------------------------
  render() {
    const value = [...this.text.value];
    const mine = this.place(this.cursor);
    const at = new Map();  // position -> members whose cursor is there
    for (const [member, anchor] of Object.entries(this.cursors)) {
      if (!this.members.includes(member)) continue;
      const found = this.text.position(anchor);
      if (found === null) continue;
      if (!at.has(found)) at.set(found, []);
      at.get(found).push(member);
    }
    const parts = document.createDocumentFragment();
    for (let p = 0; p <= value.length; p += 1) {
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
      if (p < value.length) parts.appendChild(document.createTextNode(value[p]));
    }
    view.replaceChildren(parts);
    const members = document.getElementById("members");
    members.replaceChildren(...this.members.map((m) => {
      const span = document.createElement("span");
      span.textContent = m === this.me ? `${m} (you)` : m;
      span.className = this.colour(m);
      span.dataset.member = m;
      return span;
    }));
    document.getElementById("footer").textContent =
      `${value.length} characters; ${this.text.length - value.length} deleted kept; ` +
      `${this.pending.length} unconfirmed; ${this.failures} failed`;
    view.dataset.applied = this.applied;
    view.dataset.pending = this.pending.length;
  },

  status(text, state) {
    const status = document.getElementById("status");
    status.textContent = text;
    status.className = state;
  },
};

function lineStart(position) {
  const value = editor.text.value;
  const k = value.lastIndexOf("\n", position - 1);
  return k + 1;
}

view.addEventListener("keydown", (event) => {
  if (!editor.stability || event.ctrlKey || event.metaKey || event.altKey) return;
  const at = editor.place(editor.cursor);
  let handled = true;
  if (event.key === "Enter") editor.insert("\n");
  else if (event.key === "Backspace") editor.backspace();
  else if (event.key === "Delete") editor.deleteForward();
  else if (event.key === "ArrowLeft") editor.moveTo(at - 1);
  else if (event.key === "ArrowRight") editor.moveTo(at + 1);
  else if (event.key === "Home") editor.moveTo(lineStart(at));
  else if (event.key === "End") {
    const k = editor.text.value.indexOf("\n", at);
    editor.moveTo(k < 0 ? editor.text.visibleLength() : k);
  } else if (event.key.length === 1 || [...event.key].length === 1) editor.insert(event.key);
  else handled = false;
  if (handled) event.preventDefault();
});

view.addEventListener("paste", (event) => {
  event.preventDefault();
  if (editor.stability) editor.insert(event.clipboardData.getData("text/plain"));
});

view.addEventListener("click", () => {
  // put the cursor where the click landed (the character offset in the view)
  const selection = window.getSelection();
  if (!selection.rangeCount || !editor.stability) return;
  const range = selection.getRangeAt(0);
  const before = document.createRange();
  before.selectNodeContents(view);
  before.setEnd(range.startContainer, range.startOffset);
  editor.moveTo([...before.toString()].length);
});

editor.connection = new Connection("edit", editor);
window.editor = editor;
editor.connection.open();
view.focus();
