// The editor page's own edits are applied at once with a provisional id and the clock
// the tab expects, and redone with the message id and tag the gateway answers (after
// taking back every edit not yet confirmed). Checks, on random histories, that a replica
// doing so ends with exactly the items of one that applied the confirmed edits directly.
// Prints one JSON line: {"histories": n, "interleaved": n, "mismatches": [...]}.
import { TextSequence } from "../../groupcomm/web/static/text_sequence.js";

let seed = 7;
function random() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
const pick = (n) => Math.floor(random() * n);

function run(history) {
  // the tab: own edits provisional, others' delivered among them, then confirmed
  const tab = new TextSequence();
  const direct = new TextSequence();
  const pending = [];
  const renamed = new Map();
  const real = (id) => {
    if (id === null || !id.startsWith("~")) return id;
    const [base, offset] = id.split("+");
    const found = renamed.get(base);
    return found === undefined ? id : offset === undefined ? found : `${found}+${offset}`;
  };
  const translate = (op) => (op[0] === "insert" ? ["insert", real(op[1]), op[2]]
    : ["delete", typeof op[1] === "string" ? real(op[1]) : op[1].map(real)]);
  let local = 0;
  let own = 0;
  let other = 0;
  const clock = { me: 0, other: 0 };
  for (let step = 0; step < history; step += 1) {
    const r = random();
    if (r < 0.4) {  // an own edit, at once, provisional
      const length = tab.visibleLength();
      const op = length && random() < 0.3 ? tab.prepareDelete(pick(length))
        : tab.prepareInsert(pick(length + 1), "ab".slice(0, 1 + pick(2)));
      clock.me += 1;
      const id = `~L${++local}`;
      pending.push({ local: id, op, clock: { ...clock }, done: tab.effect(op, { ...clock }, id) });
    } else if (r < 0.7 && pending.length) {  // the oldest is confirmed, with a larger clock
      for (const p of [...pending].reverse()) tab.undo(p.done);
      const first = pending.shift();
      const id = `me#${++own}`;
      const tag = { ...first.clock, me: first.clock.me + pick(3) };
      renamed.set(first.local, id);
      const op = translate(first.op);
      first.done = tab.effect(op, tag, id);
      direct.effect(op, tag, id);
      for (const p of pending) {
        p.op = translate(p.op);
        p.done = tab.effect(p.op, p.clock, p.local);
      }
    } else {  // another member's edit, concurrent with the own ones still pending
      const length = direct.visibleLength();
      const op = length && random() < 0.3 ? direct.prepareDelete(pick(length))
        : direct.prepareInsert(pick(length + 1), "xyz".slice(0, 1 + pick(3)));
      clock.other += 1;
      const seen = pending.length ? pending[0].clock.me - 1 : clock.me;
      if (pending.length) interleaved += 1;
      const tag = { other: clock.other + pick(2), me: seen };
      const id = `other#${++other}`;
      tab.effect(op, tag, id);
      direct.effect(op, tag, id);
    }
  }
  while (pending.length) {
    for (const p of [...pending].reverse()) tab.undo(p.done);
    const first = pending.shift();
    const id = `me#${++own}`;
    renamed.set(first.local, id);
    const op = translate(first.op);
    tab.effect(op, first.clock, id);
    direct.effect(op, first.clock, id);
    for (const p of pending) {
      p.op = translate(p.op);
      p.done = tab.effect(p.op, p.clock, p.local);
    }
  }
  const a = tab.state().map((x) => JSON.stringify(x));
  const b = direct.state().map((x) => JSON.stringify(x));
  const at = a.findIndex((x, k) => x !== b[k]);
  return at < 0 && a.length === b.length ? [null, null] : [a[at] || "end", b[at] || "end"];
}

let interleaved = 0;  // others' edits applied while own ones were pending
const mismatches = [];
const histories = 300;
for (let k = 0; k < histories; k += 1) {
  const [a, b] = run(5 + pick(40));
  if (a !== b) mismatches.push({ history: k, tab: a, direct: b });
}
console.log(JSON.stringify({ histories, interleaved, mismatches }));
