// The shared text's type in the browser: the same rules as the Python type
// groupcomm.replicated.TextSequence (RGA, Roh et al. 2011), so a tab's copy and the
// terminals' copies converge. A plain ES module: the pages import it, and node runs it
// in the tests against the Python type (tests/web/).
//
// Every character is identified by the id of the message that inserted it (the k-th
// character of a run is `${id}+${k}`) and ordered by a timestamp from its tag:
// [sum of the tag's clock, id]. An insert names the character it goes after (null: the
// start); among inserts after the same character, the larger timestamp comes first. A
// delete keeps the character as a tombstone. collect() forgets what causal stability
// makes useless, exactly as the Python type does. The Python type keeps runs in blocks;
// this one keeps one item per character, which a browser's text is small enough for.

export const STABLE = [0, ""];
// the version of the run-length state the Python type's state() writes
export const STATE_VERSION = 1;
// the most elements passed as arguments at once (a spread into a call): far below what
// overflows a browser's stack
const SPREAD_LIMIT = 8192;

function compareStamps(a, b) {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] === b[1]) return 0;
  return a[1] < b[1] ? -1 : 1;
}

export function clockSum(clock) {
  let sum = 0;
  for (const value of Object.values(clock)) sum += value;
  return sum;
}

function lessOrEqual(a, b) {
  // every entry of clock a is covered by clock b
  for (const [k, v] of Object.entries(a)) if ((b[k] || 0) < v) return false;
  return true;
}

// [prefix, number] of an id that ends in a number written without leading zeros
// ("p1#12" -> ["p1#", 12]), else null: the ids a chain of the state holds.
function numbered(ident) {
  let digits = 0;
  while (digits < ident.length && /[0-9]/.test(ident[ident.length - 1 - digits])) digits += 1;
  if (!digits || (digits > 1 && ident[ident.length - digits] === "0")) return null;
  return [ident.slice(0, ident.length - digits), Number(ident.slice(ident.length - digits))];
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

  // `member` acknowledged what its application had delivered (it may send nothing):
  // its merge only, not this member's. True when it moved.
  acknowledged(member, clock) {
    const seen = this.seen.get(member);
    if (seen === undefined || !this.members.has(member)) return false;
    let moved = false;
    for (const [k, v] of Object.entries(clock)) {
      if ((seen[k] || 0) < v) {
        seen[k] = v;
        moved = true;
      }
    }
    return moved;
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
    // how many items are deleted: none (a text just pasted or typed) lets positions be
    // found by the browser's native array search instead of a walk counting visible ones
    this.hidden = 0;
  }

  // A replica continuing from the Python type's state(): {version: 1, runs: [[insert id,
  // offset, characters, insert clock|null, delete clock|null], ...]}, a chain of typed
  // characters one row of six ([first id, 0, characters, null, delete clock|null, count]).
  static fromState(state) {
    if (!state || state.version !== STATE_VERSION || !Array.isArray(state.runs)) {
      throw new Error(`not the state of a TextSequence (version ${STATE_VERSION} with runs)`);
    }
    const text = new TextSequence();
    state.runs.forEach((row, number) => {
      const [op, start, chars, inserted, deleted] = row;
      const chain = row.length === 6 ? numbered(op) : null;
      if (typeof op !== "string" || typeof chars !== "string" || !chars
          || (row.length === 6 && !chain)) {
        throw new Error(`not the state of a TextSequence: run ${number}`);
      }
      const stamp = inserted ? [clockSum(inserted), op] : STABLE;
      [...chars].forEach((ch, k) => {
        const offset = start + k;
        let id;
        if (chain) id = `${chain[0]}${chain[1] + k}`;
        else id = offset === 0 ? op : `${op}+${offset}`;
        const item = { id, stamp, ch, deleted: deleted || null, inserted: inserted || null };
        if (item.deleted !== null) text.hidden += 1;
        text.items.push(item);
        text.byId.set(id, item);
      });
    });
    return text;
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
  // is not here. Returns what confirm() needs: the items inserted, the items this
  // delete was the first to delete, and the clock.
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
    // spread in slices: a spread passes each element as an argument on the stack, and a
    // run of some 120,000 characters at once overflows it (RangeError)
    for (let k = 0; k < run.length; k += SPREAD_LIMIT) {
      items.splice(place + k, 0, ...run.slice(k, k + SPREAD_LIMIT));
    }
    for (const item of run) this.byId.set(item.id, item);
    return { inserted: run, deleted: [], clock };
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
      if (item.deleted === null) {  // a character deleted twice keeps its first delete
        item.deleted = clock;
        deleted.push(item);
        this.hidden += 1;
      }
    }
    return { inserted: [], deleted, clock };
  }

  // An operation applied by effect() with a provisional id and clock was sent as
  // message `id` with tag `clock`: its characters take that id and timestamp, its
  // deletes that tag. (Nothing else names the provisional ids yet; the editor checks
  // that the timestamp's order is unchanged: see EditorReplica.confirmed.)
  confirm(done, id, clock) {
    const stamp = [clockSum(clock), id];
    done.inserted.forEach((item, k) => {
      this.byId.delete(item.id);
      item.id = k === 0 ? id : `${id}+${k}`;
      item.stamp = stamp;
      item.inserted = clock;
      this.byId.set(item.id, item);
    });
    for (const item of done.deleted) if (item.deleted === done.clock) item.deleted = clock;
  }

  // -- reading ---------------------------------------------------------------------------
  visible() {
    return this.items.filter((i) => i.deleted === null);
  }

  visibleLength() {
    return this.items.length - this.hidden;
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
    if (!this.hidden && position <= this.items.length) return this.items[position - 1].id;
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
    if (!this.hidden) return this.items.indexOf(item) + 1;
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
      this.hidden -= dropped;  // only tombstones are dropped
    }
    return dropped;
  }
}
