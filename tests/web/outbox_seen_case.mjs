// The outbox's rule for "already delivered" (outbox.js): the received state's `seen`
// clock, as reapply.py judges it. Imports nothing (the modules and an assert come as
// arguments), so that node (run_outbox.mjs) and a page in Chromium (test_browser_outage.py)
// run the same case.

// a page's send, as edit.js makes it: provisional ids, every edit in the outbox, sent
export function page(EditorReplica, me, outbox, sent) {
  let local = 0;
  const clock = {};
  const replica = new EditorReplica(me, (payload) => {
    clock[me] = (clock[me] || 0) + 1;
    sent.push(payload);
    if (payload[0] === "cursor") return { id: null, clock: { ...clock } };
    const id = `~L${++local}`;
    outbox.add(me, id, payload, true, replica.text, clock[me]);
    return { id: `${me}#${id}`, clock: { ...clock }, confirmed: false };
  }, { members: [me, "tom"] });
  return replica;
}

// the state's `seen` clock decides, as in reapply.py: ann deleted tom's "H" (her 1st
// message) and typed "x" (her 2nd), both reached tom, who deleted the "x", and the "x"
// was collected (forgotten) since; "y" (her 3rd) did not go anywhere. The state holds
// "x" (seen ann: 2) though none of its characters is there: only "y" goes again, after
// the "i" (the nearest character before it there), and the delete is not named as one
// that could not be done.
function collectedCase({ Outbox, EditorReplica, TextSequence }, assert, withSeen) {
  const box = new Outbox();
  const sentOut = [];
  const me = page(EditorReplica, "ann", box, sentOut);
  me.delivered("tom", ["insert", null, "Hi"], { tom: 1 }, "tom#1");
  me.moveTo(2, false);
  me._own(["delete", "tom#1"]);
  me.moveTo(1, false);  // after the "i"
  me.insert("x");
  me.insert("y");
  assert.deepEqual(box.entries.map((e) => [e.op[0], e.seq]), [["delete", 1], ["insert", 2], ["insert", 3]]);
  const received = new TextSequence();
  received.effect(["insert", null, "Hi"], { tom: 1 }, "tom#1");
  received.effect(["delete", "tom#1"], { tom: 1, ann: 1 }, "ann#1");
  // (the "x", its delete by tom and the collection: gone without a trace)
  const resent = [];
  const next = page(EditorReplica, "ann~2", box, resent);
  next.text = received;
  const unsendable = box.rebase(next, withSeen ? { tom: 2, ann: 2 } : null);
  return { value: next.text.value, resent, unsendable };
}

export function checkSeenRule(modules, assert) {
  const bySeen = collectedCase(modules, assert, true);
  assert.equal(bySeen.value, "iy");
  assert.deepEqual(bySeen.resent, [["insert", "tom#1+1", "y"]]);
  assert.deepEqual(bySeen.unsendable, []);
  // without the clock (a state of an older version) the "x" cannot be told from one
  // never sent: it goes again
  const byText = collectedCase(modules, assert, false);
  assert.equal(byText.value, "ixy");
}
