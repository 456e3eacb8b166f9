"""The reliable layer's grouped and delayed acknowledgements (docs/sessions.md, "Faults"):
one acknowledgement per peer and batch, held at most a tick, at once for a gap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.layers.reliable import (
    ACK,
    ACK_DELAY,
    ACK_EVERY,
    MIN_RTO,
    SEQ,
    ReliableManager,
    ReliableReceiveFilter,
    ReliableSendFilter,
)
from groupcomm.tools.procs import ProcessGroup


class FakeHost:
    """The FilterHost of one member, with a clock the test moves."""

    def __init__(self, name: str = "b") -> None:
        self.name = name
        self.shared: dict[str, Any] = {}
        self.clock = 0.0
        self.tickers: list[Callable[[float], None]] = []
        self.batch_listeners: list[Callable[[], None]] = []

    def add_session_listener(self, listener: Any) -> None:
        pass

    def trace(self, event: str, message: Any = None, **fields: Any) -> None:
        pass

    def now(self) -> float:
        return self.clock

    def add_ticker(self, ticker: Callable[[float], None]) -> None:
        self.tickers.append(ticker)

    def add_batch_listener(self, listener: Callable[[], None]) -> None:
        self.batch_listeners.append(listener)

    def report_undeliverable(self, message_ids: Any, why: str) -> None:
        pass

    def report_acknowledged(self, peer: str, message_ids: Any) -> None:
        pass

    def end_batch(self) -> None:
        for listener in self.batch_listeners:
            listener()

    def tick(self) -> None:
        for ticker in self.tickers:
            ticker(self.clock)


class Collect:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def process_message(self, message: Any) -> None:
        self.messages.append(message)


def layer(name: str = "b") -> tuple[FakeHost, ReliableManager, Collect, Collect]:
    """A member's layer: what it sends (``sent``) and delivers (``up``)."""
    host = FakeHost(name)
    manager = ReliableManager(host)
    manager.send_filter, manager.receive_filter = (ReliableSendFilter(manager),
                                                   ReliableReceiveFilter(manager))
    sent, up = Collect(), Collect()
    manager.send_filter.set_message_processor(sent)
    manager.receive_filter.set_message_processor(up)
    return host, manager, sent, up


def frame(seq: int, sender: str = "a", **headers: Any) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="s", user_message=seq,
                           message_id=f"{sender}#{seq}", sender=sender, receiver="b",
                           headers={SEQ: seq, **headers})


def acks(sent: Collect) -> list[tuple[str, Any]]:
    """The acknowledgements sent, one (peer, value) each: an acknowledgement frame to
    several peers carries the mapping form ((peer, value), ...)."""
    found = []
    for m in sent.messages:
        if m.is_control_for("reliable"):
            value = m.headers[ACK]
            found += (list(value) if isinstance(value[0], tuple)
                      else [(m.destinations[0], value)])
    return found


def test_a_batch_of_frames_from_one_peer_gets_one_acknowledgement() -> None:
    host, manager, sent, up = layer()
    for seq in range(1, 21):
        manager.receive_filter.filter_message(frame(seq))
    for seq in range(1, 4):
        manager.receive_filter.filter_message(frame(seq, sender="c"))
    assert acks(sent) == []  # nothing goes while the batch is read
    host.clock += ACK_DELAY / 4
    host.end_batch()
    assert acks(sent) == []  # a young batch waits a tick for more
    host.tick()
    assert [(dest, value[:2]) for dest, value in acks(sent)] == [("a", (20, ())),
                                                                  ("c", (3, ()))]
    assert [m.user_message for m in up.messages] == [*range(1, 21), 1, 2, 3]
    assert all(SEQ not in m.headers and ACK not in m.headers for m in up.messages)
    assert manager.stats["acks_sent"] == 2 and manager.stats["frames_received"] == 23
    (ack_frame,) = sent.messages  # both in one frame, to both
    assert ack_frame.destinations == ("a", "c") and manager.stats["ack_frames_sent"] == 1
    host.tick()
    assert manager.stats["acks_sent"] == 2  # nothing owed, nothing sent


def test_a_gap_is_acknowledged_at_the_end_of_its_batch_with_its_selective_part() -> None:
    host, manager, sent, up = layer()
    for seq in (1, 2, 4, 5):  # 3 lost
        manager.receive_filter.filter_message(frame(seq))
    host.end_batch()  # not a tick: the sender may be waiting to resend
    assert acks(sent) == [("a", (2, (4, 5), 0))]
    manager.receive_filter.filter_message(frame(3))  # fills the gap: at once too
    host.end_batch()
    assert acks(sent)[-1] == ("a", (5, (), 0))
    manager.receive_filter.filter_message(frame(2))  # a duplicate: our ack was lost
    host.end_batch()
    assert acks(sent)[-1] == ("a", (5, (), 0))
    assert [m.user_message for m in up.messages] == [1, 2, 3, 4, 5]
    assert manager.stats["duplicates_dropped"] == 1


def test_a_lone_frame_is_acknowledged_within_the_delay_and_says_how_long_it_waited() -> None:
    host, manager, sent, _ = layer()
    manager.receive_filter.filter_message(frame(1))
    host.end_batch()
    assert acks(sent) == []
    host.clock += ACK_DELAY  # another batch, later: the ack is as old as it may get
    host.end_batch()
    assert acks(sent) == [("a", (1, (), round(ACK_DELAY * 1e6)))]


def test_many_frames_in_one_batch_are_acknowledged_every_ack_every_frames() -> None:
    host, manager, sent, _ = layer()
    for seq in range(1, 3 * ACK_EVERY + 2):
        manager.receive_filter.filter_message(frame(seq))
    assert [value[0] for _, value in acks(sent)] == [ACK_EVERY, 2 * ACK_EVERY, 3 * ACK_EVERY]
    host.tick()
    assert acks(sent)[-1][1][0] == 3 * ACK_EVERY + 1


def test_an_owed_acknowledgement_rides_on_a_frame_to_that_peer() -> None:
    host, manager, sent, up = layer()
    manager.receive_filter.filter_message(frame(1))
    manager.receive_filter.filter_message(frame(2))
    host.clock += 0.005
    manager.send_filter.filter_message(SentMessage(
        application_name="app", session_name="s", user_message="reply", message_id="b#1",
        sender="b", destinations=("a",)))
    (reply,) = sent.messages
    assert reply.headers[SEQ] == 1 and reply.headers[ACK] == (2, (), 5000)
    host.tick()
    assert manager.stats["acks_sent"] == 0 and manager.stats["acks_piggybacked"] == 1
    # the copy kept for retransmission carries no acknowledgement: a resent one would
    # say something stale
    assert ACK not in manager.in_flight["a"][1].message.headers


def test_the_hold_is_not_taken_for_network_time() -> None:
    """The sender takes the hold its peer reports out of the round trip, so the timeout
    stays that of the network (plus the delay allowed), not of the network plus holds."""
    a_host, a, a_sent, _ = layer("a")
    b_host, b, b_sent, b_up = layer("b")
    for i in range(50):
        a.send_filter.filter_message(SentMessage(
            application_name="app", session_name="s", user_message=i, message_id=f"a#{i}",
            sender="a", destinations=("b",)))
        a_host.clock += 0.001  # a millisecond there
        b_host.clock = a_host.clock
        b.receive_filter.filter_message(a_sent.messages[-1].received_by("b"))
        b_host.clock += ACK_DELAY  # held as long as may be
        b_host.end_batch()
        a_host.clock = b_host.clock + 0.001  # and a millisecond back
        a.receive_filter.filter_message(b_sent.messages[-1].received_by("a"))
    assert len(b_up.messages) == 50 and not a.held()
    assert a.srtt["b"] == pytest.approx(0.002, abs=1e-4)
    assert a.rto("b") == pytest.approx(MIN_RTO + ACK_DELAY)


def test_a_malformed_hold_is_refused() -> None:
    from groupcomm.core.causality import ProtocolViolation

    _, manager, _, _ = layer()
    with pytest.raises(ProtocolViolation, match="malformed acknowledgement"):
        manager.receive_filter.filter_message(frame(1, **{ACK: (0, (), -5)}))


def test_acknowledgements_of_a_burst_between_processes_are_grouped(group: ProcessGroup) -> None:
    """Two real members over ZeroMQ with the layer: a burst of 2,000 messages reaches
    bob once each, in order, with far fewer acknowledgement frames than frames."""
    alice = group.start_peer("alice", filters=["reliable"], direct=True)
    bob = group.start_peer("bob", filters=["reliable"], direct=True)
    group.wait_members(["alice", "bob"])
    count = 2000
    alice.command(op="burst", count=count, seed=1, broadcast_only=True)
    alice.wait_for(lambda e: e.get("event") == "burst_done", timeout=60)
    delivered = bob.wait_count("deliver", count, timeout=60)
    assert [e["payload"]["seq"] for e in delivered if e.get("sender") == "alice"] == list(
        range(count))
    alice.command(op="held")
    alice.wait_for(lambda e: e.get("event") == "held" and e["ids"] == [], timeout=10)
    bob.command(op="counters")
    counters = bob.wait_for(lambda e: e.get("event") == "counters")["counters"]
    received, sent = counters["reliable_frames_received"], counters["reliable_acks_sent"]
    assert received >= count
    # per frame this was one acknowledgement each; grouped, one covers many
    assert 0 < sent <= received / 4, counters


@pytest.mark.long  # real processes and seconds of work: CI runs it
def test_bench_over_the_reliable_layer_reports_frames_per_acknowledgement() -> None:
    """``groupcomm bench --reliable``: a burst between two processes, and the receiver's
    layer acknowledging it in groups."""
    import json
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "bench", "--reliable", "--messages", "3000",
         "--repeat", "1", "--round-trip", "no", "--json"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["reliable"] is True and figures["communicator_msgs_per_s"] > 0
    (layer,) = figures["receiver_reliable_runs"]
    assert layer["reliable_frames_received"] >= 3000
    assert 0 < layer["reliable_acks_sent"] <= layer["reliable_frames_received"] / 4
    assert figures["frames_per_ack"][0] >= 4
