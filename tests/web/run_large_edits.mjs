// Edits of any size in the browser's replica: a 1 MiB insert delivered, pasted (sent as
// runs within the run limit, confirmed late), started from, drawn with a pending run,
// deleted. Nothing may spread a run into a call's arguments (a RangeError from some
// 120,000 characters on). Throws on the first failed check; prints one JSON line.
import assert from "node:assert/strict";
import { EditorReplica, RUN_LIMIT } from "../../groupcomm/web/static/editor.js";
import { TextSequence } from "../../groupcomm/web/static/text_sequence.js";

const SIZE = 1 << 20;
// not one repeated character: runs must come out in order
const big = Array.from({ length: SIZE }, (_, k) => String.fromCharCode(97 + (k % 26))).join("");
const took = {};
function timed(name, work) {
  const start = performance.now();
  const result = work();
  took[name] = Math.round(performance.now() - start);
  return result;
}

// delivered: one insert of 1 MiB between two characters
const text = new TextSequence();
text.effect(["insert", null, "<>"], { b: 1 }, "b#1");
timed("delivered", () => text.effect(["insert", "b#1", big], { b: 2 }, "b#2"));
assert.equal(text.value, `<${big}>`);
assert.equal(text.position("b#2+1048575"), SIZE + 1);

// pasted: sent as runs of at most the run limit, each confirmed later
const sent = [];
const clock = { a: 0 };
const a = new EditorReplica("a", (payload) => {
  clock.a += 1;
  sent.push(payload);
  return { id: `a#~L${sent.length}`, clock: { ...clock }, confirmed: false };
}, { members: ["a", "b"] });
timed("pasted", () => a.insert(big));
assert.equal(sent.length, Math.ceil(SIZE / RUN_LIMIT));
assert.ok(sent.every((op) => op[0] === "insert" && [...op[2]].length <= RUN_LIMIT));
assert.equal(sent.map((op) => op[2]).join(""), big);
assert.equal(a.view()[0], big);
timed("confirmed", () => sent.forEach((_, k) => {
  assert.equal(a.confirmed(`a#~L${k + 1}`, `a#${k + 1}`, { a: k + 1 }), true);
}));
assert.equal(a.unconfirmed.length, 0);
assert.deepEqual(a.view().slice(0, 2), [big, SIZE]);

// a smaller run limit (the gateway's welcome states its own)
const small = new EditorReplica("c", () => ({ id: "c#1", clock: { c: 1 } }),
  { members: ["c"], runLimit: 1000 });
const runs = [];
small.send = (payload) => { runs.push(payload[2].length); return { id: `c#${runs.length}`, clock: { c: runs.length } }; };
small.insert(big.slice(0, 2500));
assert.deepEqual(runs, [1000, 1000, 500]);

// started from a state holding a 1 MiB run, drawn with a 1 MiB run typed but not sent
const copy = timed("installed", () => TextSequence.fromState(
  { version: 1, runs: [["b#2", 0, big, null, null]] }));
assert.equal(copy.value, big);
const typing = new EditorReplica("d", null, { members: ["d"] });
typing.text = copy;
typing.pending = { after: "b#2+9", text: big };
const [value, at] = timed("drawn", () => typing.view());
assert.equal(value.length, 2 * SIZE);
assert.equal(value.slice(0, 10) + value.slice(10 + SIZE), big);
assert.equal(at, 10 + SIZE);

// deleted: 200,000 characters in one delete
const ids = timed("prepared", () => text.prepareDelete(1, 200000))[1];
timed("deleted", () => text.effect(["delete", ids], { b: 3 }, "b#3"));
assert.equal(text.value, `<${big.slice(200000)}>`);
console.log(JSON.stringify({ ok: true, took }));
