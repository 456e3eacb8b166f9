"""Symmetry reduction: renaming commutes with the real steps, one state per class,
pinned counts, refusal where a module does not declare how to rename."""

from __future__ import annotations

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
from tests.check.helpers import KNOWN_BAD, SMALL, random_states, run, successors
from trace_analysis.reference import check_directory


# -- symmetry reduction -----------------------------------------------------------------------
def _normal_action(symmetry, action: tuple, perm: tuple | None) -> tuple:
    """An action renamed by ``perm`` (identity if None) with its frame normalised."""
    from groupcomm.check.renaming import Renaming

    names = symmetry.model.names
    perm = perm or tuple(range(symmetry.n))
    mapping = {names[i]: names[perm[i]] for i in range(symmetry.n)}
    renaming = Renaming(mapping, symmetry.order, True, symmetry.headers)
    if action[0] == "send":
        return ("send", renaming.name(action[1]), renaming.names(action[2]))
    return ("arrive", renaming.name(action[1]), renaming.name(action[2]),
            renaming.frame(action[3]))


def _normal_form(symmetry, state: tuple, perm: tuple | None) -> tuple:
    """``state`` renamed by ``perm`` (identity if None) and normalised (no minimum):
    what ``Symmetry.key`` minimises over."""
    index = symmetry._install(perm or tuple(range(symmetry.n)))
    try:
        return symmetry._candidate(index, state)
    finally:
        symmetry._uninstall()


def _rename_state(symmetry, state: tuple, perm: tuple, *,
                  renumber_controls: bool = False) -> tuple:
    """``state`` with process ``i`` renamed ``perm[i]``, as a real state of the same
    model (its snapshots interned, its frames re-encoded); with ``renumber_controls``
    every control id ``name~kindk`` also becomes ``name~kind(c-k)`` and the manager's
    counter ``c`` (``c`` = old counter + 10), which reverses the numbering and keeps new
    ids fresh."""
    from groupcomm.check.renaming import Renaming

    model = symmetry.model
    names = model.names
    n = symmetry.n
    snaps, network, truth = state
    relabel = None
    if renumber_controls:
        relabel = {}
        for i, name in enumerate(names):
            model.nodes[i].restore(model.snapshots[i][snaps[i]])
            counts = [m.control_count for m in model.nodes[i]._shared.values()
                      if hasattr(m, "control_count")]
            relabel[name] = (max(counts, default=0) + 10, 0)
    mapping = {names[i]: names[perm[i]] for i in range(n)}
    renaming = Renaming(mapping, symmetry.order, False, symmetry.headers, relabel)
    new_snaps = [0] * n
    new_truth: list[tuple] = [()] * n
    for i in range(n):
        snap = symmetry._snapshot(renaming, i, model.snapshots[i][snaps[i]],
                                  zero_controls=False)
        new_snaps[perm[i]] = model.intern(perm[i], snap)
        new_truth[perm[i]] = symmetry._rename_truth(perm, renaming, truth[i])
    frames = []
    if not model.config.fifo_network:
        for d, s, f in network:
            frames.append((renaming.name(s), renaming.name(d), renaming.frame(f)))
    else:
        for (s, d), queue in network:
            for f in queue:
                frames.append((renaming.name(s), renaming.name(d), renaming.frame(f)))
    return (tuple(new_snaps), model.add_frames((), frames), tuple(new_truth))


def _outcomes(model: Model, symmetry, state: tuple, perm: tuple | None) -> object:
    """Every enabled action of ``state`` renamed by ``perm`` with what it leads to: the
    normalised successor renamed by ``perm``, or the property it violates."""
    from collections import Counter

    from groupcomm.check.state import Violation

    out: Counter = Counter()
    for action in model.enabled(state):
        try:
            nxt, _ = model.apply(state, action)
            outcome = ("ok", _normal_form(symmetry, nxt, perm))
        except Violation as violation:
            outcome = ("violation", violation.prop)
        out[(_normal_action(symmetry, action, perm), outcome)] += 1
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
    ("matrix-delta", 3, 2, {}),
    ("matrix-delta", 3, 2, {"destinations": "broadcast"}),
    ("ks", 3, 2, {}),
    ("ks", 3, 2, {"destinations": "broadcast"}),
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
    states = random_states(model, walks=6, seed=len(protocol) + n + k)
    assert len(states) > 30
    for state in states:
        perm = rng.choice(perms)
        renamed = _rename_state(symmetry, state, perm, renumber_controls=True)
        assert _outcomes(model, symmetry, state, perm) == _outcomes(model, symmetry, renamed,
                                                                    None)
        if symmetry.size > 1:
            assert symmetry.key(renamed) == symmetry.key(state)


def test_a_wrong_renaming_is_caught_by_the_real_objects(monkeypatch) -> None:
    # the oracle is not vacuous: forgetting to rename the id an ACK is about makes the
    # real sender reject the ACK, so the renamed state behaves differently
    from groupcomm.check.renaming import Renaming
    from groupcomm.check.symmetry import Symmetry
    from groupcomm.core.messages import ControlMessage

    model = Model(CheckConfig(protocol="mfss", processes=3, messages=1))
    symmetry = Symmetry(model)
    state = model.initial_state
    state, _ = model.apply(state, ("send", "p1", ("p2",)))
    ((d, s, f),) = state[1]
    state, _ = model.apply(state, ("arrive", s, d, f))  # p2 delivers and ACKs
    perm = (1, 0, 2)
    expected = _outcomes(model, symmetry, state, perm)
    assert _outcomes(model, symmetry, _rename_state(symmetry, state, perm), None) == expected
    real = Renaming.message

    def forgetful(self, message):
        out = real(self, message)
        if isinstance(out.user_message, ControlMessage):
            out = out.replace(user_message=message.user_message)  # "about" not renamed
        return out

    monkeypatch.setattr(Renaming, "message", forgetful)
    bad = _rename_state(symmetry, state, perm)
    monkeypatch.undo()
    outcomes = _outcomes(model, symmetry, bad, None)
    assert outcomes != expected
    assert any(outcome == ("violation", "exception") for (_, outcome) in outcomes)


SYMMETRIC = [*SMALL, ("mfss", 3, 1), ("cykas", 3, 1), ("matrix", 2, 2), ("last-sender", 3, 1),
             ("cykas", 3, 1), ("mfss", 2, 2), ("ks", 3, 1), ("ks", 2, 2), ("matrix-delta", 3, 1),
             ("matrix-delta", 2, 2)]


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
        for _, nxt, _ in successors(model, state):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return list(seen)


@pytest.mark.parametrize(("protocol", "n", "k", "fifo"), [
    ("cykas", 3, 1, False), ("mfss", 3, 1, False), ("matrix", 3, 1, False),
    ("ks", 3, 1, False), ("matrix-delta", 3, 1, False), ("matrix-delta", 2, 2, True),
    # 139,316 states in 23,241 classes
    pytest.param("matrix-delta", 3, 2, False, marks=pytest.mark.long),
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
    ("matrix-delta", 3, 1, False, 51, 6),
    ("matrix-delta", 2, 2, True, 71, 2),
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
    # a subclass that does not declare the renaming again is not covered by its base's
    with pytest.raises(ConfigError, match="--symmetry supports"):
        check(CheckConfig(protocol="vector-forgets-joins", processes=2, messages=1,
                          symmetry=True))
    assert check_main(["--protocol", "vector-forgets-joins", "--symmetry", "-q"]) == 2
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
