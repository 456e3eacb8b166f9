// Runs the recorded operation sequences (text_vectors.json) through the browser's text
// replica and prints, per case, what it makes of them (one JSON line per case).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { Stability, TextSequence } from "../../groupcomm/web/static/text_sequence.js";

const here = dirname(fileURLToPath(import.meta.url));
const cases = JSON.parse(readFileSync(join(here, "text_vectors.json"), "utf8"));
for (const c of cases) {
  const text = new TextSequence();
  const stability = new Stability(c.me, c.members);
  const collected = [];
  for (const step of c.steps) {
    const [kind, ...args] = step;
    if (kind === "effect") text.effect(args[0], args[1], args[2]);
    else if (kind === "delivered") stability.delivered(args[0], args[1]);
    else if (kind === "left") stability.memberLeft(args[0]);
    else if (kind === "collect") collected.push(text.collect(stability));
    else throw new Error(`unknown step ${kind}`);
  }
  const ids = text.items.map((i) => i.id);
  const anchors = [];
  for (let p = 0; p <= text.visibleLength(); p += 1) anchors.push(text.anchor(p));
  const positions = Object.fromEntries(ids.map((i) => [i, text.position(i)]));
  console.log(JSON.stringify({ seed: c.seed, collected, value: text.value, kept: text.length, anchors, positions }));
}
