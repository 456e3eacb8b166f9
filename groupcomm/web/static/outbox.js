// The editor tab's own edits that the gateway has not confirmed yet, kept in the tab's
// session storage, and put back on the state the tab gets when it is a member again
// (after a dropped connection, a restarted gateway or a reload). Session storage, not
// local storage: the edits belong to this tab's member and its copy of the text; a
// reload keeps them (the same tab), another tab of the same person never sees them (it
// is a member of its own, with its own text and edits), so no edit can be sent by two
// tabs. A duplicated tab, which gets a copy of session storage, starts with an empty
// outbox (client.js, claimStorage).
//
// rebase() is the one place where an edit made under an old member id is matched with
// the state: an edit whose message the state already holds (it reached the others
// before the connection dropped, only the answer was lost) is not sent again. The rule
// is the terminal editor's (groupcomm/replicated/reapply.py): the state's `seen` clock
// says how many of each member's messages its maker had applied, so an edit sent as
// its member's n-th message is held when seen[member] >= n, also when the others
// deleted its characters and forgot them since (collected). A state without `seen`
// (made by an older version) falls back to the insert's sender (the old member), its
// number (after the last one confirmed) and its text. Every other edit is made again,
// as a new edit, at the place its
// characters name (or, when those characters are gone from the state, after the
// nearest character before them that is still there); a delete of characters that are
// already deleted is not sent, and one of characters the state does not hold is named.
//
// An edit the gateway confirmed is kept too (`kept`), until the gateway says every
// other member's process has it (`stable`): a gateway killed before the edit left it
// would lose it. rebase() judges it like the others (by `seen`), so one that did reach
// the session is not made again.

const CONTEXT = 8;  // characters before an anchor remembered, to find its place again
const PROVISIONAL = /^(.*#~L\d+)(\+\d+)?$/;
const PLUS = /^(.*?)(\+\d+)?$/;  // an id: the insert's, and the character's offset in it
// provisional ids remembered with the message id they became (the cursor, and edits
// made before the answer came, may name one)
const RENAMED_KEPT = 256;
// confirmed edits kept until they are stable; the oldest beyond this go (counted)
const CONFIRMED_KEPT = 500;

// The ids of up to CONTEXT characters before `anchor` in `text` (deleted ones too),
// nearest first: where to put what followed `anchor` if it is gone.
export function context(text, anchor) {
  if (anchor === null || anchor === undefined) return [];
  const item = text.byId.get(anchor);
  if (item === undefined) return [];
  const out = [];
  for (let k = text.items.indexOf(item) - 1; k >= 0 && out.length < CONTEXT; k -= 1) {
    out.push(text.items[k].id);
  }
  return out;
}

// The number of a message id (ann~2#17 -> ["ann~2", 17]); null for a provisional id.
function messageOf(id) {
  const hash = id.lastIndexOf("#");
  if (hash < 0 || id.includes("#~L")) return null;
  const seq = Number(id.slice(hash + 1));
  return Number.isInteger(seq) ? [id.slice(0, hash), seq] : null;
}

export class Outbox {
  constructor() {
    this.key = null;          // its place in session storage (null: not kept)
    // {member, local, op, wire, seq, since, before, chars}; seq: the own entry of the
    // clock the edit went out with (what `seen` counts; 0 when not known)
    this.entries = [];
    this.lastSeq = {};        // member -> the number of its last confirmed edit
    this.renamed = {};        // provisional id -> message id, while entries may name it
    this.cursor = null;       // {anchor, before}: where the cursor was
    this.kept = [];           // confirmed entries not known to be stable, with their id
    this.keptDropped = 0;     // kept entries dropped past CONFIRMED_KEPT
    this.stableEarly = new Set();  // ids said stable before their confirmation came
  }

  // Keep it under `key` (session, page, person: a login of someone else in this tab
  // has an outbox of its own); what was kept there comes back.
  attach(key) {
    if (this.key === key) return;
    this.key = key;
    let kept = null;
    try {
      kept = JSON.parse(sessionStorage.getItem(key) || "null");
    } catch (error) {
      console.warn(`the kept edits are unreadable (${error.message}); starting without`);
    }
    if (kept && Array.isArray(kept.entries)) {
      this.entries = kept.entries.concat(this.entries);
      Object.assign(this.lastSeq, kept.lastSeq || {});
      Object.assign(this.renamed, kept.renamed || {});
      if (Array.isArray(kept.kept)) this.kept = kept.kept.concat(this.kept);
      if (!this.cursor) this.cursor = kept.cursor || null;
    }
  }

  save() {
    if (this.key === null) return true;
    const body = { entries: this.entries, lastSeq: this.lastSeq, renamed: this.renamed,
      cursor: this.cursor, kept: this.kept };
    try {
      sessionStorage.setItem(this.key, JSON.stringify(body));
      return true;
    } catch (error) {
      // over the storage's quota (a paste of megabytes): kept in memory only, and what
      // was kept before goes (a reload would send again edits that went out since)
      console.warn(`could not keep the unsent edits in session storage: ${error.message}`);
      sessionStorage.removeItem(this.key);
      return false;
    }
  }

  // The characters the entries insert.
  characters() {
    let count = 0;
    for (const entry of this.entries) if (entry.op[0] === "insert") count += [...entry.op[2]].length;
    return count;
  }

  add(member, local, op, wire, text, seq = 0) {
    const entry = { member, local, op, wire, seq, since: this.lastSeq[member] || 0, before: [] };
    if (op[0] === "insert") entry.before = context(text, op[1]);
    else {
      const ids = typeof op[1] === "string" ? [op[1]] : op[1];
      entry.chars = ids.map((i) => (text.byId.get(i) || { ch: "" }).ch).join("");
    }
    this.entries.push(entry);
  }

  // The session's store was replaced: `carried`, the own edits the gateway sent that
  // every member may not hold ([message id, op, member it was made as, that member's
  // entry of its tag], in the order they were made), come before the entries, and are
  // put on the fresh state by the same rule (`seen`); the entries' edits sent since
  // were not sent (the gateway waited for the fresh state), so they count as unsent.
  // `text`: the tab's text, which holds them all.
  replaced(carried, text) {
    const before = carried.map(([id, op, member, seq]) => {
      const entry = { member, local: null, base: id, op, wire: seq > 0, seq, since: 0, before: [] };
      if (op[0] === "insert") entry.before = context(text, op[1]);
      else {
        const ids = typeof op[1] === "string" ? [op[1]] : op[1];
        entry.chars = ids.map((i) => (text.byId.get(i) || { ch: "" }).ch).join("");
      }
      return entry;
    });
    for (const entry of this.entries) entry.wire = false;
    this.entries = before.concat(this.entries);
    this.kept = [];  // the gateway's list holds them (its member is alive)
  }

  // The gateway sent `member`'s edit `local` as message `id`.
  confirmed(member, local, id) {
    const at = this.entries.findIndex((e) => e.member === member && e.local === local);
    const found = messageOf(id);
    if (found && found[1] > (this.lastSeq[found[0]] || 0)) this.lastSeq[found[0]] = found[1];
    if (at >= 0) {
      const [entry] = this.entries.splice(at, 1);
      if (!this.stableEarly.delete(id)) {
        // its characters are named by the message id now
        entry.base = id;
        entry.confirmed = true;
        this.kept.push(entry);
        if (this.kept.length > CONFIRMED_KEPT) {
          const gone = this.kept.splice(0, this.kept.length - CONFIRMED_KEPT);
          this.keptDropped += gone.length;
          console.warn(`${gone.length} confirmed edit(s) no longer kept (${this.keptDropped} in all)`);
        }
      }
    }
    // the cursor and later edits may still name it by its provisional id
    this.renamed[`${member}#${local}`] = id;
    const names = Object.keys(this.renamed);
    if (names.length > RENAMED_KEPT) {
      for (const name of names.slice(0, names.length - RENAMED_KEPT)) delete this.renamed[name];
    }
  }

  // Every other member's process has the edits `ids` (the gateway's word).
  stable(ids) {
    const known = new Set(this.kept.map((e) => e.base));
    for (const id of ids) {
      if (known.has(id)) continue;
      this.stableEarly.add(id);  // its confirmation is still on its way
      if (this.stableEarly.size > CONFIRMED_KEPT) {
        this.stableEarly.delete(this.stableEarly.values().next().value);
      }
    }
    const gone = new Set(ids);
    this.kept = this.kept.filter((e) => !gone.has(e.base));
  }

  // A resync of `member`: the gateway's state holds what it sent, and what it refused
  // is taken back; only what never went out stays.
  resynced(member) {
    this.entries = this.entries.filter((e) => e.member !== member || !e.wire);
    this.kept = this.kept.filter((e) => e.member !== member);
  }

  // Put the entries back on `replica` (which holds the state just received; `seen`: the
  // state's clock of what its maker had applied, null when it has none): returns what
  // could not be sent, for the page to name. The replica's own edits go out through
  // the page (each a new entry); the cursor goes back to its place.
  rebase(replica, seen = null) {
    // the confirmed ones kept were made before any entry still waiting for its answer
    const entries = this.kept.concat(this.entries);
    this.kept = [];
    this.entries = [];
    const text = replica.text;
    const map = new Map(Object.entries(this.renamed));
    // an id as the state names it: a provisional one by the message id it became, a
    // character of an edit made again by its new id (a provisional id, then its message
    // id, then the edit made again; undefined: a provisional id whose message is not
    // known)
    const translate = (id) => {
      if (id === null) return null;
      const parts = PLUS.exec(id);
      let head = parts[1];
      let moved = false;
      for (let k = 0; k < 3 && map.has(head); k += 1) {
        head = map.get(head);
        moved = true;
      }
      if (moved) return head + (parts[2] || "");
      return PROVISIONAL.test(id) ? undefined : id;
    };
    // judged by `seen` (an entry kept by an older page has no seq: by its characters)
    const bySeen = (entry) => seen !== null && entry.seq > 0;
    const held = (entry) => entry.wire && bySeen(entry) && (seen[entry.member] || 0) >= entry.seq;
    const present = (id) => id !== undefined && (id === null || text.byId.has(id));
    const place = (anchor, before) => {
      for (const id of [anchor, ...before].map(translate)) if (present(id)) return id;
      return null;
    };
    const candidates = this.candidates(text, entries);
    const lastMatched = {};
    const unsendable = [];
    for (const entry of entries) {
      const [kind, target, inserted] = entry.op;
      const base = entry.base || `${entry.member}#${entry.local}`;
      if (held(entry)) {
        // the state holds it, also when its characters are gone (deleted and collected:
        // then what named them goes after the character before them)
        if (kind === "insert" && !entry.confirmed) {  // (a confirmed one has its id)
          const found = this.match(text, candidates, entry, lastMatched);
          if (found) map.set(base, found);
        }
        continue;
      }
      if (kind === "insert") {
        const found = entry.wire && !bySeen(entry)
          ? this.match(text, candidates, entry, lastMatched) : null;
        if (found) {
          map.set(base, found);
          continue;
        }
        const after = place(target, entry.before);
        map.set(base, replica._own(["insert", after, inserted]));
        continue;
      }
      const ids = (typeof target === "string" ? [target] : target).map(translate);
      const chars = [...(entry.chars || "")];
      const live = ids.filter((id) => present(id) && id !== null && text.byId.get(id).deleted === null);
      const gone = chars.filter((_, k) => !present(ids[k]));
      // deleted in the state: by someone else, unless this delete went out before the
      // connection dropped (then it may be this one)
      const taken = entry.wire ? [] : chars.filter((_, k) => present(ids[k]) && ids[k] !== null
        && text.byId.get(ids[k]).deleted !== null);
      if (gone.length) unsendable.push(`the delete of '${gone.join("")}' (no longer in the text)`);
      if (taken.length) unsendable.push(`the delete of '${taken.join("")}' (someone deleted it already)`);
      if (live.length) replica._own(["delete", live.length === 1 ? live[0] : live]);
    }
    if (this.cursor) {
      const anchor = place(this.cursor.anchor, this.cursor.before);
      if (anchor !== replica.cursor) {
        if (anchor === null) replica.cursor = null;
        else replica._own(["cursor", anchor]);
      }
      this.keepCursor(text, anchor);  // by the ids of this state
    }
    return unsendable;
  }

  // The inserts in `text` made by the members the sent entries were made as, with
  // numbers after the last one confirmed then: {member: [[seq, id]]}, by number.
  candidates(text, entries) {
    const members = new Set(entries.filter((e) => e.wire).map((e) => e.member));
    const found = {};
    if (!members.size) return found;
    for (const item of text.items) {
      if (item.id.includes("+")) continue;  // not the first character of an insert
      const message = messageOf(item.id);
      if (!message || !members.has(message[0])) continue;
      (found[message[0]] = found[message[0]] || []).push([message[1], item.id]);
    }
    for (const list of Object.values(found)) list.sort((a, b) => a[0] - b[0]);
    return found;
  }

  // The insert in `text` that is `entry`'s: its member's, numbered after what was
  // confirmed and matched before, with the same characters (those still there).
  match(text, candidates, entry, lastMatched) {
    const chars = [...entry.op[2]];
    const after = Math.max(entry.since, lastMatched[entry.member] || 0);
    for (const [seq, id] of candidates[entry.member] || []) {
      if (seq <= after) continue;
      if (text.byId.has(`${id}+${chars.length}`)) continue;  // a longer insert
      let same = true;
      for (let k = 0; k < chars.length && same; k += 1) {
        const item = text.byId.get(k ? `${id}+${k}` : id);
        if (item !== undefined && item.ch !== chars[k]) same = false;
      }
      if (same) {
        lastMatched[entry.member] = seq;
        return id;
      }
    }
    return null;
  }

  // Where the cursor is, to put it back after a reconnect or a reload.
  keepCursor(text, anchor) {
    this.cursor = { anchor, before: context(text, anchor) };
  }
}
