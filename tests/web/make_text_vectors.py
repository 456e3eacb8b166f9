"""Writes ``text_vectors.json``: operation sequences and what the Python text type
makes of them, for checking the browser's port (``groupcomm/web/static/text_sequence.js``)
against it. Run ``python tests/web/make_text_vectors.py`` after changing the rules of
either; ``test_text_vectors.py`` checks that both implementations still give what is
recorded.

Each case is one replica's view of a random session of three members editing at once
under causal broadcast: the steps it took (apply an operation with its tag's clock and
id, note a delivery for causal stability, a member leaving, collect) and what the
replica looks like after them (value, characters kept, where each anchor is, the id at
each position).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence

OUT = Path(__file__).with_name("text_vectors.json")
MEMBERS = ("a", "b", "c")


def _listed(op: tuple) -> list[Any]:
    return [list(part) if isinstance(part, tuple) else part for part in op]


def observe(text: TextSequence) -> dict[str, Any]:
    ids = [item[0] for item in text.items()]
    return {"value": text.value, "kept": len(text),
            "anchors": [text.anchor(p) for p in range(text.visible_length() + 1)],
            "positions": {i: text.position(i) for i in ids}}


def case(seed: int, edits: int, collect_every: int, leave: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    texts = {m: TextSequence() for m in MEMBERS}
    stab = {m: Stability(m, MEMBERS) for m in MEMBERS}
    clocks: dict[str, dict[str, int]] = {m: {} for m in MEMBERS}
    sent = dict.fromkeys(MEMBERS, 0)
    #: (sender, op, tag clock, id, the sends the sender had delivered: for causal order)
    inbox: dict[str, list[tuple[str, tuple, dict[str, int], str, dict[str, int]]]] = {
        m: [] for m in MEMBERS}
    delivered: dict[str, dict[str, int]] = {m: {} for m in MEMBERS}
    steps: list[list[Any]] = []  # replica a's
    applied = 0
    members = list(MEMBERS)

    def record(*step: Any) -> None:
        steps.append(list(step))

    def apply(at: str, sender: str, op: tuple, clock: dict[str, int], op_id: str) -> None:
        nonlocal applied
        texts[at].effect(op, Tag(clock), op_id, sender)
        stab[at].delivered(sender, Tag(clock))
        if at == "a":
            record("effect", _listed(op), clock, op_id)
            record("delivered", sender, clock)
            applied += 1
            if applied % collect_every == 0:
                record("collect", texts["a"].collect(stab["a"]))

    def ready(at: str) -> list[int]:
        out = []
        for k, (sender, _, _, _, deps) in enumerate(inbox[at]):
            seen = delivered[at]
            if deps[sender] == seen.get(sender, 0) + 1 and all(
                    seen.get(p, 0) >= v for p, v in deps.items() if p != sender):
                out.append(k)
        return out

    made = 0
    while made < edits or any(inbox[m] for m in members):
        writers = [m for m in members if not (leave and m == "c" and made > edits // 2)]
        if made < edits and rng.random() < 0.5:
            at = rng.choice(writers)
            text = texts[at]
            length = text.visible_length()
            if length and rng.random() < 0.3:
                start = rng.randrange(length)
                op = text.prepare_delete(start, rng.randint(1, min(3, length - start)))
            else:
                op = text.prepare_insert(rng.randint(0, length),
                                         "".join(rng.choice("xyz") for _ in range(rng.randint(1, 3))))
            sent[at] += 1
            clock = {**clocks[at], at: clocks[at].get(at, 0) + 1}
            clocks[at] = dict(clock)
            delivered[at][at] = sent[at]
            deps = dict(delivered[at])
            op_id = f"{at}#{sent[at]}"
            apply(at, at, op, clock, op_id)
            for other in members:
                if other != at:
                    inbox[other].append((at, op, clock, op_id, deps))
            made += 1
            continue
        at = rng.choice(members)
        choices = ready(at)
        if not choices:
            continue
        sender, op, clock, op_id, deps = inbox[at].pop(rng.choice(choices))
        delivered[at][sender] = deps[sender]
        merged = clocks[at]
        for p, v in clock.items():
            merged[p] = max(merged.get(p, 0), v)
        merged[at] = merged.get(at, 0) + 1
        apply(at, sender, op, clock, op_id)
    if leave:
        stab["a"].member_left("c")
        record("left", "c")
        record("collect", texts["a"].collect(stab["a"]))
    assert len({texts[m].value for m in members}) == 1, "replicas diverged"
    return {"seed": seed, "me": "a", "members": list(MEMBERS), "steps": steps,
            "expect": observe(texts["a"])}


def main() -> int:
    cases = [case(seed, edits, every, leave)
             for seed, edits, every, leave in [
                 (1, 12, 4, False), (2, 30, 5, False), (3, 40, 7, True), (4, 25, 3, True),
                 (5, 60, 10, False), (6, 8, 2, False)]]
    OUT.write_text(json.dumps(cases, separators=(",", ":")) + "\n")
    print(f"wrote {len(cases)} cases, {sum(len(c['steps']) for c in cases)} steps to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
