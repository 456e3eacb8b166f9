"""``groupcomm text-bench`` as a user runs it, on a small workload."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "text-bench", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.long  # three editor processes: 5 s
def test_text_bench_measures_the_type_the_metadata_and_three_editor_processes(tmp_path) -> None:
    plot = tmp_path / "kept.png"
    done = run("--local-edits", "600", "--edits", "100", "--causality", "matrix",
               "--plot", str(plot), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["local"]["edits"] == 600 and result["local"]["edits_per_second"] > 0
    meta = result["metadata"]
    assert meta["kept_collected"] < meta["kept_without"]
    assert meta["bytes_per_character_collected"] < meta["bytes_per_character_without"]
    [matrix] = result["communicator"]
    assert matrix["module"] == "matrix" and matrix["edits"] == 300
    assert matrix["identical"] and matrix["failed_edits"] == 0
    assert plot.stat().st_size > 1000
    assert "three editors, 100 edits each, under matrix" in done.stderr  # progress


def test_text_bench_bad_arguments_are_one_line() -> None:
    done = run("--causality", "nope")
    assert done.returncode == 2 and "unknown causality module 'nope'" in done.stderr
    done = run("--edits", "0")
    assert done.returncode == 2 and "--edits >= 1" in done.stderr
