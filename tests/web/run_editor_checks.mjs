// What only the browser's editor replica does: own edits under provisional ids,
// confirmed (or not) when the gateway answers, and no collection meanwhile. Throws on
// the first failed check; prints "ok".
import assert from "node:assert/strict";
import { COLLECT_EVERY, EditorReplica } from "../../groupcomm/web/static/editor.js";

function tab() {
  const clock = { a: 0 };
  let local = 0;
  const send = (payload) => {
    clock.a += 1;
    if (payload[0] === "cursor") return { id: null, clock: { ...clock } };
    local += 1;
    return { id: `a#~L${local}`, clock: { ...clock }, confirmed: false };
  };
  return new EditorReplica("a", send, { members: ["a", "b"] });
}

// confirmed with the expected tag: the characters take the real id
let a = tab();
a.insert("ab");
assert.equal(a.unconfirmed.length, 1);
assert.equal(a.cursor, "a#~L1+1");
assert.equal(a.confirmed("a#~L1", "a#7", { a: 1 }), true);
assert.deepEqual([a.unconfirmed.length, a.cursor, a.text.position("a#7+1")], [0, "a#7+1", 2]);
assert.equal(a.text.position("a#~L1"), null);
a.backspace();  // a delete of the renamed character, confirmed in turn
assert.equal(a.confirmed("a#~L2", "a#8", { a: 2 }), true);
assert.deepEqual(a.text.byId.get("a#7+1").deleted, { a: 2 });

// a tag other than the expected one: the page has to start again
a.insert("c");
assert.equal(a.confirmed("a#~L3", "a#9", { a: 4 }), false);
assert.equal(a.confirmed("a#~L99", "a#10", { a: 5 }), true);  // not waiting: nothing to do

// nothing is collected while an own edit is unconfirmed; then it is
a = tab();
a.insert("x");
a.confirmed("a#~L1", "a#1", { a: 1 });
a.moveTo(0);
a.delete();  // a tombstone, waiting for its confirmation
for (let k = 1; k < COLLECT_EVERY; k += 1) {
  a.delivered("b", ["insert", null, "y"], { a: 3, b: k }, `b#${k}`);
}
assert.equal(a.applied, COLLECT_EVERY + 1);
assert.equal(a.collectDue, true);
assert.equal(a.collected, 0);
a.confirmed("a#~L2", "a#3", { a: 3 });
assert.equal(a.collected, 1);
console.log("ok");
