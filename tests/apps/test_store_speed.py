"""``groupcomm store speed``: the keystrokes of a synthetic editing trace stored with
SQLite, with PostgreSQL (the session's real server) and with pycrdt-store, each restored
to the exact text."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.apps.store_speed import keystroke_messages
from groupcomm.apps.text_trace import read_trace
from groupcomm.tools.pgserver import TempPostgres
from tests.apps.test_text_bench_trace import synthetic_trace


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "store", "speed", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "synthetic.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_trace(800)).encode()))
    return path


@pytest.mark.long
def test_every_store_keeps_the_keystrokes_and_restores_the_exact_text(
        trace_file: Path, postgres_server: TempPostgres) -> None:
    done = run("--trace", str(trace_file), "--json", "--batch", "7",
               "--postgres", postgres_server.url())
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    keys = keystroke_messages(read_trace(str(trace_file)), None)
    assert result["edits"] == 800 and result["characters"] == len(keys.text)
    assert [row["backend"] for row in result["results"]] == [
        "sqlite", "postgresql", "pycrdt-store"]
    for row in result["results"]:
        assert row["restored_exactly"] is True, row
        assert row["messages_per_second"] > 0 and row["restore_seconds"] >= 0
    sqlite, postgresql, ystore = result["results"]
    for row in (sqlite, postgresql):  # and from the snapshot kept in the messages' place
        assert row["restored_from_snapshot_exactly"] is True and row["snapshot_bytes"] > 0
    # a replacement is two messages (a delete and an insert), one Yjs update
    assert sqlite["messages"] == postgresql["messages"] == len(keys.messages) > 800
    assert ystore["messages"] == 800
    assert "preparing the messages" in done.stderr


def test_a_prefix_of_the_trace_and_one_line_errors(trace_file: Path,
                                                   postgres_server: TempPostgres) -> None:
    done = run("--trace", str(trace_file), "--keystrokes", "50", "--backends", "sqlite")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("\n") == 1 and "restored in" in done.stdout
    assert "-byte snapshot in" in done.stdout
    bad = run("--trace", str(trace_file), "--backends", "redis")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "groupcomm store speed: --backends: choose among sqlite, postgresql, pycrdt-store"]
    refused = run("--trace", str(trace_file), "--backends", "postgresql", "--postgres",
                  postgres_server.url(password="wrong"))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "groupcomm store speed: --postgres: connection failed")
    assert "password authentication failed" in refused.stderr
