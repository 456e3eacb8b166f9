// What the chat page (im.js) keeps in the tab's session storage, so that a reload keeps
// it: its own lines not answered yet (the outbox, shown as waiting), those answered but
// not yet known to be at every receiver (kept: a gateway killed before the line left it
// would lose it; the gateway says `stable` when every receiver's process has it), and
// the lasting ids of the lines it showed (a line sent again is shown once). The methods
// are the chat object's (Object.assign in im.js): `this` is the chat.

import { person } from "/static/client.js";

// ids of lines shown that a tab remembers (a line sent again comes within seconds)
const LINES_KEPT = 500;
// answered lines kept until they are stable; the oldest beyond this go (counted)
const ANSWERED_KEPT = 500;

// A lasting id for an own line, the same each time it is sent.
export function lineId() {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
}

export const keeping = {
  // The lines waiting to be sent, kept under `key` (drawn as waiting again).
  attach(key) {
    if (this.outboxKey === key) return;
    this.outboxKey = key;
    let kept = [];
    try {
      kept = JSON.parse(sessionStorage.getItem(key) || "[]");
    } catch (error) {
      console.warn(`the kept lines are unreadable (${error.message}); starting without`);
    }
    for (const entry of Array.isArray(kept) ? kept : []) {
      entry.local = `c${this.nextLocal++}`;
      if (!entry.line) entry.line = lineId();
      this.outbox.push(entry);
      this.drawWaiting(entry);
    }
  },

  // The answered lines kept (a reload keeps them, as it keeps the waiting ones).
  attachKept(key) {
    if (this.keptKey === key) return;
    this.keptKey = key;
    try {
      const kept = JSON.parse(sessionStorage.getItem(key) || "[]");
      if (Array.isArray(kept)) this.kept = kept.filter((e) => e && e.id).concat(this.kept);
    } catch (error) {
      console.warn(`the answered lines kept are unreadable (${error.message}); starting without`);
    }
  },

  save() {
    const fields = ({ line, text, to, member, wire, said, id }) =>
      ({ line, text, to, member, wire, said, id });
    for (const [key, entries, what] of [[this.outboxKey, this.outbox, "waiting"],
      [this.keptKey, this.kept, "answered"]]) {
      if (key === null) continue;
      try {
        sessionStorage.setItem(key, JSON.stringify(entries.map(fields)));
      } catch (error) {
        console.warn(`could not keep the ${what} lines: ${error.message}`);
      }
    }
  },

  // The private lines shown, by id, kept with the tab (a reload keeps them): one sent
  // again after a drop that had arrived the first time is not shown twice.
  attachLines(key) {
    if (this.linesKey === key) return;
    this.linesKey = key;
    try {
      const kept = JSON.parse(sessionStorage.getItem(key) || "[]");
      if (Array.isArray(kept)) this.lines = kept.concat(this.lines).slice(-LINES_KEPT);
    } catch (error) {
      console.warn(`the ids of the lines shown are unreadable (${error.message})`);
    }
  },

  // Whether the private line `line` of `sender`'s person was shown already (else it is
  // noted as shown).
  shownBefore(sender, line) {
    const key = `${person(sender)}/${line}`;
    if (this.lines.includes(key)) return true;
    this.lines.push(key);
    if (this.lines.length > LINES_KEPT) this.lines.splice(0, this.lines.length - LINES_KEPT);
    if (this.linesKey !== null) {
      try {
        sessionStorage.setItem(this.linesKey, JSON.stringify(this.lines));
      } catch (error) {
        console.warn(`could not keep the ids of the lines shown: ${error.message}`);
      }
    }
    return false;
  },

  // The gateway sent the line `local` as message `id` (null: it reached the others
  // before, only the answer was lost): no longer waiting, but kept until it is stable.
  // The entry, or null.
  answered(local, id = null) {
    const at = this.outbox.findIndex((e) => e.local === local);
    if (at < 0) return null;
    const [entry] = this.outbox.splice(at, 1);
    if (entry.div) entry.div.remove();
    entry.div = null;
    if (id !== null && !this.stableEarly.delete(id)) {
      entry.id = id;
      entry.wire = true;
      this.kept.push(entry);
      if (this.kept.length > ANSWERED_KEPT) {
        const gone = this.kept.splice(0, this.kept.length - ANSWERED_KEPT);
        this.keptDropped += gone.length;
        console.warn(`${gone.length} answered line(s) no longer kept (${this.keptDropped} in all)`);
      }
    }
    this.save();
    return entry;
  },

  // Every receiver's process has the lines `ids` (the gateway's word): no longer kept.
  stable(ids) {
    const known = new Set(this.kept.map((e) => e.id));
    for (const id of ids) {
      if (known.has(id)) continue;
      this.stableEarly.add(id);  // its answer is still on its way
      if (this.stableEarly.size > ANSWERED_KEPT) {
        this.stableEarly.delete(this.stableEarly.values().next().value);
      }
    }
    const gone = new Set(ids);
    this.kept = this.kept.filter((e) => !gone.has(e.id));
    this.save();
  },
};
