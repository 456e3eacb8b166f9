"""The model checker on the real filters: pinned state spaces, correct and known-bad
protocols, liveness and exceptions, workloads, replay, and one counterexample confirmed
by the real ``groupcomm analyze`` (Spark). Counterexamples are also confirmed by the
pure-Python reference checker (trace_analysis.reference). Exhaustive 3 processes x 2
messages runs of the correct protocols are marked slow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.check import (
    CheckConfig,
    ConfigError,
    Model,
    check,
    load_workload,
    replay,
    write_counterexample,
)
from tests.check.helpers import KNOWN_BAD, ROOT, run
from trace_analysis.reference import check_directory

# -- pinned state spaces (a change to a protocol's state space must be noticed) -----------------
PINNED = [
    # protocol, processes, messages, fifo network, unique states, transitions, max depth
    ("none", 2, 1, False, 13, 14, 4),
    ("fifo", 2, 2, False, 165, 272, 8),
    ("matrix", 2, 2, False, 165, 272, 8),
    ("mfss", 2, 2, False, 421, 764, 12),
    ("cykas", 2, 2, False, 421, 764, 12),
    ("vector", 2, 2, False, 258, 545, 9),
    ("mfss", 2, 2, True, 247, 372, 12),
]


@pytest.mark.parametrize(("protocol", "n", "k", "fifo", "states", "transitions", "depth"),
                         PINNED)
def test_pinned_state_counts(protocol, n, k, fifo, states, transitions, depth) -> None:
    result = run(protocol, n, k, fifo_network=fifo)
    assert result.result == "ok", result.detail
    assert (result.states, result.transitions, result.max_depth) == (states, transitions, depth)


def test_pinned_counts_at_three_processes_one_message() -> None:
    got = {p: run(p, 3, 1).states for p in ("matrix", "mfss", "cykas", "vector")}
    assert got == PINNED_3x1


PINNED_3x1 = {"matrix": 281, "mfss": 1216, "cykas": 1216, "vector": 3056}


# -- correct protocols ------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["matrix", "mfss", "cykas", "vector", "fifo"])
def test_correct_protocols_two_processes_fifo_network(protocol: str) -> None:
    result = run(protocol, 2, 2, fifo_network=True)
    assert result.result == "ok", result.detail
    assert result.terminal_states > 0


def test_fifo_network_makes_none_fifo_but_not_causal() -> None:
    assert run("none", 2, 2, fifo_network=True).result == "ok"
    bad = run("none", 3, 2, fifo_network=True)
    assert (bad.result, bad.property) == ("violation", "causal")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["matrix", "mfss", "cykas", "vector"])
def test_correct_protocols_three_by_two(protocol: str) -> None:
    result = run(protocol, 3, 2, reduce=True)
    assert result.result == "ok", result.detail


# -- known-bad protocols ----------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "n", "k", "options", "prop"), KNOWN_BAD)
def test_known_bad_protocols_are_caught_and_traces_confirm(
    protocol, n, k, options, prop, tmp_path: Path
) -> None:
    config = CheckConfig(protocol=protocol, processes=n, messages=k, **options)
    result = check(config)
    assert (result.result, result.property) == ("violation", prop), result.detail
    assert result.counterexample and len(result.counterexample) == len(result.actions)
    assert "VIOLATION" in result.counterexample[-1]
    files = write_counterexample(config, result, tmp_path / "cex")
    assert files
    confirmed = check_directory(tmp_path / "cex")
    if prop in ("causal", "fifo"):
        assert confirmed.causal_violations >= 1
        if prop == "fifo":
            assert confirmed.fifo_violations >= 1
        else:
            assert confirmed.fifo_violations == 0
    else:  # refused: the application's send is never delivered
        assert confirmed.undelivered >= 1 and confirmed.causal_violations == 0


def test_shortest_counterexample_for_secret_sends_is_figure_3() -> None:
    result = run("cykas-secret-sends", 3, 2)
    # 004 §2.3, Figure 3: two eager sends put p3 in secret mode for both senders; its
    # send to one of them overtakes a message of the other
    assert len(result.counterexample) == 8
    assert sum("(eager)" in step for step in result.counterexample) == 2
    assert result.detail.startswith("p1 delivered p3#1 before p2#1")


def test_vector_bypassing_its_refusal_stays_causal_and_live() -> None:
    # with the call-time check bypassed, the vector filter's "skip" notices fill the
    # sequence gaps of the members left out, so unicast does not block: the refusal is
    # the only way the vector module fails on unicast traffic
    result = run("vector", 3, 1, destinations="unicast", bypass_refusal=True)
    assert result.result == "ok", result.detail


def test_dfs_finds_violations_too_but_bfs_is_shortest() -> None:
    bfs = run("fifo", 3, 2)
    dfs = run("fifo", 3, 2, dfs=True)
    assert dfs.result == "violation" and dfs.property == bfs.property
    assert len(dfs.counterexample) >= len(bfs.counterexample)


def test_liveness_violation_in_a_terminal_state(extra_modules, tmp_path: Path) -> None:
    config = CheckConfig(protocol="test-forgetful", processes=2, messages=2)
    result = check(config)
    assert (result.result, result.property) == ("violation", "liveness"), result.detail
    assert "undelivered" in result.detail
    write_counterexample(config, result, tmp_path / "cex")
    confirmed = check_directory(tmp_path / "cex")
    assert confirmed.undelivered >= 1 and confirmed.causal_violations == 0


def test_exception_in_a_filter_is_a_violation(extra_modules) -> None:
    result = run("test-raising", 2, 1)
    assert (result.result, result.property) == ("violation", "exception")
    assert "ProtocolViolation" in result.detail and "acks are not welcome" in result.detail
    assert result.counterexample[-1].startswith("p1 receives ack from p2")


# -- workloads --------------------------------------------------------------------------------
def test_workload_fixes_destinations(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"sends": {"a": [["c"], ["b"]], "b": [["c"]], "c": []}}))
    workload = load_workload(path)
    assert workload == {"a": [("c",), ("b",)], "b": [("c",)], "c": []}
    bad = check(CheckConfig(protocol="fifo", workload=workload))
    assert (bad.result, bad.property) == ("violation", "causal")
    assert all(step.split()[0] in "abc" for step in bad.counterexample)
    good = check(CheckConfig(protocol="cykas", workload=workload))
    assert good.result == "ok"
    multicast = check(CheckConfig(protocol="mfss", workload=load_workload(
        {"sends": {"a": [["b", "c"]], "b": [["a", "c"]], "c": []}})))
    assert multicast.result == "ok"


@pytest.mark.parametrize("data", [
    {"nope": 1}, {"sends": {"a": [["b"]]}}, {"sends": {"a": [["zz"]], "b": []}},
    {"sends": {"a": [[]], "b": []}}, {"sends": {"a": [["a"]], "b": []}},
])
def test_bad_workloads_are_refused(data) -> None:
    with pytest.raises(ConfigError):
        load_workload(data)


def test_bad_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown causality module"):
        Model(CheckConfig(protocol="nope"))
    with pytest.raises(ConfigError):
        Model(CheckConfig(protocol="none", processes=1))


def test_max_states_stops_with_incomplete() -> None:
    result = run("mfss", 3, 2, max_states=500)
    assert result.result == "incomplete" and result.stopped
    assert 500 <= result.states < 600


def test_replay_reproduces_the_steps() -> None:
    config = CheckConfig(protocol="fifo", processes=3, messages=2)
    result = check(config)
    texts, records = replay(config, result.actions)
    assert texts[:-1] == result.counterexample[:-1]
    assert {r["event"] for r in records} >= {"send", "deliver", "network_send"}


# -- the real Spark analysis on one counterexample ------------------------------------------------
@pytest.mark.long
def test_groupcomm_analyze_confirms_a_counterexample(tmp_path: Path) -> None:
    cex = tmp_path / "cex"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    checked = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "check", "--protocol", "cykas-secret-sends",
         "--processes", "3", "--messages", "2", "--trace-dir", str(cex), "-q"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )
    assert checked.returncode == 1, checked.stderr
    assert "property: causal" in checked.stdout
    analyzed = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "analyze", str(cex), "--json", "--quiet",
         "--report", str(tmp_path / "report")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    summary = json.loads(analyzed.stdout.strip().splitlines()[-1])
    assert summary["causal_violations"] >= 1
    assert summary["fifo_violations"] == 0
