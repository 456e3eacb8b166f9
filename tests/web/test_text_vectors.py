"""The browser's text replica (``text_sequence.js``) against the Python type on the same
operation sequences (``text_vectors.json``, written by ``make_text_vectors.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from tests.web.make_text_vectors import observe

HERE = Path(__file__).parent
CASES = json.loads((HERE / "text_vectors.json").read_text())


def _tupled(op: list) -> tuple:
    return tuple(tuple(p) if isinstance(p, list) else p for p in op)


def test_the_python_type_still_gives_what_the_vectors_record() -> None:
    for case in CASES:
        text = TextSequence()
        stability = Stability(case["me"], case["members"])
        steps = case["steps"]
        for at, (kind, *args) in enumerate(steps):
            if kind == "effect":
                # the sender is the one the "delivered" step right after it names
                after, sender = steps[at + 1][:2]
                assert after == "delivered"
                text.effect(_tupled(args[0]), Tag(args[1]), args[2], sender)
            elif kind == "delivered":
                stability.delivered(args[0], Tag(args[1]))
            elif kind == "left":
                stability.member_left(args[0])
            else:
                assert text.collect(stability) == args[0], f"seed {case['seed']}"
        assert observe(text) == case["expect"], f"seed {case['seed']}"


def node_run(script: str) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript replica cannot be run")
    run = subprocess.run([node, str(HERE / script)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_javascript_replica_gives_what_the_python_type_gives() -> None:
    stdout = node_run("run_text_vectors.mjs")
    results = [json.loads(line) for line in stdout.splitlines()]
    assert [r["seed"] for r in results] == [c["seed"] for c in CASES]
    for case, got in zip(CASES, results, strict=True):
        expected_collects = [args[0] for kind, *args in case["steps"] if kind == "collect"]
        assert got["collected"] == expected_collects, f"seed {case['seed']}"
        assert {k: got[k] for k in ("value", "kept", "anchors", "positions")} == \
            case["expect"], f"seed {case['seed']}"
    # the vectors exercise what matters: concurrent inserts, deletes and collection
    assert any(sum(got["collected"]) for got in results)
    assert sum(len(c["steps"]) for c in CASES) > 300

