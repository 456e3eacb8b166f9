"""The delivery rule of vector, matrix (and matrix-delta) and ks: each module states it
once, in its manager's ``blocker``, and every use reads it — the general path, the
drain and its cache, ``waiting_for`` and the stamp plans, which only pre-decode a stamp
for it. These tests pin the rule's meaning, check that no path delivers what it holds,
and that a plan hands it what decoding the stamp would."""

from __future__ import annotations

import random
from typing import Any

import pytest

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.messages import ReceivedMessage
from groupcomm.filters import matrix as matrix_module
from groupcomm.filters import vector as vector_module
from groupcomm.filters.ks import KsManager
from groupcomm.filters.matrix import MatrixManager
from groupcomm.filters.vector import VectorManager
from groupcomm.module_kit import blocking
from groupcomm.tools.localnet import LocalNetwork

NAMES = ["a", "b", "c", "d"]


def _receiver(module: str, names: list[str] | None = None) -> Any:
    """The manager of b in a settled network (b is the member the rule speaks for)."""
    net = LocalNetwork(names or ["a", "b", "c"], module, trace=False)
    net.run()
    return net.manager("b")


# -- what each rule says -------------------------------------------------------------------
def test_vector_rule() -> None:
    b: VectorManager = _receiver("vector")
    b.clock.update({"a": 2, "c": 1})

    def rule(own: int | None, stamp: dict[str, int]) -> str | None:
        return b.blocker("a", own, range(100), stamp.items())

    # the next broadcast of a, after everything it depends on; b's own entry never holds
    assert rule(3, {"a": 3, "b": 9, "c": 1}) is None
    assert rule(4, {}) == "a"  # early
    assert rule(2, {}) == "a"  # a duplicate: never delivered again
    assert rule(3, {"a": 3, "c": 2}) == "c"  # c's second broadcast is missing
    assert rule(None, {"a": 99, "c": 1}) is None  # the sender's clause left out
    b.void.add("c")
    assert rule(3, {"c": 5}) is None  # no message of a void process reaches b
    b.void.clear()
    b.awaiting_base.add("c")  # b joined late and c's count has not come
    assert rule(3, {"c": 0}) == "c"
    b.awaiting_base = {"a"}
    assert rule(3, {}) == "a"
    # a plan's counts: the stamp's tuple, read where the plan says
    b.awaiting_base = set()
    assert b.blocker("a", 3, (0, 2, 1), [("c", 1)]) == "c"
    assert b.blocker("a", 3, (0, 2, 1), [("c", 2)]) is None


def test_matrix_rule() -> None:
    b: MatrixManager = _receiver("matrix")
    b.deliv.update({"a": 2, "c": 1})

    def rule(own: int | None, stamp: dict[str, dict[str, int]]) -> str | None:
        return b.blocker("a", own, stamp.items())

    assert rule(3, {"a": {"b": 3}, "c": {"b": 1}}) is None  # SENT_m[a][b] = DELIV[a] + 1
    assert rule(4, {}) == "a"
    assert rule(2, {}) == "a"
    assert rule(3, {"c": {"b": 2}}) == "c"  # a knew of a message from c to b not here yet
    assert rule(None, {"a": {"b": 7}, "c": {"b": 1}}) is None
    # only b's column of the stamp counts
    assert rule(3, {"a": {"b": 3, "c": 9}, "c": {"a": 4, "b": 1}, "d": {"a": 2}}) is None


def test_ks_rule() -> None:
    b: KsManager = _receiver("ks")
    b.delivered.update({"a": 2, "c": 3})
    rule = b.blocker
    to_b = frozenset({"b"})
    assert rule("a", 5, [("a", {5: to_b})]) is None  # the message's own entry
    assert rule("a", 5, [("a", {2: to_b, 5: to_b})]) is None  # a's 2nd send is here
    assert rule("a", 5, [("a", {4: to_b, 5: to_b})]) == "a"
    assert rule("a", 5, [("c", {3: to_b}), ("d", {1: to_b})]) == "d"
    assert rule("a", 5, [("d", {1: frozenset({"c"})})]) is None  # not addressed to b


def test_blocking_lists_every_holder_in_one_pass() -> None:
    b: VectorManager = _receiver("vector")
    b.clock.update({"a": 1, "c": 1})
    stamp = {"a": 5, "c": 2, "d": 0, "e": 1, "b": 7}
    itself = range(100)
    assert blocking(lambda rest: b.blocker("a", None, itself, rest),
                    stamp.items()) == ["c", "e"]
    # what waiting_for reports: the sender first when it holds, then the others sorted
    assert b._waits_on("a", stamp) == ["a", "c", "e"]  # noqa: SLF001


# -- every path reads the rule ------------------------------------------------------------
def _warmed(module: str) -> tuple[LocalNetwork, Any]:
    """b has delivered messages of a through the general path, so it has a plan for the
    next stamps of a."""
    net = LocalNetwork(["a", "b"], module, trace=False)
    net.run()
    for i in range(3):
        net.send("a", f"a{i}", ["b"])
        net.run()
    manager = net.manager("b")
    assert "a" in manager._plans  # noqa: SLF001
    return net, manager


@pytest.mark.parametrize("module", ["vector", "matrix", "matrix-delta"])
def test_a_planned_stamp_is_held_when_the_rule_holds_it(
        module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    net, manager = _warmed(module)
    delivered = len(net.delivered_ids("b"))
    rule = type(manager).blocker

    def sender_holds(self: Any, sender: str, own: int | None, *stamp: Any) -> str | None:
        return sender if own is not None else rule(self, sender, own, *stamp)

    monkeypatch.setattr(type(manager), "blocker", sender_holds)
    net.send("a", "held", ["b"])
    net.run()
    assert len(net.delivered_ids("b")) == delivered
    assert [m.user_message for m in manager.held()] == ["held"]
    assert manager.waiting_for() == {manager.held()[0].message_id: ["a"]}
    monkeypatch.undo()
    manager._drain()  # noqa: SLF001 (what the next arrival would do)
    net.nodes["b"].drain()  # the deliveries queued for the application
    assert net.delivered_payloads("b")[-1] == "held"


class _NoPlans(dict):
    """A manager's plans that never keep one: every stamp takes the general path."""

    def __setitem__(self, key: str, value: object) -> None:
        pass


def _workload(module: str, seed: int, plans: bool, fifo_links: bool,
              monkeypatch: pytest.MonkeyPatch) -> tuple:
    """Random traffic with random arrivals in between (unicasts and multicasts for the
    matrices; broadcasts for vector, with a member joining half-way): what each member
    delivered, its manager's state and counters, and how many stamps were decoded.
    After every arrival, every held message is held by the rule (the drain leaves none
    the rule would deliver)."""
    decodes = [0]
    owner = vector_module if module == "vector" else matrix_module
    decode_name = "decode_clock" if module == "vector" else "decode_matrix"
    decode = getattr(owner, decode_name)

    def counted(*args: Any) -> Any:
        decodes[0] += 1
        return decode(*args)

    monkeypatch.setattr(owner, decode_name, counted)
    rng = random.Random(seed)
    net = LocalNetwork(NAMES[:3] if module == "vector" else NAMES, module, trace=False,
                       fifo_links=fifo_links)

    def no_plans() -> None:
        for name in net.nodes:
            manager = net.manager(name)
            if not plans and not isinstance(manager._plans, _NoPlans):  # noqa: SLF001
                manager._plans = _NoPlans()  # noqa: SLF001

    no_plans()
    for i in range(300):
        if module == "vector" and i == 150:
            net.join("d")
            no_plans()
        members = list(net.nodes)
        sender = rng.choice(members)
        others = [n for n in members if n != sender]
        if module == "vector":
            dests = others
        else:  # mostly unicast between a few pairs, so shapes repeat and plans form
            dests = rng.sample(others, 1 if rng.random() < 0.8 else 2)
        net.send(sender, f"{sender}{i}", dests)
        for _ in range(rng.randrange(4)):  # few in flight: some stamps arrive in order
            candidates = net.arrivable()
            if candidates:
                net.deliver(rng.choice(candidates))
                for name in net.nodes:
                    assert all(net.manager(name).waiting_for().values())
    net.run(rng)
    return (
        {n: net.delivered_ids(n) for n in net.nodes},
        {n: net.manager(n).snapshot() for n in net.nodes},
        {n: dict(net.manager(n).stats) for n in net.nodes},
        decodes[0],
    )


@pytest.mark.parametrize("module", ["matrix", "matrix-delta", "vector"])
@pytest.mark.parametrize("fifo_links", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_a_plan_gives_the_rule_what_decoding_gives_it(
        module: str, fifo_links: bool, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        general = _workload(module, seed, False, fifo_links, patch)
    with monkeypatch.context() as patch:
        planned = _workload(module, seed, True, fifo_links, patch)
    assert planned[:3] == general[:3]
    # matrix's stamps keep their shape once every pair has talked, vector's until a
    # join; matrix-delta's deltas seldom repeat one (a plan is made only where they do),
    # and broadcasts over links that reorder are mostly held behind one another
    few = module == "matrix-delta" or (module == "vector" and not fifo_links)
    assert general[3] - planned[3] > (0 if few else 100), "too few stamps took a plan"


# -- what a plan leaves to the general path ------------------------------------------------
def _stamped(sender: str, receiver: str, number: int, stamp: object) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="session",
                           user_message=f"m{number}", message_id=f"{sender}#{number}",
                           sender=sender, receiver=receiver, headers={"M": stamp})


@pytest.mark.parametrize("counts, error", [
    ((-1,), "bad entry"),
    ((True,), "bad entry"),
    (("3",), "bad entry"),
    ((), "index triples"),  # cut short by its count: rows and columns still match
])
def test_bad_counts_in_a_planned_shape_are_refused(counts: tuple, error: str) -> None:
    net, manager = _warmed("matrix")
    before = manager.snapshot()
    stamp = (("a", "b"), (0, 1, *counts))
    with pytest.raises(ProtocolViolation, match=error):
        manager.on_receive(_stamped("a", "b", 9, stamp))
    assert manager.snapshot() == before
    assert net.delivered_ids("b") == ["a#1", "a#2", "a#3"]


def test_duplicates_and_early_stamps_in_a_planned_shape() -> None:
    net, manager = _warmed("matrix")
    stamp_of = lambda n: (("a", "b"), (0, 1, n))  # noqa: E731
    manager.on_receive(_stamped("a", "b", 3, stamp_of(3)))  # already delivered
    assert manager.stats["duplicates"] == 1
    manager.on_receive(_stamped("a", "b", 5, stamp_of(5)))  # the fourth is still on its way
    assert [m.message_id for m in manager.held()] == ["a#5"]
    assert manager.waiting_for() == {"a#5": ["a"]}
    manager.on_receive(_stamped("a", "b", 4, stamp_of(4)))
    assert manager.held() == []
    net.nodes["b"].drain()  # the deliveries queued for the application
    assert net.delivered_ids("b") == ["a#1", "a#2", "a#3", "a#4", "a#5"]
    assert manager.deliv == {"a": 5}


def test_a_stamp_naming_a_member_twice_never_makes_a_plan() -> None:
    net = LocalNetwork(["a", "b"], "matrix", trace=False)
    manager = net.manager("b")
    # decoded, SENT[a][b] is the last of the two entries for it: 1
    twice = (("a", "b"), (0, 1, 5, 0, 1, 1))
    for _ in range(2):
        manager.on_receive(_stamped("a", "b", 1, twice))
        manager.deliv.clear()
    assert manager._plans == {}  # noqa: SLF001
    vector = LocalNetwork(["a", "b"], "vector", trace=False)
    vector.run()  # b joined after a: a's base reaches it
    receiver = vector.manager("b")
    for count in (1, 2):
        receiver.on_receive(ReceivedMessage(
            application_name="app", session_name="session", user_message="x",
            message_id=f"a#{count}", sender="a", receiver="b",
            headers={"v": (("a", "a"), (7, count))}))
    assert receiver._plans == {}  # noqa: SLF001
    assert receiver.clock["a"] == 2


def test_a_vector_plan_reads_only_the_entries_the_rule_can_hold_on() -> None:
    net = LocalNetwork(["a", "b", "c"], "vector", trace=False)
    net.run()
    for sender in ("b", "c", "a", "a"):
        net.to_others(sender, f"from {sender}")
        net.run()
    plan = net.manager("b")._plans["a"]  # noqa: SLF001
    assert plan.names == ("a", "b", "c")
    # the sender's count is read apart, and b's own entry never holds a message
    assert plan.others == (("c", 2),)
