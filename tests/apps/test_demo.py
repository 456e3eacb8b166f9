"""The end-to-end demonstration, run as a user runs it (a separate process), with the
Spark analysis."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

EXPECTED_CAROL = {
    ("meeting", "none"): ["m3", "m1"],
    ("meeting", "fifo"): ["m3", "m1"],
    ("meeting", "matrix"): ["m1", "m3"],
    ("meeting", "mfss"): ["m1", "m3"],
    ("meeting", "cykas"): ["m1", "m3"],
    ("lunch", "none"): ["m2", "m1"],
    ("lunch", "vector"): ["m1", "m2"],
    ("lunch", "matrix"): ["m1", "m2"],
}
FULL_TEXT = "Dear all: Hello world"
#: the shared-text scenario: whether the copies end identical, by module
EXPECTED_TEXT = {"none": False, "fifo": False, "vector": True, "matrix": True}


def run_demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "demo", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.long
def test_demo_json_for_every_module(tmp_path) -> None:
    traces = tmp_path / "traces"
    done = run_demo("--json", "--report", str(tmp_path / "report"), "--trace-dir",
                    str(traces))
    assert done.returncode == 0, done.stderr[-2000:]
    # Spark's JVM start-up lines (log4j, the JDK's warnings) go to spark.log beside the
    # traces; the demo's stderr holds only its own progress lines
    spark_log = traces / "spark.log"
    assert spark_log.exists()
    lines = done.stderr.splitlines()
    assert lines[0] == f"starting Spark (its output: {spark_log})..."
    assert all(line.startswith("[") for line in lines[1:]), lines
    runs = json.loads(done.stdout)["runs"]
    assert {(r["scenario"], r["causality"]) for r in runs} == set(EXPECTED_CAROL) | {
        ("shared-text", m) for m in EXPECTED_TEXT}
    for run in runs:
        key = (run["scenario"], run["causality"])
        if run["scenario"] == "shared-text":
            causal = EXPECTED_TEXT[run["causality"]]
            assert run["identical"] is causal, run["texts"]
            # without causal order carol gets bob's " world" before the "Hello" it
            # follows: that edit fails at carol, and the analysis sees her deliver it
            # (and bob's cursor move) before alice's edit
            assert run["texts"]["alice"] == run["texts"]["bob"] == FULL_TEXT
            assert run["texts"]["carol"] == (FULL_TEXT if causal else "Dear all: Hello")
            assert run["failed_edits"] == (0 if causal else 1)
            assert (run["causal_violations"] == 0) is causal
            assert run["undelivered"] == 0
            continue
        assert run["deliveries"]["carol"] == EXPECTED_CAROL[key], key
        assert run["causal_violations"] == (1 if run["causality"] in ("none", "fifo") else 0)
        assert run["undelivered"] == 0
        assert run["median_latency_ms"] is not None
    by = {(r["scenario"], r["causality"]): r for r in runs}
    assert by[("meeting", "mfss")]["meta_bytes_per_message"] == 0
    assert by[("meeting", "mfss")]["control_messages_per_message"] == pytest.approx(1.0)
    assert by[("meeting", "matrix")]["meta_bytes_per_message"] > 0
    assert (tmp_path / "report" / "meeting-none" / "spacetime.png").exists()
    assert "[1/12]" in done.stderr  # progress


def test_demo_unknown_module_is_a_clear_error() -> None:
    done = run_demo("--causality", "nope", timeout=60)
    assert done.returncode == 2
    assert "unknown causality module 'nope'" in done.stderr and "matrix" in done.stderr

