"""The reliable layer: exactly once, in per-pair order, through drops and duplicates."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcomm.core.headers import RESENT
from groupcomm.core.selection import filter_creators
from groupcomm.layers.reliable import BURST, DEPARTED_KEPT, MAX_RTO
from groupcomm.tools.localnet import LocalNetwork

NAMES = ["a", "b", "c"]


def lossy_network(module: str, drop: float, dup: float, seed: int) -> LocalNetwork:
    send, receive = filter_creators(
        ["reliable", f"drop:p={drop},seed={seed}", f"duplicate:p={dup},seed={seed + 1}"]
    )
    net = LocalNetwork(NAMES, module, extra_send=send, extra_receive=receive)
    net.now = 0.0  # type: ignore[attr-defined]
    for node in net.nodes.values():
        node.clock = lambda net=net: net.now  # type: ignore[attr-defined]
    return net


def settle_with_retransmissions(net: LocalNetwork, rng: random.Random, rounds: int = 500) -> None:
    """Deliver everything in random order; advance time so retransmissions fire."""
    for _ in range(rounds):
        net.run(rng)
        if all(not n.shared["reliable"].held() for n in net.nodes.values()):
            return
        net.now += MAX_RTO  # type: ignore[attr-defined]
        for node in net.nodes.values():
            node.tick()
    raise AssertionError("the reliable layer did not settle")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), drop=st.sampled_from([0.0, 0.2, 0.5]),
       dup=st.sampled_from([0.0, 0.3]), count=st.integers(1, 40))
def test_exactly_once_and_fifo_per_pair_despite_faults(seed, drop, dup, count) -> None:
    rng = random.Random(seed)
    net = lossy_network("none", drop, dup, seed)
    expected: Counter[str] = Counter()
    order: dict[tuple[str, str], list[str]] = {}
    for _ in range(count):
        sender = rng.choice(NAMES)
        dests = rng.sample([n for n in NAMES if n != sender], rng.randint(1, 2))
        message = net.send(sender, "x", dests)
        for dest in dests:
            expected[dest] += 1
            order.setdefault((sender, dest), []).append(message.message_id)
        while net.in_flight and rng.random() < 0.6:  # interleave arrivals with sends
            net.deliver(rng.randrange(len(net.in_flight)))
    settle_with_retransmissions(net, rng)
    for name in NAMES:
        ids = net.delivered_ids(name)
        assert len(ids) == len(set(ids)) == expected[name]
        for (sender, dest), sent_ids in order.items():
            if dest == name:
                assert [i for i in ids if i.startswith(f"{sender}#")] == sent_ids


def test_retransmissions_and_duplicates_are_counted() -> None:
    rng = random.Random(1)
    net = lossy_network("none", 0.4, 0.4, 7)
    for i in range(50):
        net.send("a", i, ["b", "c"])
    settle_with_retransmissions(net, rng)
    stats = net.nodes["a"].shared["reliable"].stats
    assert stats["retransmissions"] > 0
    assert sum(n.shared["reliable"].stats["duplicates_dropped"] for n in net.nodes.values()) > 0
    assert net.delivered_payloads("b") == list(range(50))


def test_a_departed_peer_is_forgotten() -> None:
    net = lossy_network("none", 1.0, 0.0, 3)  # everything is lost
    net.send("a", "lost", ["b"])
    assert net.nodes["a"].shared["reliable"].held()
    net.leave("b")
    assert not net.nodes["a"].shared["reliable"].held()


def test_a_frame_addressed_before_the_departure_is_not_retransmitted_for_ever() -> None:
    net = lossy_network("none", 0.0, 0.0, 3)
    net.members["a"].protocol.port.send("to b, too late", ["b", "c"])
    net.leave("b")  # processed before the message reaches the layer
    net.members["a"].protocol.take_inputs()  # its owner takes it now
    settle_with_retransmissions(net, random.Random(0))  # raises if b's copy stays held
    reliable = net.nodes["a"].shared["reliable"]
    assert reliable.stats["to_departed"] == 1 and "b" not in reliable.in_flight
    assert net.delivered_payloads("c") == ["to b, too late"]


def test_the_departed_names_kept_are_bounded_and_the_newest() -> None:
    net = lossy_network("none", 0.0, 0.0, 2)
    reliable = net.nodes["a"].shared["reliable"]
    assert reliable.stats["to_departed"] == 0
    assert reliable.stats["unacknowledged_at_departure"] == 0
    for i in range(DEPARTED_KEPT + 10):
        reliable.client_left(f"gone{i}", "app")
    assert len(reliable.departed) == DEPARTED_KEPT
    assert "gone9" not in reliable.departed and "gone10" in reliable.departed
    assert f"gone{DEPARTED_KEPT + 9}" in reliable.departed


def test_loopback_copies_bypass_the_layer() -> None:
    net = lossy_network("none", 0.0, 0.0, 1)
    net.send("a", "me too", ["a", "b"])
    settle_with_retransmissions(net, random.Random(0))
    assert net.delivered_payloads("a") == ["me too"]
    assert net.delivered_payloads("b") == ["me too"]


def test_a_peer_sending_without_the_layer_is_let_go_and_sent_to_unnumbered() -> None:
    """A member that runs without the layer never acknowledges and keeps every copy it
    gets: once a frame without a sequence number comes from it, nothing is held for it
    and nothing more to it is numbered."""
    net = lossy_network("none", 0.0, 0.0, 1)
    a = net.nodes["a"].shared["reliable"]
    net.send("a", "first", ["b"])
    assert a.held()
    a.peer_without_layer("b")
    assert not a.held() and a.stats["peers_without_layer"] == 1
    net.send("a", "second", ["b"])
    assert "~r" not in net.in_flight[-1].message.headers
    net.now += MAX_RTO * 4  # type: ignore[attr-defined]
    net.nodes["a"].tick()
    assert a.stats["retransmissions"] == 0
    a.peer_without_layer("a")  # its own looped-back copies say nothing
    assert "a" not in a.without_layer


def test_a_peer_that_does_not_answer_gets_a_paced_burst_not_every_frame_each_timeout() -> None:
    """2,000 frames to a peer that answers nothing for a minute: each timeout sends at
    most BURST of them again and the peer's timeout doubles, so the retransmissions stay
    within a few bursts per MAX_RTO rather than 2,000 each timeout; once the peer answers,
    the rest follow clocked by its acknowledgements and everything arrives once, in
    order, with the resent copies' mark removed."""
    net = lossy_network("none", 0.0, 0.0, 1)
    a = net.nodes["a"].shared["reliable"]
    for i in range(2000):
        net.send("a", i, ["b"])
    lost = len(net.in_flight)
    net.in_flight.clear()  # the first copies die (inside a server that was killed)
    for _ in range(6000):  # a minute of ticks every 10 ms
        net.now += 0.01  # type: ignore[attr-defined]
        net.nodes["a"].tick()
    resent = a.stats["retransmissions"]
    assert lost == 2000
    assert BURST <= resent <= BURST * (60 / MAX_RTO + 8), resent
    assert all(RESENT in f.message.headers for f in net.in_flight)
    rng, timeouts = random.Random(0), 0
    while a.held():  # the peer answers again: deliver all, then one timeout
        net.run(rng)
        net.now += MAX_RTO  # type: ignore[attr-defined]
        net.nodes["a"].tick()
        timeouts += 1
    assert net.delivered_payloads("b") == list(range(2000))
    assert not any(RESENT in m.headers for m in net.deliveries["b"])
    # the rest followed the acknowledgements: not one timeout per burst (2,000 / BURST)
    assert timeouts <= 3, timeouts
