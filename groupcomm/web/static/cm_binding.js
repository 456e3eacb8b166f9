// CodeMirror 6 bound to the tab's editor replica (editor.js), the way y-codemirror.next
// binds Yjs: the person's transactions become RGA operations (insert after a character's
// id, delete by ids) sent through the replica; the replica's deliveries become targeted
// CodeMirror changes marked `remote` so that they are not sent again; the selection is
// mapped through them by CodeMirror. The replica counts code points and names each
// character by id; the view counts UTF-16 units: every offset here is found by walking
// the replica's characters, adding each one's UTF-16 length, never by converting
// numbers (a character outside the BMP is two units in the view and one on the wire).
//
// Undo and redo take back the person's own edits only (as Yjs' UndoManager): a step
// keeps the replica's character objects it inserted or deleted (their ids change when
// the gateway confirms them, the objects stay), undoing an insert deletes those still
// there, undoing a delete inserts the text again, as new characters, where the deleted
// ones still stand as tombstones (else after the character that was before them). What
// others did in between stays.
import { Annotation } from "/static/codemirror.js";
import { lastId } from "/static/editor.js";

// a transaction that applies the replica's changes to the view (not the person's)
export const remote = Annotation.define();
// a transaction made by undo or redo: {into: the stack its own inverse goes to}
export const undoing = Annotation.define();

// typed within this many milliseconds of the previous edit: the same undo step
export const GROUP_DELAY = 500;
// the most undo steps kept
export const UNDO_DEPTH = 200;

function visible(item) {
  return item.deleted === null;
}

// The replica's visible characters in [from, to) (UTF-16 offsets of the view) and the
// visible character before `from` (null: the start).
export function itemsIn(text, from, to) {
  const items = [];
  let before = null;
  let at = 0;
  for (const item of text.items) {
    if (!visible(item)) continue;
    if (at >= to) break;
    if (at < from) before = item;
    else items.push(item);
    at += item.ch.length;
  }
  return { before, items };
}

// The view's offsets of the given characters (a Map item -> offset before it, for those
// in the text, tombstones too: where they stood).
export function offsetsOf(text, wanted) {
  const found = new Map();
  let at = 0;
  for (const item of text.items) {
    if (found.size === wanted.size) break;
    if (wanted.has(item)) found.set(item, at);
    if (visible(item)) at += item.ch.length;
  }
  return found;
}

// The view's offset just after the character `anchor` names (0 for null; a deleted one:
// after the visible characters before it), or null when the text does not hold it.
export function offsetAfter(text, anchor) {
  if (anchor === null || anchor === undefined) return 0;
  const target = text.byId.get(anchor);
  if (target === undefined) return null;
  const at = offsetsOf(text, new Set([target])).get(target);
  return at === undefined ? null : at + (visible(target) ? target.ch.length : 0);
}

// The view's ranges [from, to) of the characters named by `ids` that are visible, in
// order, adjacent ones merged.
export function rangesOf(text, ids) {
  const wanted = new Set(ids.map((id) => text.byId.get(id)).filter((i) => i && visible(i)));
  return rangesOfItems(text, wanted);
}

export function rangesOfItems(text, wanted) {
  const ranges = [];
  if (!wanted.size) return ranges;
  let at = 0;
  let left = wanted.size;
  for (const item of text.items) {
    if (!visible(item)) continue;
    if (wanted.has(item)) {
      const last = ranges[ranges.length - 1];
      if (last && last[1] === at) last[1] += item.ch.length;
      else ranges.push([at, at + item.ch.length]);
      left -= 1;
      if (!left) break;
    }
    at += item.ch.length;
  }
  return ranges;
}

// Cut a delete of `ids` into operations within the gateway's limits: at most `count` ids
// and `bytes` bytes of JSON each.
export function deleteOps(ids, count, bytes) {
  const ops = [];
  let run = [];
  let size = 0;
  for (const id of ids) {
    const cost = JSON.stringify(id).length + 1;
    if (run.length && (run.length >= count || size + cost > bytes)) {
      ops.push(run);
      run = [];
      size = 0;
    }
    run.push(id);
    size += cost;
  }
  if (run.length) ops.push(run);
  return ops.map((r) => ["delete", r.length === 1 ? r[0] : r]);
}

// The binding: `host` gives the replica (host.replica, replaced on a resync), the limits
// (host.runLimit, host.deleteLimit, host.deleteBytes) and learns of own edits
// (host.ownEdit()).
export class Binding {
  constructor(host) {
    this.host = host;
    this.view = null;
    this.pending = [];        // remote changes not in the view yet: [{from, to, insert}] lists
    this.undoStack = [];      // steps: {actions, at (ms)}
    this.redoStack = [];
    this.lastStep = 0;
  }

  // -- the person's edits -> operations ----------------------------------------------------
  // Send the transaction's changes (against the replica, which holds what the view
  // showed before it); returns the actions an undo step keeps.
  send(tr) {
    const replica = this.host.replica;
    const changes = [];
    tr.changes.iterChanges((fromA, toA, _fromB, _toB, inserted) => {
      changes.push([fromA, toA, inserted.toString()]);
    });
    const actions = [];
    // from the end, so that what is done leaves the offsets before it as they were
    for (const [from, to, text] of changes.reverse()) {
      if (to > from) {
        const { items } = itemsIn(replica.text, from, to);
        if (items.length) {
          const ids = items.map((i) => i.id);
          for (const op of deleteOps(ids, this.host.deleteLimit, this.host.deleteBytes)) {
            replica._own(op);
          }
          const around = itemsIn(replica.text, from, from + 1);
          actions.push({ kind: "deleted", items, offset: from, before: around.before,
            after: around.items.length ? around.items[0] : null });
        }
      }
      if (text) {
        const after = itemsIn(replica.text, from, from).before;
        let anchor = after === null ? null : after.id;
        const chars = [...text];
        const inserted = [];
        for (let start = 0; start < chars.length; start += this.host.runLimit) {
          const run = chars.slice(start, start + this.host.runLimit);
          const id = replica._own(["insert", anchor, run.join("")]);
          anchor = lastId(id, run.length);
          for (let k = 0; k < run.length; k += 1) {
            inserted.push(replica.text.byId.get(k === 0 ? id : `${id}+${k}`));
          }
        }
        actions.push({ kind: "inserted", items: inserted });
      }
    }
    return actions;
  }

  // -- undo and redo ------------------------------------------------------------------------
  record(actions, tr) {
    if (!actions.length) return;
    const into = tr.annotation(undoing);
    if (into) {
      into.push(...actions);
      return;
    }
    const now = Date.now();
    const top = this.undoStack[this.undoStack.length - 1];
    const typing = tr.isUserEvent("input.type") || tr.isUserEvent("delete.backward")
      || tr.isUserEvent("delete.forward");
    if (top && typing && top.typing && now - this.lastStep < GROUP_DELAY) {
      top.actions.push(...actions);
    } else {
      this.undoStack.push({ actions, typing });
      if (this.undoStack.length > UNDO_DEPTH) this.undoStack.shift();
    }
    this.lastStep = now;
    this.redoStack = [];
  }

  undo() {
    return this.replay(this.undoStack, this.redoStack);
  }

  redo() {
    return this.replay(this.redoStack, this.undoStack);
  }

  // Take back the newest step of `from`, its inverse going onto `to`; false when there is
  // nothing (left) to take back.
  replay(from, to) {
    while (from.length) {
      const step = from.pop();
      const inverse = [];
      // a character the step deleted and this replay made again, by its new one: a later
      // delete of the step is placed after it
      const remade = new Map();
      for (const action of [...step.actions].reverse()) this.invert(action, inverse, remade);
      this.lastStep = 0;
      if (inverse.length) {
        to.push({ actions: inverse, typing: false });
        return true;
      }
      // nothing of the step was left to take back (others deleted it all): the next one
    }
    return false;
  }

  invert(action, into, remade) {
    const text = this.host.replica.text;
    const here = (item) => {
      if (item === null) return null;
      const found = remade.get(item) || item;
      return text.byId.get(found.id) === found ? found : undefined;
    };
    let changes;
    if (action.kind === "inserted") {
      const ranges = rangesOfItems(text, new Set(action.items.filter(visible)));
      changes = ranges.map(([from, to]) => ({ from, to }));
    } else {
      // where the deleted characters stand as tombstones (until collected), else after
      // the character that was before them, else before the one that was after them,
      // else at the offset they had
      const tombstone = action.items.find((i) => text.byId.get(i.id) === i);
      const before = here(action.before);
      const after = here(action.after);
      let at;
      if (tombstone !== undefined) at = offsetsOf(text, new Set([tombstone])).get(tombstone);
      else if (action.before === null) at = 0;
      else if (before !== undefined) {
        at = offsetsOf(text, new Set([before])).get(before) + (visible(before) ? before.ch.length : 0);
      } else if (after) at = offsetsOf(text, new Set([after])).get(after);
      if (at === undefined) at = Math.min(action.offset, this.view.state.doc.length);
      changes = [{ from: at, insert: action.items.map((i) => i.ch).join("") }];
    }
    if (!changes.length) return;
    const made = into.length;
    this.view.dispatch({ changes, annotations: undoing.of(into), userEvent: "undo", scrollIntoView: true });
    if (action.kind === "deleted" && into.length > made && into[made].kind === "inserted") {
      action.items.forEach((item, k) => remade.set(item, into[made].items[k]));
    }
  }

  // The replica was replaced (a resync): the steps' characters by their ids in it
  // (`realId`: a provisional id by the one the gateway confirmed).
  rebind(text, realId = (id) => id) {
    const find = (item) => text.byId.get(realId(item.id));
    const translate = (steps) => steps.map((step) => ({
      typing: false,
      actions: step.actions.map((a) => ({
        kind: a.kind,
        offset: a.offset,
        // one not in the new text stays as it was (found nowhere, its character kept)
        before: a.before && (find(a.before) || a.before),
        after: a.after && (find(a.after) || a.after),
        items: a.kind === "deleted" ? a.items.map((i) => find(i) || i)
          : a.items.map(find).filter((i) => i !== undefined),
      })).filter((a) => a.items.length),
    })).filter((s) => s.actions.length);
    this.undoStack = translate(this.undoStack);
    this.redoStack = translate(this.redoStack);
  }

  // -- deliveries -> view changes -------------------------------------------------------------
  // Before the replica applies a delivered operation: what a delete will take out of the
  // view (an insert is found after). Returns a function to call after it is applied.
  delivering(op, messageId) {
    const text = this.host.replica.text;
    if (Array.isArray(op) && op[0] === "delete" && op.length === 2) {
      const ids = typeof op[1] === "string" ? [op[1]] : op[1];
      const ranges = Array.isArray(ids) ? rangesOf(text, ids) : [];
      return (applied) => {
        if (applied && ranges.length) this.pending.push(ranges.map(([from, to]) => ({ from, to })));
      };
    }
    if (Array.isArray(op) && op[0] === "insert" && op.length === 3 && typeof op[2] === "string") {
      return (applied) => {
        const now = this.host.replica.text;
        const first = now.byId.get(messageId);
        if (!applied || first === undefined) return;
        const at = offsetsOf(now, new Set([first])).get(first);
        if (at !== undefined) this.pending.push([{ from: at, insert: op[2] }]);
      };
    }
    return () => {};
  }

  // Put the deliveries' changes into the view: each list is in the offsets of the text
  // after the ones before it, one transaction each (CodeMirror maps the selection).
  flush() {
    const pending = this.pending;
    if (!pending.length || this.view === null) return;
    this.pending = [];
    this.view.dispatch(...pending.map((changes, k) => ({
      changes, sequential: k > 0, annotations: remote.of(true),
    })));
  }
}
