"""The browser's editor replica (``editor.js``) against the Python one
(:class:`~groupcomm.replicated.EditorReplica`): random editing sessions of Python
replicas (``editor_sessions.py``), replayed from one member's side into the JavaScript
class under node, end in the same text, cursors, members and counts — also when the
browser's own edits get provisional ids and are confirmed later, and when the member
joined late and started from another's snapshot, and with other members' clock
acknowledgements (which may let it collect)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.web.editor_sessions import session

HERE = Path(__file__).parent
SESSIONS = [session(seed, 100 + seed % 7 * 60, coalesce=seed % 3 == 0, collect=seed % 2 == 0,
                    newcomer={1: "recorded", 3: "seen"}.get(seed % 4))
            for seed in range(48)]


def test_the_sessions_exercise_what_matters() -> None:
    steps = [step for s in SESSIONS for step in s["steps"]]
    kinds = {step[0] for step in steps}
    assert kinds == {"act", "deliver", "left", "joined", "install", "acknowledged"}
    assert sum(s["expect"]["collected"] for s in SESSIONS) > 0
    assert any(step[0] == "deliver" and step[5] for step in steps)  # superseded cursors
    assert any(s["expect"]["others"] for s in SESSIONS)
    assert any(s["me"] == "d" for s in SESSIONS)


def node_run(script: str, stdin: str = "") -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript replica cannot be run")
    run = subprocess.run([node, str(HERE / script)], input=stdin, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_javascript_replica_ends_as_the_python_one() -> None:
    stdout = node_run("run_editor_sessions.mjs", json.dumps(SESSIONS))
    results = [json.loads(line) for line in stdout.splitlines()]
    by_seed = {s["seed"]: s for s in SESSIONS}
    assert len(results) == sum(1 if s["collect"] else 2 for s in SESSIONS)
    assert {r["mode"] for r in results} == {"direct", "provisional"}
    # others' edits arrived while the browser's own were unconfirmed, many times
    assert sum(r.pop("interleaved") for r in results) > 300
    for got in results:
        expect = by_seed[got["seed"]]["expect"]
        where = f"seed {got['seed']}, {got['mode']}"
        assert got.pop("unconfirmed") == 0 and got.pop("mismatches") == 0, where
        got.pop("seed"), got.pop("mode")
        assert got == expect, where


def test_the_browsers_own_edits_are_confirmed_or_start_it_again() -> None:
    """Own edits under provisional ids take their real ids when the gateway answers
    with the expected tag, and say the page must start again when the tag differs;
    nothing is collected while one is unconfirmed (``run_editor_checks.mjs``)."""
    assert node_run("run_editor_checks.mjs").strip() == "ok"


@pytest.mark.long
def test_edits_of_a_mebibyte_work_in_the_javascript_replica() -> None:
    """A 1 MiB insert delivered, pasted (sent in runs within the limit, confirmed late),
    installed from a state, drawn while typed and a 200,000-character delete: nothing
    spreads a run into a call's arguments, which overflows the stack from some 120,000
    characters on (``run_large_edits.mjs``)."""
    result = json.loads(node_run("run_large_edits.mjs"))
    assert result["ok"]
