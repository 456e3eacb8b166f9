// The editor tab's confirmed edits (outbox.js): kept until the gateway says they are
// stable, and put back on a received state by the `seen` rule like the others, so that
// one the gateway confirmed but never let out (it was killed first) is made again, and
// one that reached the session is not. Throws on the first failed check; prints one
// JSON line.
import assert from "node:assert/strict";
import { EditorReplica } from "../../groupcomm/web/static/editor.js";
import { Outbox } from "../../groupcomm/web/static/outbox.js";
import { TextSequence } from "../../groupcomm/web/static/text_sequence.js";
import { page as pageOf } from "./outbox_seen_case.mjs";

// a page's send, as edit.js makes it (the seen rule's case has it)
const page = (me, outbox, sent) => pageOf(EditorReplica, me, outbox, sent);

const outbox = new Outbox();
const ann = page("ann", outbox, []);
ann.delivered("tom", ["insert", null, "Hi"], { tom: 1 }, "tom#1");
ann.moveTo(2, false);
for (const key of "abc") ann.insert(key);
// the gateway confirms all three; one more is said stable before its confirmation came
outbox.stable(["ann#0"]);
outbox.confirmed("ann", "~L1", "ann#1");
outbox.confirmed("ann", "~L2", "ann#2");
outbox.confirmed("ann", "~L3", "ann#3");
assert.equal(outbox.entries.length, 0);
assert.deepEqual(outbox.kept.map((e) => e.base), ["ann#1", "ann#2", "ann#3"]);
assert.ok(outbox.stableEarly.has("ann#0"));
// "a" reached every other member: no longer kept
outbox.stable(["ann#1"]);
assert.deepEqual(outbox.kept.map((e) => e.base), ["ann#2", "ann#3"]);
// "d" is typed and sent, no answer yet; then the gateway dies
ann.insert("d");
assert.equal(ann.text.value, "Hiabcd");

// the state the tab gets back: "a" and "b" reached tom (seen counts them; the word
// that "b" was stable never came), "c" was still inside the killed gateway
const state = new TextSequence();
state.effect(["insert", null, "Hi"], { tom: 1 }, "tom#1");
state.effect(["insert", "tom#1+1", "a"], { tom: 1, ann: 1 }, "ann#1");
state.effect(["insert", "ann#1", "b"], { tom: 1, ann: 2 }, "ann#2");
const sent = [];
const back = page("ann~2", outbox, sent);
back.text = state;
const unsendable = outbox.rebase(back, { tom: 1, ann: 2 });
assert.deepEqual(unsendable, []);
// "b" is not sent again; "c" is made again after it, and "d" after the new "c"
assert.deepEqual(sent, [["insert", "ann#2", "c"], ["insert", "ann~2#~L1", "d"]]);
assert.equal(back.text.value, "Hiabcd");
assert.equal(outbox.kept.length, 0);
assert.deepEqual(outbox.entries.map((e) => e.op[2]), ["c", "d"]);

// a resync of the member: the gateway's state holds what it confirmed
const box = new Outbox();
const tom = page("tom", box, []);
tom.insert("x");
box.confirmed("tom", "~L1", "tom#1");
box.resynced("tom");
assert.equal(box.kept.length, 0);

// at most 500 confirmed edits are kept: the oldest go, counted
const many = new Outbox();
const eve = page("eve", many, []);
for (let k = 1; k <= 502; k += 1) {
  eve.insert("z");
  many.confirmed("eve", `~L${k}`, `eve#${k}`);
}
assert.equal(many.kept.length, 500);
assert.equal(many.keptDropped, 2);
assert.equal(many.kept[0].base, "eve#3");
console.log(JSON.stringify({ ok: true }));
