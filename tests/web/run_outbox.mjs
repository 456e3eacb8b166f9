// The editor tab's outbox (outbox.js) put back on a received state: edits that reached
// the others before the connection dropped are recognised and not sent again, the
// others are made again at their places (named after the characters they followed,
// some of them provisional), a delete of what someone else deleted is named, and the
// cursor goes back to its character. Throws on the first failed check; prints one
// JSON line.
import assert from "node:assert/strict";
import { EditorReplica } from "../../groupcomm/web/static/editor.js";
import { Outbox } from "../../groupcomm/web/static/outbox.js";
import { TextSequence } from "../../groupcomm/web/static/text_sequence.js";
import { checkSeenRule } from "./outbox_seen_case.mjs";

// a page's send, as edit.js makes it: provisional ids, every edit kept in the outbox
function page(me, outbox, wire, sent) {
  let local = 0;
  const clock = {};
  const replica = new EditorReplica(me, (payload) => {
    clock[me] = (clock[me] || 0) + 1;
    sent.push(payload);
    if (payload[0] === "cursor") return { id: null, clock: { ...clock } };
    const id = `~L${++local}`;
    outbox.add(me, id, payload, wire(), replica.text, clock[me]);
    return { id: `${me}#${id}`, clock: { ...clock }, confirmed: false };
  }, { members: [me, "tom"] });
  return replica;
}

// before the drop: tom's "Hi", ann's own earlier edit confirmed as ann#2
const outbox = new Outbox();
outbox.lastSeq.ann = 2;
let online = true;
const before = [];
const ann = page("ann", outbox, () => online, before);
ann.delivered("tom", ["insert", null, "Hi"], { tom: 1 }, "tom#1");
ann.moveTo(2, false);
for (const key of "abc") ann.insert(key);  // went out: their answers never came
online = false;
for (const key of "de") ann.insert(key);   // typed while the gateway was down
ann._own(["delete", "tom#1"]);             // the "H", which tom deleted meanwhile
ann.moveTo(ann.text.visibleLength(), false);
assert.equal(ann.text.value, "iabcde");
outbox.keepCursor(ann.text, ann.cursor);
assert.deepEqual(outbox.entries.map((e) => e.wire), [true, true, true, false, false, false]);

// the state received: "a" and "b" reached tom (as ann#3 and ann#4), "c" did not, and
// tom deleted the "H"
const state = new TextSequence();
state.effect(["insert", null, "Hi"], { tom: 1 }, "tom#1");
state.effect(["insert", "tom#1+1", "a"], { tom: 1, ann: 3 }, "ann#3");
state.effect(["insert", "ann#3", "b"], { tom: 1, ann: 4 }, "ann#4");
state.effect(["delete", "tom#1"], { tom: 2, ann: 4 }, "tom#2");

const sent = [];
online = true;
const back = page("ann~2", outbox, () => online, sent);
back.text = state;
const unsendable = outbox.rebase(back);
assert.equal(back.text.value, "iabcde");
assert.deepEqual(sent, [
  ["insert", "ann#4", "c"],
  ["insert", "ann~2#~L1", "d"],
  ["insert", "ann~2#~L2", "e"],
]);
assert.deepEqual(unsendable, ["the delete of 'H' (someone deleted it already)"]);
assert.equal(back.position, 6);  // after the "e", as before the drop
// the edits made again are the outbox's now, waiting for their answers
assert.deepEqual(outbox.entries.map((e) => [e.member, e.op[2]]),
  [["ann~2", "c"], ["ann~2", "d"], ["ann~2", "e"]]);

// the same state once more (another drop before any answer): nothing is sent twice
// that the state holds, and the cursor stays
const again = [];
const third = page("ann~3", outbox, () => true, again);
third.text = TextSequence.fromState({ version: 1, runs: [] });
for (const [op, clock, id] of [
  [["insert", null, "Hi"], { tom: 1 }, "tom#1"], [["insert", "tom#1+1", "a"], { tom: 1, ann: 3 }, "ann#3"],
  [["insert", "ann#3", "b"], { tom: 1, ann: 4 }, "ann#4"], [["delete", "tom#1"], { tom: 2, ann: 4 }, "tom#2"],
  [["insert", "ann#4", "c"], { tom: 2, ann: 4, "ann~2": 1 }, "ann~2#1"]]) third.text.effect(op, clock, id);
outbox.rebase(third);
assert.equal(third.text.value, "iabcde");
assert.deepEqual(again, [["insert", "ann~2#1", "d"], ["insert", "ann~3#~L1", "e"]]);
assert.equal(third.position, 6);

// the state's `seen` clock decides (outbox_seen_case.mjs, also run in Chromium)
checkSeenRule({ Outbox, EditorReplica, TextSequence }, assert);
console.log(JSON.stringify({ ok: true }));
