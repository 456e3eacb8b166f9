"""The bounded model checker (groupcomm.check) on the real filters.

Counterexamples are confirmed by the trace analysis: the pure-Python reference checker
(trace_analysis.reference) for speed, and once by the real ``groupcomm analyze`` (Spark).
Exhaustive 3 processes x 2 messages runs of the correct protocols are marked slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
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
from groupcomm.cli.check import main as check_main
from trace_analysis.reference import check_directory

ROOT = Path(__file__).resolve().parents[2]


def run(protocol: str, processes: int, messages: int, **options) -> object:
    return check(CheckConfig(protocol=protocol, processes=processes, messages=messages,
                             **options))


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
KNOWN_BAD = [
    # protocol, processes, messages, options, property
    ("none", 2, 2, {}, "fifo"),
    ("fifo", 3, 2, {}, "causal"),
    ("cykas-secret-sends", 3, 2, {}, "causal"),
    ("scalar-id", 3, 1, {}, "causal"),
    ("last-sender", 3, 1, {}, "causal"),
    ("vector", 3, 1, {"destinations": "unicast"}, "refused"),
]


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


# -- reductions -------------------------------------------------------------------------------
SMALL = [("none", 2, 2), ("fifo", 3, 1), ("fifo", 2, 2), ("matrix", 2, 2), ("mfss", 2, 2),
         ("cykas", 2, 2), ("fifo", 3, 2), ("scalar-id", 3, 1),
         ("vector", 2, 2), ("matrix", 3, 1)]


@pytest.mark.parametrize(("protocol", "n", "k"), SMALL)
def test_reduced_search_gives_the_same_verdict(protocol: str, n: int, k: int) -> None:
    plain = run(protocol, n, k)
    reduced = run(protocol, n, k, reduce=True)
    assert (reduced.result, reduced.property) == (plain.result, plain.property)
    assert reduced.states == plain.states  # hash compaction: no collision at this size
    assert len(reduced.counterexample) == len(plain.counterexample)


@pytest.mark.parametrize(("protocol", "n", "k"), [("fifo", 2, 2), ("mfss", 2, 2),
                                                   ("vector", 2, 2), ("matrix", 3, 1)])
def test_dfs_explores_the_same_states_when_ok(protocol: str, n: int, k: int) -> None:
    assert run(protocol, n, k).states == run(protocol, n, k, dfs=True).states


# -- liveness and exceptions (with throw-away modules) -----------------------------------------
@pytest.fixture
def extra_modules() -> Iterator[None]:
    from filters.mfss import MfssManager, MfssModule
    from groupcomm.core import registry
    from groupcomm.core.causality import ProtocolViolation

    class ForgetfulManager(MfssManager):
        """MFSS that never sends the second message of its buffer: a liveness bug."""

        def try_send(self) -> None:
            if self.unacked is None and self.buffer and self.host.name == "p1":
                self.buffer.clear()
                return
            super().try_send()

    class ForgetfulModule(MfssModule):
        name = "test-forgetful"

        def create_manager(self, host):
            return ForgetfulManager(host)

    class RaisingManager(MfssManager):
        def on_ack(self, message) -> None:
            raise ProtocolViolation("test: acks are not welcome")

    class RaisingModule(MfssModule):
        name = "test-raising"

        def create_manager(self, host):
            return RaisingManager(host)

    registry.available_modules()
    for module in (ForgetfulModule, RaisingModule):
        registry.register_module(module, origin="tests")
    yield
    for module in (ForgetfulModule, RaisingModule):
        registry.unregister_module(module.name)


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


# -- command line -----------------------------------------------------------------------------
def test_cli_text_and_json(capsys, tmp_path: Path) -> None:
    assert check_main(["--protocol", "mfss", "--processes", "2", "--messages", "1", "-q"]) == 0
    out = capsys.readouterr().out
    for field in ("result: ok", "states:", "transitions:", "max_depth:", "seconds:"):
        assert field in out
    code = check_main(["--protocol", "none", "--processes", "2", "--messages", "2", "--json",
                       "-q", "--trace-dir", str(tmp_path / "cex")])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["result"] == "violation" and data["property"] == "fifo"
    assert data["counterexample"][0] == "p1 sends p1#1 to p2"
    assert sorted(Path(f).name for f in data["trace_files"]) == ["p1.jsonl", "p2.jsonl"]


@pytest.mark.parametrize("argv", [
    [], ["--protocol", "nope"], ["--protocol", "none", "--processes", "1"],
    ["--protocol", "none", "--messages", "-1"], ["--protocol", "none", "--max-states", "0"],
    ["--protocol", "none", "--workload", "/nonexistent.json"], ["--protocol", "none", "--bogus"],
])
def test_cli_bad_arguments_give_one_line_and_exit_2(argv, capsys) -> None:
    assert check_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1 and "groupcomm check" in err


def test_cli_progress_goes_to_stderr(capsys) -> None:
    from groupcomm.check import config

    assert check_main(["--protocol", "mfss", "--processes", "2", "--messages", "2"]) == 0
    assert config.PROPERTIES  # progress may not fire in such a short run
    assert "result: ok" in capsys.readouterr().out


# -- the real Spark analysis on one counterexample ------------------------------------------------
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


# -- symmetry reduction -----------------------------------------------------------------------
def _random_states(model: Model, walks: int, seed: int) -> list[tuple]:
    """States along random walks from the initial state to a terminal state (or a
    violation): a sample that reaches deep into the state space."""
    import random

    from groupcomm.check.model import Violation

    rng = random.Random(seed)
    out = []
    for _ in range(walks):
        state = model.initial_state
        while True:
            out.append(state)
            actions = model.enabled(state)
            if not actions:
                break
            try:
                state, _ = model.apply(state, rng.choice(actions))
            except Violation:
                break
    return out


def _outcomes(model: Model, symmetry, state: tuple, perm: tuple | None) -> object:
    """Every enabled action of ``state`` renamed by ``perm`` with what it leads to: the
    normalised successor renamed by ``perm``, or the property it violates."""
    from collections import Counter

    from groupcomm.check.model import Violation

    out: Counter = Counter()
    for action in model.enabled(state):
        try:
            nxt, _ = model.apply(state, action)
            outcome = ("ok", symmetry.normal_form(nxt, perm))
        except Violation as violation:
            outcome = ("violation", violation.prop)
        out[(symmetry.normal_action(action, perm), outcome)] += 1
    return out


EQUIVARIANCE = [
    # protocol, processes, messages, options
    ("cykas", 3, 2, {}),
    ("cykas", 3, 2, {"fifo_network": True}),
    ("cykas-secret-sends", 3, 2, {}),
    ("mfss", 3, 2, {}),
    ("mfss", 3, 2, {"fifo_network": True}),
    ("matrix", 3, 2, {}),
    ("matrix", 3, 2, {"destinations": "broadcast"}),
    ("fifo", 3, 2, {}),
    ("none", 3, 2, {}),
    ("scalar-id", 3, 2, {}),
    ("last-sender", 3, 2, {}),
    ("vector", 3, 2, {}),  # not symmetric from its initial state, but steps still commute
    ("cykas", 4, 1, {}),
]


@pytest.mark.parametrize(("protocol", "n", "k", "options"), EQUIVARIANCE)
def test_renaming_commutes_with_the_real_steps(protocol, n, k, options) -> None:
    """Soundness of symmetry reduction, with the real objects as the oracle: a reachable
    state renamed by a random permutation (control ids renumbered in reverse too) and
    restored into the real nodes has exactly the renamed successors and violations of the
    original (step-then-rename == rename-then-step), and the same canonical key."""
    import random
    from itertools import permutations

    from groupcomm.check.symmetry import Symmetry

    model = Model(CheckConfig(protocol=protocol, processes=n, messages=k, **options))
    symmetry = Symmetry(model)
    rng = random.Random(8)
    perms = [p for p in permutations(range(n)) if p != tuple(range(n))]
    states = _random_states(model, walks=6, seed=len(protocol) + n + k)
    assert len(states) > 30
    for state in states:
        perm = rng.choice(perms)
        renamed = symmetry.rename_state(state, perm, renumber_controls=True)
        assert _outcomes(model, symmetry, state, perm) == _outcomes(model, symmetry, renamed,
                                                                    None)
        if symmetry.size > 1:
            assert symmetry.key(renamed) == symmetry.key(state)


def test_a_wrong_renaming_is_caught_by_the_real_objects(monkeypatch) -> None:
    # the oracle is not vacuous: forgetting to rename the id an ACK is about makes the
    # real sender reject the ACK, so the renamed state behaves differently
    from groupcomm.check import symmetry as sym
    from groupcomm.core.messages import ControlMessage

    model = Model(CheckConfig(protocol="mfss", processes=3, messages=1))
    symmetry = sym.Symmetry(model)
    state = model.initial_state
    state, _ = model.apply(state, ("send", "p1", ("p2",)))
    ((d, s, f),) = state[1]
    state, _ = model.apply(state, ("arrive", s, d, f))  # p2 delivers and ACKs
    perm = (1, 0, 2)
    expected = _outcomes(model, symmetry, state, perm)
    assert _outcomes(model, symmetry, symmetry.rename_state(state, perm), None) == expected
    real = sym._Renaming.message

    def forgetful(self, message):
        out = real(self, message)
        if isinstance(out.user_message, ControlMessage):
            out = out.replace(user_message=message.user_message)  # "about" not renamed
        return out

    monkeypatch.setattr(sym._Renaming, "message", forgetful)
    bad = symmetry.rename_state(state, perm)
    monkeypatch.undo()
    outcomes = _outcomes(model, symmetry, bad, None)
    assert outcomes != expected
    assert any(outcome == ("violation", "exception") for (_, outcome) in outcomes)


SYMMETRIC = [*SMALL, ("mfss", 3, 1), ("cykas", 3, 1), ("matrix", 2, 2), ("last-sender", 3, 1),
             ("cykas", 3, 1), ("mfss", 2, 2)]


@pytest.mark.parametrize(("protocol", "n", "k"), SYMMETRIC)
@pytest.mark.parametrize("fifo", [False, True])
def test_symmetry_gives_the_same_verdict(protocol: str, n: int, k: int, fifo: bool) -> None:
    plain = run(protocol, n, k, fifo_network=fifo)
    for reduce in (False, True):
        reduced = run(protocol, n, k, fifo_network=fifo, symmetry=True, reduce=reduce)
        assert (reduced.result, reduced.property) == (plain.result, plain.property)
        assert len(reduced.counterexample) == len(plain.counterexample)
        assert reduced.states <= plain.states


@pytest.mark.parametrize(("protocol", "n", "k", "options", "prop"), KNOWN_BAD)
def test_symmetry_keeps_known_bad_counterexamples(protocol, n, k, options, prop,
                                                  tmp_path: Path) -> None:
    config = CheckConfig(protocol=protocol, processes=n, messages=k, symmetry=True,
                         reduce=True, **options)
    result = check(config)
    plain = run(protocol, n, k, **options)
    assert (result.result, result.property) == ("violation", prop)
    assert len(result.counterexample) == len(plain.counterexample)
    # the counterexample is a real run (representatives are concrete states)
    texts, _ = replay(config, result.actions)
    assert texts[:-1] == result.counterexample[:-1]
    write_counterexample(config, result, tmp_path / "cex")
    confirmed = check_directory(tmp_path / "cex")
    assert confirmed.causal_violations >= 1 or prop == "refused"


def _all_states(model: Model) -> list[tuple]:
    """Every reachable state, by a plain search (no reduction)."""
    seen = {model.initial_state}
    frontier = [model.initial_state]
    while frontier:
        state = frontier.pop()
        for _, nxt, _ in model.successors(state):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return list(seen)


@pytest.mark.parametrize(("protocol", "n", "k", "fifo"), [
    ("cykas", 3, 1, False), ("mfss", 3, 1, False), ("matrix", 3, 1, False),
    ("cykas", 2, 2, False), ("mfss", 2, 2, True), ("cykas", 3, 1, True),
    pytest.param("mfss", 3, 2, False, marks=pytest.mark.slow),
    pytest.param("matrix", 3, 2, False, marks=pytest.mark.slow),
])
def test_symmetric_search_visits_exactly_one_state_per_class(protocol, n, k, fifo) -> None:
    """The reduced search finds as many states as there are classes of equal keys among
    *all* reachable states: it misses no class (and never splits one)."""
    from groupcomm.check.symmetry import Symmetry

    config = CheckConfig(protocol=protocol, processes=n, messages=k, fifo_network=fifo)
    model = Model(config)
    symmetry = Symmetry(model)
    classes = {symmetry.key(state) for state in _all_states(model)}
    reduced = run(protocol, n, k, fifo_network=fifo, symmetry=True)
    assert reduced.result == "ok"
    assert reduced.states == len(classes)


PINNED_SYMMETRIC = [
    # protocol, processes, messages, fifo network, unique states, group size
    ("cykas", 3, 1, False, 183, 6),
    ("mfss", 3, 1, False, 183, 6),
    ("matrix", 3, 1, False, 51, 6),
    ("cykas", 2, 2, False, 217, 2),
    ("cykas", 3, 1, True, 150, 6),
    ("vector", 3, 1, False, 3056, 1),
]


@pytest.mark.parametrize(("protocol", "n", "k", "fifo", "states", "group"), PINNED_SYMMETRIC)
def test_pinned_symmetric_state_counts(protocol, n, k, fifo, states, group) -> None:
    result = run(protocol, n, k, fifo_network=fifo, symmetry=True)
    assert result.result == "ok", result.detail
    assert (result.states, result.config["symmetry_group"]) == (states, group)


def test_symmetry_follows_the_workload() -> None:
    ring = {"sends": {"a": [["b"]], "b": [["c"]], "c": [["a"]]}}
    config = CheckConfig(protocol="fifo", workload=load_workload(ring), symmetry=True)
    result = check(config)
    assert result.config["symmetry_group"] == 3  # the rotations, not the reflections
    plain = check(CheckConfig(protocol="fifo", workload=load_workload(ring)))
    assert (result.result, result.property, len(result.counterexample)) == (
        plain.result, plain.property, len(plain.counterexample))
    assert result.states < plain.states
    skewed = {"sends": {"a": [["b"], ["c"]], "b": [["c"]], "c": []}}
    lone = check(CheckConfig(protocol="cykas", workload=load_workload(skewed), symmetry=True))
    assert lone.config["symmetry_group"] == 1
    assert "workload gives processes different sends" in lone.config["symmetry"]


def test_symmetry_is_refused_where_renaming_is_not_known(extra_modules, capsys) -> None:
    with pytest.raises(ConfigError, match="--symmetry supports"):
        check(CheckConfig(protocol="test-forgetful", processes=2, messages=1, symmetry=True))
    with pytest.raises(ConfigError, match="--symmetry supports"):
        check(CheckConfig(protocol="matrix-delta", processes=2, messages=1, symmetry=True))
    assert check_main(["--protocol", "matrix-delta", "--symmetry", "-q"]) == 2
    assert "--symmetry supports" in capsys.readouterr().err
    assert check_main(["--protocol", "vector", "--processes", "2", "--messages", "1",
                       "--symmetry", "-q"]) == 0
    assert "symmetry: no process symmetry" in capsys.readouterr().out


@pytest.mark.slow
def test_cykas_three_by_two_with_symmetry() -> None:
    result = run("cykas", 3, 2, reduce=True, symmetry=True)
    assert result.result == "ok", result.detail
    assert result.states == 336_713


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["matrix", "mfss"])
def test_symmetry_matches_plain_search_at_three_by_two(protocol: str) -> None:
    plain = run(protocol, 3, 2, reduce=True)
    reduced = run(protocol, 3, 2, reduce=True, symmetry=True)
    assert plain.result == reduced.result == "ok"
    assert reduced.states * 5 < plain.states



# -- partial-order reduction (--por) -------------------------------------------------------------
def _explore(model: Model, reduce_with=None) -> tuple[set, set, int]:
    """Every state reachable in the full graph (or, with ``reduce_with`` - a
    :class:`PersistentSets` - in the reduced one), continuing past violations: the
    terminal states, the violating transitions with their properties, and the number of
    states."""
    from groupcomm.check.model import Violation

    seen = {model.initial_state}
    stack = [model.initial_state]
    terminals: set = set()
    violations: set = set()
    while stack:
        state = stack.pop()
        actions = model.enabled(state)
        if not actions:
            terminals.add(state)
            continue
        if reduce_with is not None:
            actors = reduce_with.choose(state)
            if type(actors) is tuple:  # one declared-commuting control arrival
                chosen = [a for a in actions if a[0] == "arrive" and a[1:] == actors]
                assert len(chosen) == 1
                actions = chosen
            elif actors is not None:
                chosen = [a for a in actions
                          if model.index[a[1] if a[0] == "send" else a[2]] in actors]
                assert chosen  # a persistent set of a non-terminal state is not empty
                actions = chosen
        for action in actions:
            try:
                nxt, _ = model.apply(state, action)
            except Violation as violation:
                violations.add((action, violation.prop))
                continue
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return terminals, violations, len(seen)


POR_CASES = [
    # protocol, processes, messages, options
    ("none", 2, 2, {}),
    ("none", 3, 1, {}),
    # the causal triangle and the paper's Figure 3 as fixed workloads (small graphs)
    ("fifo", 3, 0, {"workload": load_workload(
        {"sends": {"p1": [["p3"], ["p2"]], "p2": [["p3"]], "p3": []}})}),
    ("cykas-secret-sends", 3, 0, {"workload": load_workload(
        {"sends": {"p1": [["p2"], ["p3"]], "p2": [["p1"], ["p3"]], "p3": [["p1"]]}})}),
    pytest.param("fifo", 3, 2, {}, marks=pytest.mark.slow),
    ("scalar-id", 3, 1, {}),
    ("last-sender", 3, 1, {}),
    ("vector", 3, 1, {"destinations": "unicast"}),
    ("vector", 3, 1, {}),
    ("matrix", 3, 1, {}),
    ("matrix", 2, 2, {}),
    ("matrix", 3, 1, {"destinations": "broadcast"}),
    ("matrix-delta", 3, 1, {}),
    ("mfss", 3, 1, {}),
    ("mfss", 2, 2, {}),
    ("cykas", 3, 1, {}),
    ("cykas", 2, 2, {}),
]


@pytest.mark.parametrize(("protocol", "n", "k", "options"), POR_CASES)
@pytest.mark.parametrize("fifo", [False, True])
def test_persistent_sets_keep_terminal_states_and_violations(protocol, n, k, options,
                                                             fifo) -> None:
    """Soundness of --por on the real objects: the reduced graph reaches exactly the
    terminal states of the full one, and every transition that violates a property in
    the full graph (same actor, same input) violates the same property somewhere in the
    reduced one."""
    from groupcomm.check.por import PersistentSets

    model = Model(CheckConfig(protocol=protocol, processes=n, messages=k, fifo_network=fifo,
                              **options))
    full_terminals, full_violations, full_states = _explore(model)
    sets = PersistentSets(model)
    terminals, violations, states = _explore(model, sets)
    assert terminals == full_terminals
    assert violations == full_violations
    assert states <= full_states


def test_persistent_sets_follow_a_workload() -> None:
    from groupcomm.check.por import PersistentSets

    ring = load_workload({"sends": {"a": [["b"]], "b": [["c"]], "c": [["a"]]}})
    for protocol in ("fifo", "cykas", "mfss"):
        model = Model(CheckConfig(protocol=protocol, workload=ring))
        full = _explore(model)
        reduced = _explore(model, PersistentSets(model))
        assert reduced[:2] == full[:2]


def test_state_graphs_are_acyclic() -> None:
    """The persistent-set argument needs a finite acyclic state space (every emitted
    frame carries a fresh id): checked on small bounds."""
    for protocol, n, k in [("mfss", 3, 1), ("cykas", 2, 2), ("matrix", 2, 2), ("vector", 3, 1),
                           ("fifo", 2, 2)]:
        model = Model(CheckConfig(protocol=protocol, processes=n, messages=k))
        colour: dict = {}
        stack = [(model.initial_state, iter(model.enabled(model.initial_state)))]
        colour[model.initial_state] = 1
        while stack:
            state, actions = stack[-1]
            action = next(actions, None)
            if action is None:
                colour[state] = 2
                stack.pop()
                continue
            nxt, _ = model.apply(state, action)
            assert colour.get(nxt) != 1, f"{protocol}: a cycle"
            if nxt not in colour:
                colour[nxt] = 1
                stack.append((nxt, iter(model.enabled(nxt))))


def test_the_emission_analysis_tells_protocols_apart() -> None:
    """Both processes have sent and their messages are in flight. In matrix a receipt
    emits nothing, so one process's arrivals form a persistent set; in cykas the receiver
    ACKs to the sender, so neither process can be deferred; in mfss too, but its ACK is
    declared commuting and would do nothing at p1 (no buffered message): p2 is deferred."""
    from groupcomm.check.por import PersistentSets

    for protocol, expected in (("matrix", frozenset({0})), ("cykas", None),
                               ("mfss", frozenset({0}))):
        model = Model(CheckConfig(protocol=protocol, processes=2, messages=1))
        state = model.initial_state
        state, _ = model.apply(state, ("send", "p1", ("p2",)))
        state, _ = model.apply(state, ("send", "p2", ("p1",)))
        assert PersistentSets(model).actors(state) == expected


def test_persistent_sets_give_up_safely_at_the_bound(monkeypatch) -> None:
    from groupcomm.check.por import PersistentSets

    monkeypatch.setattr(PersistentSets, "EMISSION_LIMIT", 1)
    model = Model(CheckConfig(protocol="matrix", processes=3, messages=1))
    full = _explore(model)
    reduced = _explore(model, PersistentSets(model))
    assert reduced[:2] == full[:2]


# -- the declared-commuting control arrivals of --por (hypothesis H of groupcomm.check.por) --
def _commuting_pairs(model: Model, kinds: frozenset[str]) -> Iterator[tuple[tuple, tuple,
                                                                            tuple]]:
    """Every (state, a, x) of the full graph: a an arrival of a control of ``kinds`` that
    breaks nothing and delivers nothing, x another enabled transition of its receiver."""
    from groupcomm.check.model import Violation
    from groupcomm.core.messages import ControlMessage
    from groupcomm.transport.codec import decode_received

    seen = {model.initial_state}
    stack = [model.initial_state]
    while stack:
        state = stack.pop()
        actions = model.enabled(state)
        for action in actions:
            try:
                nxt, _ = model.apply(state, action)
            except Violation:
                continue
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
            if action[0] != "arrive":
                continue
            user = decode_received(action[3], action[2]).user_message
            if not (isinstance(user, ControlMessage) and user.kind in kinds):
                continue
            if nxt[2] != state[2]:
                continue  # it delivered: not a candidate
            for other in actions:
                actor = other[1] if other[0] == "send" else other[2]
                if other != action and actor == action[2]:
                    yield state, action, other


def _outcome(model: Model, state: tuple, action: tuple) -> object:
    from groupcomm.check.model import Violation

    try:
        return model.apply(state, action)[0]
    except Violation as violation:
        return violation.prop


@pytest.mark.parametrize(("n", "k"), [(3, 1), (2, 2), (2, 3)])
def test_mfss_acks_commute_in_every_reachable_state(n: int, k: int) -> None:
    """Hypothesis H for mfss, exhaustively on the full graph with the real objects: in
    every reachable state, an ACK arrival and every other transition of its receiver
    reach the same state in both orders, with the same outcome (a one-off run checked
    all 406,026 pairs of the 3x2 graph as well)."""
    from groupcomm.check.por import declared_commuting

    model = Model(CheckConfig(protocol="mfss", processes=n, messages=k))
    kinds = declared_commuting(model)
    assert kinds == frozenset({"ack"})
    pairs = 0
    for state, a, x in _commuting_pairs(model, kinds):
        after_a = model.apply(state, a)[0]
        first = _outcome(model, after_a, x)
        after_x = _outcome(model, state, x)
        if isinstance(after_x, str):
            assert first == after_x, (a, x)
        else:
            assert first == model.apply(after_x, a)[0], (a, x)
        pairs += 1
    assert pairs > 10


def test_mfss_acks_do_not_commute_on_fifo_links() -> None:
    """On a FIFO network H fails for mfss (found at 3x2: an ACK that releases a message
    to p2 and a delivery that ACKs p2 fill the channel to p2 in the order of the two
    steps), so nothing is declared there; the run-time check sees it too."""
    from groupcomm.check.por import CommutationError, PersistentSets, declared_commuting

    model = Model(CheckConfig(protocol="mfss", processes=3, messages=2, fifo_network=True))
    assert declared_commuting(model) == frozenset()
    state = model.initial_state
    for action in [("send", "p1", ("p3",)), ("send", "p1", ("p2",)),
                   ("send", "p2", ("p1",))]:
        state, _ = model.apply(state, action)
    # p3 delivers p1#1 and ACKs it; p1#2 (to p2) is buffered at p1 behind that ACK, and
    # p2#1 is in flight to p1: p1 will ACK it to p2
    ((_, frames13),) = [c for c in state[1] if c[0] == ("p1", "p3")]
    state, _ = model.apply(state, ("arrive", "p1", "p3", frames13[0]))
    with pytest.raises(CommutationError, match="different frames"):
        PersistentSets(model, commuting=frozenset({"ack"})).choose(state)


def test_a_wrong_commutation_declaration_is_stopped(monkeypatch) -> None:
    """Declaring cykas' ACK and YCT commuting is wrong (an ACK before a send makes it
    normal, after it eager): the run-time check of H stops the search."""
    from filters.cykas import CykasModule
    from groupcomm.check import por

    monkeypatch.setattr(CykasModule, "commuting_controls", frozenset({"ack", "yct"}))
    with pytest.raises(por.CommutationError, match="declares that a '(ack|yct)' arrival"):
        run("cykas", 3, 2, por=True)
    assert check_main(["--protocol", "cykas", "--processes", "3", "--messages", "2",
                       "--por", "-q"]) == 2


@pytest.fixture
def per_peer_mfss() -> Iterator[str]:
    """A KNOWN-BAD mfss that waits for the ACK of each destination separately (the
    causal triangle gets through), declared ACK-commuting (H holds for it)."""
    from collections import deque

    from filters.mfss import MfssManager, MfssModule
    from groupcomm.core import registry
    from groupcomm.core.causality import ProtocolViolation

    class PerPeerManager(MfssManager):
        def __init__(self, host) -> None:
            super().__init__(host)
            self.waiting: dict[str, str] = {}

        def enqueue(self, message) -> None:
            self.buffer.append(message)
            self.try_send()

        def try_send(self) -> None:
            while self.buffer and self.buffer[0].destinations[0] not in self.waiting:
                message = self.buffer.popleft()
                self.waiting[message.destinations[0]] = message.message_id
                self.send_downstream(message)

        def on_ack(self, message) -> None:
            if self.waiting.get(message.sender) != message.user_message.about:
                raise ProtocolViolation("test: unexpected ack")
            del self.waiting[message.sender]
            self.try_send()

        def snapshot(self):
            return (tuple(self.buffer), tuple(sorted(self.waiting.items())),
                    self.control_count)

        def restore(self, snapshot) -> None:
            buffer, waiting, self.control_count = snapshot
            self.buffer = deque(buffer)
            self.waiting = dict(waiting)

    class PerPeerModule(MfssModule):
        name = "test-per-peer-mfss"
        commuting_controls = frozenset({"ack"})

        def create_manager(self, host):
            return PerPeerManager(host)

    registry.available_modules()
    registry.register_module(PerPeerModule, origin="tests")
    yield PerPeerModule.name
    registry.unregister_module(PerPeerModule.name)


TRIANGLE = {"sends": {"p1": [["p3"], ["p2"]], "p2": [["p3"]], "p3": []}}


@pytest.mark.parametrize("options", [{"workload": load_workload(TRIANGLE)},
                                     {"processes": 3, "messages": 1},
                                     {"processes": 2, "messages": 2}])
@pytest.mark.parametrize("fifo", [False, True])
def test_commuting_acks_keep_verdicts_of_a_known_bad_protocol(per_peer_mfss, options,
                                                              fifo) -> None:
    """The single-ACK persistent sets on a known-bad protocol for which H holds: the same
    terminal states and the same violating transitions as the full graph, and the
    search with them finds the causal violation too."""
    from groupcomm.check.por import PersistentSets

    model = Model(CheckConfig(protocol=per_peer_mfss, fifo_network=fifo, **options))
    if not fifo:
        for state, a, x in _commuting_pairs(model, frozenset({"ack"})):
            after_x = _outcome(model, state, x)
            first = _outcome(model, model.apply(state, a)[0], x)
            assert first == (after_x if isinstance(after_x, str)
                             else model.apply(after_x, a)[0])
    full_terminals, full_violations, full_states = _explore(model)
    sets = PersistentSets(model)
    terminals, violations, states = _explore(model, sets)
    assert (sets.singletons > 0) is not fifo  # nothing is declared on FIFO links
    assert terminals == full_terminals
    assert violations == full_violations
    assert states <= full_states
    if "workload" in options and not fifo:
        assert any(prop == "causal" for _, prop in full_violations)
        result = check(CheckConfig(protocol=per_peer_mfss, fifo_network=fifo, por=True,
                                   **options))
        assert (result.result, result.property) == ("violation", "causal")
        assert result.config["por_commuting_states"] > 0


def test_the_commuting_ack_rule_is_used_and_tells_protocols_apart() -> None:
    """An ACK in flight: mfss expands that arrival alone; cykas (nothing declared)
    does not."""
    from groupcomm.check.por import PersistentSets

    for protocol, single in (("mfss", True), ("cykas", False)):
        model = Model(CheckConfig(protocol=protocol, processes=2, messages=1))
        state = model.initial_state
        state, _ = model.apply(state, ("send", "p1", ("p2",)))
        (frame,) = [f for _, _, f in state[1]]
        state, _ = model.apply(state, ("arrive", "p1", "p2", frame))
        chosen = PersistentSets(model).choose(state)
        (ack,) = [(s, d, f) for d, s, f in state[1]]
        assert (chosen == ack) is single


@pytest.mark.parametrize(("protocol", "n", "k", "options", "prop"), KNOWN_BAD)
def test_por_search_catches_known_bad_protocols(protocol, n, k, options, prop,
                                                tmp_path: Path) -> None:
    plain = run(protocol, n, k, **options)
    for extra in ({}, {"symmetry": True, "reduce": True}):
        config = CheckConfig(protocol=protocol, processes=n, messages=k, por=True,
                             **extra, **options)
        result = check(config)
        assert (result.result, result.property) == ("violation", prop), result.detail
        assert len(result.counterexample) >= len(plain.counterexample)
        texts, _ = replay(config, result.actions)  # a real run
        assert texts[:-1] == result.counterexample[:-1]
    write_counterexample(config, result, tmp_path / "cex")
    confirmed = check_directory(tmp_path / "cex")
    assert confirmed.causal_violations >= 1 or prop == "refused"


@pytest.mark.parametrize(("protocol", "n", "k"), SMALL)
@pytest.mark.parametrize("fifo", [False, True])
def test_por_search_gives_the_same_verdict(protocol: str, n: int, k: int, fifo: bool) -> None:
    plain = run(protocol, n, k, fifo_network=fifo)
    for extra in ({}, {"reduce": True, "symmetry": protocol != "vector"}):
        reduced = run(protocol, n, k, fifo_network=fifo, por=True, **extra)
        assert (reduced.result, reduced.property) == (plain.result, plain.property)
        if plain.result == "ok":
            assert reduced.terminal_states <= plain.terminal_states
            if not extra:
                assert reduced.terminal_states == plain.terminal_states
        assert reduced.states <= plain.states


PINNED_POR = [
    # protocol, processes, messages, symmetry, unique states, terminal states
    ("matrix", 3, 1, False, 210, 50),
    ("mfss", 3, 1, False, 360, 50),  # 659 before the commuting-ACK rules
    ("cykas", 3, 1, False, 659, 50),
    ("vector", 3, 1, False, 1293, 19),
    ("mfss", 2, 2, False, 178, 20),  # 385 before
]


@pytest.mark.parametrize(("protocol", "n", "k", "sym", "states", "terminal"), PINNED_POR)
def test_pinned_por_state_counts(protocol, n, k, sym, states, terminal) -> None:
    result = run(protocol, n, k, por=True, symmetry=sym)
    assert result.result == "ok", result.detail
    assert (result.states, result.terminal_states) == (states, terminal)


@pytest.mark.slow
@pytest.mark.parametrize(("protocol", "states"), [("matrix", 12_727), ("mfss", 20_260),
                                                  ("cykas", 244_929)])
def test_por_with_symmetry_at_three_by_two(protocol: str, states: int) -> None:
    result = run(protocol, 3, 2, reduce=True, symmetry=True, por=True)
    assert result.result == "ok", result.detail
    assert result.states == states
    assert result.terminal_states == 1804  # as without --por


def test_cli_por_flag(capsys) -> None:
    assert check_main(["--protocol", "matrix", "--processes", "3", "--messages", "1", "--por",
                       "--symmetry", "-q"]) == 0
    out = capsys.readouterr().out
    assert "result: ok" in out and "partial-order reduction:" in out
    assert check_main(["--protocol", "fifo", "--processes", "3", "--messages", "2", "--por",
                       "-q"]) == 1
    assert "property: causal" in capsys.readouterr().out


# -- compact frontier (--compact) -----------------------------------------------------------------
@pytest.mark.parametrize(("protocol", "n", "k", "options"), [
    ("cykas", 3, 1, {}),
    ("mfss", 2, 2, {"symmetry": True, "por": True}),
    ("matrix", 3, 1, {"symmetry": True}),
    ("cykas-secret-sends", 3, 2, {}),
    ("fifo", 3, 2, {"por": True}),
    ("cykas", 2, 2, {"fifo_network": True}),  # FIFO links: the plain frontier is kept
])
def test_compact_frontier_changes_nothing_but_memory(protocol, n, k, options) -> None:
    plain = run(protocol, n, k, reduce=True, **options)
    compact = run(protocol, n, k, reduce=True, compact=True, **options)
    assert compact.as_dict() | {"seconds": 0, "states_per_second": 0, "config": {}} == \
        plain.as_dict() | {"seconds": 0, "states_per_second": 0, "config": {}}


def test_packed_states_unpack_to_equal_states() -> None:
    model = Model(CheckConfig(protocol="cykas", processes=3, messages=2))
    for state in _random_states(model, walks=4, seed=3):
        packed = model.pack(state)
        assert isinstance(packed, bytes) and len(packed) == 4 * (6 + len(state[1]))
        assert model.unpack(packed) == state
