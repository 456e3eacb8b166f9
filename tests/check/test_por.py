"""Partial-order reduction (--por): persistent sets keep verdicts and terminal states,
the declared-commuting control arrivals (hypothesis H) hold where declared and are
caught where wrongly declared."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.check import (
    CheckConfig,
    Model,
    check,
    load_workload,
    replay,
    write_counterexample,
)
from groupcomm.cli.check import main as check_main
from tests.check.helpers import KNOWN_BAD, SMALL, run
from trace_analysis.reference import check_directory


# -- partial-order reduction (--por) -------------------------------------------------------------
def _explore(model: Model, reduce_with=None) -> tuple[set, set, int]:
    """Every state reachable in the full graph (or, with ``reduce_with`` - a
    :class:`PersistentSets` - in the reduced one), continuing past violations: the
    terminal states, the violating transitions with their properties, and the number of
    states."""
    from groupcomm.check.state import Violation

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
    from groupcomm.check.state import Violation
    from groupcomm.core.messages import ControlMessage
    from groupcomm.wire.envelopes import decode_received

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
    from groupcomm.check.state import Violation

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
    from groupcomm.check import por
    from groupcomm.filters.cykas import CykasModule

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

    from groupcomm.core import registry
    from groupcomm.core.causality import ProtocolViolation
    from groupcomm.filters.mfss import MfssManager, MfssModule

    class PerPeerManager(MfssManager):
        def __init__(self, host) -> None:
            super().__init__(host)
            self.waiting: dict[str, str] = {}

        def on_send(self, message) -> None:
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
