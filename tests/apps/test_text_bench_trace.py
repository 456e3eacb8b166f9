"""``groupcomm text-bench --trace``: a recorded editing session replayed into the text
and into pycrdt, on a synthetic trace in the editing-traces format made here (typing,
backspaces, a paste, a selection deleted, moves of the cursor)."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.apps.text_trace import read_trace
from groupcomm.cli.args import CliError


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "text-bench", *args],
                          capture_output=True, text=True, timeout=300)


def synthetic_trace(edits: int, seed: int = 3, letters: str = "abcdefghij \n") -> dict:
    """A trace of ``edits`` patches in the sequential_traces format, with its end."""
    rng = random.Random(seed)
    text, cursor, txns = "", 0, []
    while len(txns) < edits:
        roll = rng.random()
        if roll < 0.05:
            cursor = rng.randint(0, len(text))
            continue
        if roll < 0.2 and cursor:                       # backspace
            patch = [cursor - 1, 1, ""]
        elif roll < 0.21 and len(text) - cursor > 20:   # a selection deleted
            patch = [cursor, rng.randint(2, 20), ""]
        elif roll < 0.22:                               # a paste, or a replacement
            patch = [cursor, 1 if cursor < len(text) else 0, "pasted text\n" * 3]
        else:
            patch = [cursor, 0, rng.choice(letters)]
        position, deleted, inserted = patch
        text = text[:position] + inserted + text[position + deleted:]
        cursor = position + len(inserted)
        txns.append({"patches": [patch]})
    return {"startContent": "", "endContent": text, "txns": txns}


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "synthetic.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_trace(4000)).encode()))
    return path


def test_a_trace_is_replayed_into_the_text_and_pycrdt_with_exact_final_texts(
        trace_file: Path) -> None:
    done = run("--trace", str(trace_file), "--json", "--causality", "scalar-id")
    assert done.returncode == 0, done.stderr[-2000:]
    # a known-bad module on the command line is named, even if the replay needs none
    assert "scalar-id is a known-bad module" in done.stderr
    assert "replaying 4,000 edits of synthetic.json.gz into groupcomm and pycrdt" in done.stderr
    result = json.loads(done.stdout)
    assert result["edits"] == 4000 and result["collect"] is True
    ours, theirs = result["groupcomm"], result["pycrdt"]
    for measured in (ours, theirs):
        assert measured["exact"] and measured["edits"] == 4000 and measured["window"] == 1000
        assert measured["cpu_seconds"] > 0 and measured["first_us_per_edit"] > 0
        assert measured["last_us_per_edit"] > 0 and measured["peak_memory_bytes"] >= 0
    assert ours["characters"] == theirs["characters"] > 1000
    # typing collected into chains: far fewer rows than characters, and it loads back
    assert 0 < ours["snapshot_runs"] < ours["characters"] / 4
    assert ours["snapshot_msgpack_bytes"] < ours["snapshot_pickle_bytes"] * 2
    assert ours["collect_everything_ms"] > 0 and ours["collect_after_64_edits_us"] > 0


def test_a_plain_trace_gives_the_table_and_a_wrong_end_is_said(tmp_path: Path) -> None:
    # positions count code points (pycrdt counts UTF-8 bytes: it sits this one out)
    trace = synthetic_trace(600, seed=5, letters="abc éπ\n")
    trace["endContent"] += "?"
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(trace))
    done = run("--trace", str(path), "--no-collect")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "no pycrdt replay: pycrdt indexes its text in UTF-8 bytes" in done.stderr
    lines = done.stdout.splitlines()
    assert "keeping every tombstone and tag (--no-collect)" in lines[0]
    length = len(trace["endContent"]) - 1
    assert lines[1] == f"final text: groupcomm DIFFERENT from character {length:,}"
    assert lines[2].split() == ["groupcomm"]
    assert any(line.startswith("peak memory (MB, max RSS)") for line in lines)
    assert any(line.startswith("snapshot of the final text:") for line in lines)
    assert lines[-3].startswith("no comparison: pycrdt indexes")


def test_bad_traces_are_one_line(tmp_path: Path) -> None:
    cases = {
        "garbage": (b"not json", "is not a (gzipped) JSON trace"),
        "gzipped garbage": (gzip.compress(b"[1,"), "is not a (gzipped) JSON trace"),
        "shape": (json.dumps({"txns": []}).encode(), "expected an object with endContent"),
        "patch": (json.dumps({"endContent": "", "txns": [{"patches": [[0, -1, "a"]]}]}
                             ).encode(), "transaction 0: a patch is [position >= 0"),
        "nothing": (json.dumps({"endContent": "", "txns": [{"patches": [[0, 0, ""]]}]}
                               ).encode(), "that changes something"),
        "empty": (json.dumps({"endContent": "", "txns": []}).encode(), "has no edits"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CliError, match=re.escape(message)):
            read_trace(str(path))
    # as a user sees it: one line and exit code 2, before and during the replay
    (tmp_path / "outside").write_text(json.dumps(
        {"endContent": "", "txns": [{"patches": [[5, 0, "a"]]}]}))
    for name, message in [("garbage", "is not a (gzipped) JSON trace"),
                          ("outside", "position 5 is outside the text (0..0)"),
                          ("missing", "cannot read the trace")]:
        done = run("--trace", str(tmp_path / name))
        assert done.returncode == 2 and message in done.stderr, (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) <= 2, done.stderr  # + "replaying"
    done = run("--trace", str(tmp_path / "garbage"), "--timeout", "0")
    assert done.returncode == 2 and "--timeout is a number of seconds > 0" in done.stderr
    assert "github.com/josephg/editing-traces" in run("--help").stdout.replace("\n", " ")
