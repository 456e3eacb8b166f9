// One member's editor of the shared text, in the browser: the Python class
// groupcomm.replicated.editor.EditorReplica, method for method and in the same order
// (JavaScript's camelCase for Python's snake_case: moveTo is move_to, memberJoined
// member_joined), so a reader can hold one against the other. See the Python module's
// doc for what it does.
//
// What differs is what the browser needs: own operations go out through the gateway,
// which answers with the message id and tag each got. So the page's send() returns a
// provisional id, `${me}#~L${n}`, and the clock the tab expects, and confirmed() renames
// the operation's characters once the answer comes. Each keystroke is applied once. The
// provisional id orders against other members' ids as the real one will (both start
// with `${me}#`), and the expected clock is the real one unless something the tab
// cannot see moved the member's clock (a join marker for a newcomer, a refused send):
// confirmed() then says so, and the page starts again from the gateway's state. No
// collection happens while an own operation is unconfirmed. The page's connection
// (client.js) counts the deliveries for acknowledged delivery, and the gateway's mirror
// of the tab gives newcomers their snapshot, so this class keeps neither.
import { Stability, TextSequence, clockSum } from "./text_sequence.js";

export const COLLECT_EVERY = 64;
export const RUN_LIMIT = 16384;
export const PRESENCE = "cursor";

// A cursor after `anchor`; with a selection, one from there to after `other`.
export function presence(anchor, other = undefined) {
  return other === undefined ? [PRESENCE, anchor] : [PRESENCE, anchor, other];
}

export function isPresence(payload) {
  return Array.isArray(payload) && (payload.length === 2 || payload.length === 3)
    && payload[0] === PRESENCE
    && payload.slice(1).every((p) => p === null || typeof p === "string");
}

export function lastId(opId, length) {
  return length === 1 ? opId : `${opId}+${length - 1}`;
}

export function touches(op, anchor) {
  if (op[0] === "insert") return op[1] === anchor;
  return anchor !== null && (op[1] === anchor || (Array.isArray(op[1]) && op[1].includes(anchor)));
}

function length(text) {
  return [...text].length;  // code points, as Python counts
}

export class EditorReplica {
  // send(payload) -> {id, clock, confirmed}: confirmed false when the id and clock are
  // provisional (see confirmed()); null: a replica that makes no edits of its own.
  // runLimit: the longest insert sent (the page takes it from the gateway's limits).
  constructor(me, send = null, { members = [], coalesce = false, collect = true,
    runLimit = RUN_LIMIT } = {}) {
    this.send = send;
    this.coalesce = coalesce;
    this.runLimit = runLimit;
    this.collect = collect;
    this.text = new TextSequence();
    this.pending = null;      // typed characters not sent yet: {after, text}
    this.cursor = null;
    this.cursors = {};        // member -> anchor
    this.selections = {};     // member -> the anchor of its selection's other end
    this.applied = 0;
    this.collected = 0;
    this.failures = 0;
    this.lastFailure = "";
    this.version = 0;
    this.cachedValue = null;
    this.unconfirmed = [];    // own operations sent, not confirmed yet: {id, clock, done}
    this.collectDue = false;
    this.joined(me, members);
  }

  joined(me, members) {
    this.me = me;
    this.members = [...new Set(members.length ? members : [me])];
    this.stability = new Stability(me, this.members);
    this._changed(false);
  }

  // -- own edits -------------------------------------------------------------------------
  get position() {
    if (this.pending !== null) return this.place(this.pending.after) + length(this.pending.text);
    return this.place(this.cursor);
  }

  place(anchor) {
    const found = this.text.position(anchor);
    return found === null ? 0 : found;
  }

  insert(text) {
    if (!text) return false;
    if (this.coalesce && length(text) === 1 && text !== "\n") {
      if (this.pending === null) {
        this.pending = { after: this.cursor, text };
        this._changed(false);
        return true;
      }
      this.pending.text += text;
      this._changed(false);
      if (length(this.pending.text) >= this.runLimit) this.flush();
      return false;
    }
    this.flush();
    const chars = [...text];
    for (let start = 0; start < chars.length; start += this.runLimit) {
      const run = chars.slice(start, start + this.runLimit).join("");
      this._own(this.text.prepareInsert(this.place(this.cursor), run));
    }
    return false;
  }

  flush() {
    const pending = this.pending;
    this.pending = null;
    if (pending === null) return;
    // after the visible character before its place (see the Python method)
    const after = this.text.anchor(this.place(pending.after));
    try {
      this._own(["insert", after, pending.text]);
    } catch (error) {
      this.pending = pending;
      throw error;
    }
  }

  backspace() {
    const pending = this.pending;
    if (pending !== null) {
      pending.text = [...pending.text].slice(0, -1).join("");
      if (!pending.text) this.pending = null;
      this._changed(false);
      return;
    }
    const at = this.place(this.cursor);
    if (at) this._own(this.text.prepareDelete(at - 1));
  }

  delete() {
    this.flush();
    const at = this.place(this.cursor);
    if (at < this.text.visibleLength()) this._own(this.text.prepareDelete(at));
  }

  moveTo(position, announce = true) {
    this.flush();
    const clamped = Math.max(0, Math.min(position, this.text.visibleLength()));
    const anchor = this.text.anchor(clamped);
    if (anchor === this.cursor) return;
    if (announce) {
      this._own(presence(anchor));
    } else {
      this.cursor = anchor;
      this._changed(false);
    }
  }

  _own(payload) {
    if (this.send === null) throw new Error(`${this.me}'s replica sends nothing of its own`);
    const { id, clock, confirmed } = this.send(payload);
    if (confirmed !== false) {
      this.sent(payload, id, clock);
      return id;
    }
    // waiting before it is applied: nothing is collected until it is confirmed
    const waiting = { id, clock, done: null };
    this.unconfirmed.push(waiting);
    try {
      waiting.done = this.sent(payload, id, clock);
    } finally {
      if (waiting.done === null) this.unconfirmed.splice(this.unconfirmed.indexOf(waiting), 1);
    }
    return id;
  }

  sent(payload, id, clock) {
    if (isPresence(payload)) {
      this.cursor = payload[1];
      this._changed(false);
      return null;
    }
    const done = this.text.effect(payload, clock, id);
    this.cursor = this._follow(payload, id);
    this._applied(this.me, clock);
    this._changed();
    return done;
  }

  // The gateway sent the own operation `provisional` as message `id` with tag `clock`.
  // False when the tag's timestamp differs from the one the operation was placed with:
  // the page must start again from the gateway's state.
  confirmed(provisional, id, clock) {
    const at = this.unconfirmed.findIndex((u) => u.id === provisional);
    if (at < 0) return true;
    const [own] = this.unconfirmed.splice(at, 1);
    if (clockSum(clock) !== clockSum(own.clock)) return false;
    this.text.confirm(own.done, id, clock);
    const rename = (anchor) => (anchor === provisional
      || (anchor !== null && anchor.startsWith(`${provisional}+`))
      ? id + anchor.slice(provisional.length) : anchor);
    this.cursor = rename(this.cursor);
    if (this.pending !== null) this.pending.after = rename(this.pending.after);
    this.stability.delivered(this.me, clock);
    this._collect();
    this._changed();
    return true;
  }

  checkOwn(op) {
    if (!Array.isArray(op) || op.length < 2 || !["insert", "delete"].includes(op[0])) {
      throw new Error(`not a text operation: ${JSON.stringify(op).slice(0, 80)}`);
    }
    let named;
    if (op[0] === "insert") named = op[1] === null ? [] : [op[1]];
    else named = typeof op[1] === "string" ? [op[1]] : op[1];
    for (const ident of named) {
      if (this.text.position(ident) === null) {
        throw new Error(`the operation names ${ident}, which is not in ${this.me}'s text`);
      }
    }
  }

  // -- deliveries ------------------------------------------------------------------------
  delivered(sender, payload, clock, messageId, superseded = false) {
    if (sender === this.me) return false;
    if (isPresence(payload)) {
      // its tag says what its sender had delivered: a member that only moves its cursor
      // does not hold collection back
      this.stability.delivered(sender, clock);
      if (!superseded) {
        this.cursors[sender] = payload[1];
        if (payload.length === 3) this.selections[sender] = payload[2];
        else delete this.selections[sender];
        this._changed(false);
      }
      return false;
    }
    try {
      this.text.effect(payload, clock, messageId);
    } catch (error) {
      this.failures += 1;
      this.lastFailure = `${messageId} from ${sender}: ${error.message}`;
      console.warn(`${this.me} could not apply ${this.lastFailure}`);
      this._changed(false);
      return false;
    }
    this.cursors[sender] = this._follow(payload, messageId);
    delete this.selections[sender];  // an edit leaves its maker's cursor, no selection
    this._applied(sender, clock);
    this._changed();
    return this.pending !== null && touches(payload, this.pending.after);
  }

  _follow(op, id) {
    if (op[0] === "insert") return lastId(id, length(op[2]));
    const first = typeof op[1] === "string" ? op[1] : op[1][0];
    return this.text.anchor(this.place(first));
  }

  _applied(sender, clock) {
    this.stability.delivered(sender, clock);
    this.applied += 1;
    if (this.collect && this.applied % COLLECT_EVERY === 0) this.collectDue = true;
    this._collect();
  }

  // `member`, which may send nothing, acknowledged what it has delivered: what that
  // settles is collected now, not at the next edit (there may be none)
  acknowledged(member, clock) {
    if (this.stability.acknowledged(member, clock) && this.collect) {
      this.collectDue = true;
      this._collect();
    }
  }

  _collect() {
    // not while an own operation still has its provisional id and clock
    if (!this.collectDue || this.unconfirmed.length) return;
    this.collectDue = false;
    this.cursor = this.text.anchor(this.place(this.cursor));
    if (this.pending !== null) this.pending.after = this.text.anchor(this.place(this.pending.after));
    for (const member of Object.keys(this.cursors)) {
      this.cursors[member] = this.text.anchor(this.place(this.cursors[member]));
    }
    for (const member of Object.keys(this.selections)) {
      this.selections[member] = this.text.anchor(this.place(this.selections[member]));
    }
    this.collected += this.text.collect(this.stability);
  }

  // -- members ---------------------------------------------------------------------------
  memberJoined(member, members = null) {
    if (members !== null) this.members = [...members];
    else if (!this.members.includes(member)) this.members.push(member);
    this.stability.memberJoined(member);
    this._changed(false);
  }

  memberLeft(member) {
    this.members = this.members.filter((m) => m !== member);
    delete this.cursors[member];
    delete this.selections[member];
    this.stability.memberLeft(member);
    this._changed(false);
  }

  // -- state transfer --------------------------------------------------------------------
  // A snapshot's state ({items: the text's state, cursors}): the gateway's mirror of this
  // member's (its own cursor comes back too), or another member's.
  install(state) {
    let text;
    try {
      text = TextSequence.fromState(state.items);
    } catch (error) {
      console.warn(`${this.me}: the text received is unusable (${error.message})`);
      return false;
    }
    this.text = text;
    Object.assign(this.cursors, state.cursors || {});
    if (this.me in this.cursors) this.cursor = this.cursors[this.me];
    delete this.cursors[this.me];
    this._changed();
    return true;
  }

  // -- reading ---------------------------------------------------------------------------
  // [text, cursor position, {member: position}], positions in code points.
  view() {
    if (this.cachedValue === null) this.cachedValue = this.text.value;
    let value = this.cachedValue;
    const pending = this.pending;
    const at = this.place(pending !== null ? pending.after : this.cursor);
    let shift = 0;
    if (pending !== null) {
      shift = length(pending.text);
      const chars = [...value];  // code points (not spread into a call: any length)
      value = chars.slice(0, at).join("") + pending.text + chars.slice(at).join("");
    }
    const others = {};
    for (const [member, anchor] of Object.entries(this.cursors)) {
      const found = this.text.position(anchor);
      if (found !== null && this.members.includes(member)) {
        others[member] = found > at ? found + shift : found;
      }
    }
    return [value, at + shift, others];
  }

  _changed(text = true) {
    this.version += 1;
    if (text) this.cachedValue = null;
  }
}
