// The shared text's replica in the browser: the same rules as the Python type
// groupcomm.replicated.TextSequence (RGA, Roh et al. 2011), so a tab's copy and the
// terminals' copies converge. A plain ES module: the pages import it, and node runs it
// on the test vectors the Python type produced (tests/web/text_vectors.json).
//
// Every character is identified by the id of the message that inserted it (the k-th
// character of a run is `${id}+${k}`) and ordered by a timestamp from its tag:
// [sum of the tag's clock, id]. An insert names the character it goes after (null: the
// start); among inserts after the same character, the larger timestamp comes first. A
// delete keeps the character as a tombstone. collect() forgets what causal stability
// makes useless, exactly as the Python type does.

export const STABLE = [0, ""];

function compareStamps(a, b) {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] === b[1]) return 0;
  return a[1] < b[1] ? -1 : 1;
}

function clockSum(clock) {
  let sum = 0;
  for (const value of Object.values(clock)) sum += value;
  return sum;
}

function lessOrEqual(a, b) {
  // every entry of clock a is covered by clock b
  for (const [k, v] of Object.entries(a)) if ((b[k] || 0) < v) return false;
  return true;
}

export class Stability {
  // What each member is known to have delivered, from the tags of its operations.
  constructor(me, members) {
    this.me = me;
    this.members = new Set([...members, me]);
    this.seen = new Map([...this.members].map((m) => [m, {}]));
  }

  delivered(sender, clock) {
    for (const who of new Set([sender, this.me])) {
      if (!this.seen.has(who)) this.seen.set(who, {});
      const seen = this.seen.get(who);
      for (const [k, v] of Object.entries(clock)) if ((seen[k] || 0) < v) seen[k] = v;
    }
  }

  memberJoined(member) {
    this.members.add(member);
    if (!this.seen.has(member)) this.seen.set(member, {});
  }

  memberLeft(member) {
    this.members.delete(member);
    this.seen.delete(member);
  }

  isStable(clock) {
    for (const m of this.members) if (!lessOrEqual(clock, this.seen.get(m) || {})) return false;
    return true;
  }
}

export class TextSequence {
  constructor() {
    // {id, stamp, ch, deleted: clock|null, inserted: clock|null} in document order
    this.items = [];
    this.byId = new Map();
  }

  static fromState(rows) {
    // rows: [id, [sum, id], char, delete clock|null, insert clock|null] (the gateway's
    // adapter of the Python type's state)
    const text = new TextSequence();
    for (const [id, stamp, ch, deleted, inserted] of rows) {
      const item = { id, stamp: [stamp[0], stamp[1]], ch, deleted, inserted };
      text.items.push(item);
      text.byId.set(id, item);
    }
    return text;
  }

  state() {
    return this.items.map((i) => [i.id, [i.stamp[0], i.stamp[1]], i.ch, i.deleted, i.inserted]);
  }

  // -- operations ------------------------------------------------------------------------
  prepareInsert(position, text) {
    if (typeof text !== "string" || !text) throw new Error(`insert at least one character`);
    const length = this.visibleLength();
    if (position < 0 || position > length) {
      throw new Error(`position ${position} is outside the text (0..${length})`);
    }
    return ["insert", this.anchor(position), text];
  }

  prepareDelete(position, count = 1) {
    const visible = this.visible();
    if (count < 1 || position < 0 || position > visible.length - count) {
      throw new Error(`no ${count} character(s) at position ${position} (the text has ${visible.length})`);
    }
    const ids = visible.slice(position, position + count).map((i) => i.id);
    return ["delete", count === 1 ? ids[0] : ids];
  }

  // Apply `op` with its tag's clock and the id of the message that carried it; throws
  // (changing nothing) for an operation of the wrong shape or naming a character that
  // is not here. Returns what undo() needs to take it back.
  effect(op, clock, opId) {
    if (!Array.isArray(op)) throw new Error(`not an operation: ${JSON.stringify(op)}`);
    if (op[0] === "delete" && op.length === 2) return this.delete(op[1], clock);
    if (op[0] !== "insert" || op.length !== 3) {
      throw new Error(`not an operation of this type: ${JSON.stringify(op).slice(0, 80)}`);
    }
    const [, after, text] = op;
    if (typeof text !== "string" || !text) throw new Error("an insert carries at least one character");
    if (this.byId.has(opId)) throw new Error(`${opId} inserted twice`);
    let place;
    if (after === null) place = 0;
    else if (this.byId.has(after)) place = this.items.indexOf(this.byId.get(after)) + 1;
    else throw new Error(`insert after ${after}, which has not been inserted here`);
    const stamp = [clockSum(clock), opId];
    const items = this.items;
    while (place < items.length && compareStamps(items[place].stamp, stamp) > 0) place += 1;
    const run = [...text].map((ch, k) => ({
      id: k === 0 ? opId : `${opId}+${k}`, stamp, ch, deleted: null, inserted: clock,
    }));
    items.splice(place, 0, ...run);
    for (const item of run) this.byId.set(item.id, item);
    return { inserted: run.map((i) => i.id), deleted: [] };
  }

  delete(target, clock) {
    const ids = typeof target === "string" ? [target] : target;
    if (!Array.isArray(ids) || !ids.length || !ids.every((i) => typeof i === "string")) {
      throw new Error(`a delete names characters by id, got ${JSON.stringify(target).slice(0, 80)}`);
    }
    const missing = ids.filter((i) => !this.byId.has(i));
    if (missing.length) throw new Error(`delete of ${missing[0]}, which has not been inserted here`);
    const deleted = [];
    for (const id of ids) {
      const item = this.byId.get(id);
      if (item.deleted === null) {
        item.deleted = clock;
        deleted.push(id);
      } else if (item.later === undefined) {
        // a second delete of the character: kept in case the first is taken back
        item.later = clock;
      }
    }
    return { inserted: [], deleted };
  }

  // Take back what effect() returned (the tab's own edits not yet confirmed: nothing
  // else refers to their characters yet).
  undo(done) {
    for (const id of done.deleted) {
      const item = this.byId.get(id);
      if (item) {
        // a delete that came meanwhile stays (as if it had come first)
        item.deleted = item.later === undefined ? null : item.later;
        delete item.later;
      }
    }
    if (done.inserted.length) {
      const gone = new Set(done.inserted);
      this.items = this.items.filter((i) => !gone.has(i.id));
      for (const id of gone) this.byId.delete(id);
    }
  }

  // -- reading ---------------------------------------------------------------------------
  visible() {
    return this.items.filter((i) => i.deleted === null);
  }

  visibleLength() {
    let n = 0;
    for (const i of this.items) if (i.deleted === null) n += 1;
    return n;
  }

  get value() {
    let out = "";
    for (const i of this.items) if (i.deleted === null) out += i.ch;
    return out;
  }

  get tombstones() {
    return this.items.length - this.visibleLength();
  }

  get length() {
    return this.items.length;
  }

  anchor(position) {
    if (position <= 0) return null;
    let seen = 0;
    for (const item of this.items) {
      if (item.deleted === null) {
        seen += 1;
        if (seen === position) return item.id;
      }
    }
    throw new Error(`position ${position} is outside the text (0..${seen})`);
  }

  position(anchor) {
    if (anchor === null || anchor === undefined) return 0;
    const item = this.byId.get(anchor);
    if (item === undefined) return null;
    let n = 0;
    for (const i of this.items) {
      if (i.deleted === null) n += 1;
      if (i === item) return n;
    }
    return null;
  }

  collect(stability) {
    for (const item of this.items) {
      if (item.inserted !== null && stability.isStable(item.inserted)) {
        item.stamp = STABLE;
        item.inserted = null;
      }
    }
    const keptReversed = [];
    for (let k = this.items.length - 1; k >= 0; k -= 1) {
      const item = this.items[k];
      if (item.deleted !== null && item.inserted === null
          && (!keptReversed.length || keptReversed[keptReversed.length - 1].inserted === null)
          && stability.isStable(item.deleted)) {
        continue;
      }
      keptReversed.push(item);
    }
    const dropped = this.items.length - keptReversed.length;
    if (dropped) {
      this.items = keptReversed.reverse();
      this.byId = new Map(this.items.map((i) => [i.id, i]));
    }
    return dropped;
  }
}
