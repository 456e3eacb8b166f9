"""Acknowledged delivery: a message handed to the application (a listener called,
receive() returning it) is applied only when the application acknowledges it. Until
then later sends are not tagged after it and snapshots do not reflect it. Real
communicators over ZeroMQ, one server process."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from groupcomm.core.messages import ReceivedMessage, Tag
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator, CommunicatorError
from groupcomm.transport.config import Delivery, Listeners, StateTransfer
from tests.helpers import wait_until


@pytest.fixture
def common(group: ProcessGroup) -> dict[str, Any]:
    assert group.server is not None
    return dict(server=group.server.address, key_file=str(group.key_file))


class Handed:
    """A message listener keeping what it was handed (on the I/O thread)."""

    def __init__(self) -> None:
        self.messages: list[ReceivedMessage] = []
        self.lock = threading.Lock()

    def __call__(self, message: ReceivedMessage) -> None:
        with self.lock:
            self.messages.append(message)

    def payloads(self) -> list[Any]:
        with self.lock:
            return [m.user_message for m in self.messages]


@pytest.fixture
def alice(common: dict[str, Any]) -> Iterator[Communicator]:
    with Communicator("alice", "s", **common) as comm:
        yield comm


def test_a_send_racing_an_unacknowledged_delivery_is_concurrent_with_it(
    common: dict[str, Any], alice: Communicator,
) -> None:
    handed = Handed()
    with Communicator(
        "bob", "s", **common, delivery=Delivery(acknowledged=True),
        listeners=Listeners(message=handed)) as bob:
        wait_until(lambda: "bob" in alice.members, what="bob in alice's view")
        m1 = alice.to_user("bob", "m1")
        m2 = alice.to_user("bob", "m2")
        m3 = alice.to_user("bob", "m3")
        wait_until(lambda: handed.payloads() == ["m1", "m2", "m3"], what="three handed")
        assert bob.handed_over == 3
        # handed over, not applied: the clock has not moved, the send races them
        assert bob.application_clock.get("alice", 0) == 0
        r0 = bob.to_user("alice", "r0")
        for sent in (m1, m2, m3):
            assert Tag(sent.vc).concurrent_with(Tag(r0.vc))
        bob.acknowledge(2)
        bob.acknowledge(1)  # cumulative: an older count changes nothing
        r1 = bob.to_user("alice", "r1")
        assert Tag(m1.vc).happened_before(Tag(r1.vc))
        assert Tag(m2.vc).happened_before(Tag(r1.vc))
        assert Tag(m3.vc).concurrent_with(Tag(r1.vc))
        assert dict(r1.vc) == {"alice": 2, "bob": 4}  # two deliveries, two sends
        with pytest.raises(ValueError, match="only 3 were handed"):
            bob.acknowledge(4)
        with pytest.raises(ValueError, match="an int >= 0"):
            bob.acknowledge(-1)
        bob.acknowledge(3)
        r2 = bob.to_user("alice", "r2")
        assert Tag(m3.vc).happened_before(Tag(r2.vc))
        # the receiver sees the same order: r0 concurrent with alice's messages
        got = [alice.receive(timeout=10) for _ in range(3)]
        assert [m.user_message for m in got if m is not None] == ["r0", "r1", "r2"]
        assert got[0] is not None and got[0].tag.concurrent_with(Tag(m1.vc))
        assert got[1] is not None and Tag(m2.vc).happened_before(got[1].tag)


def test_pull_model_receive_hands_over_and_acknowledge_applies(
    common: dict[str, Any], alice: Communicator,
) -> None:
    with Communicator("bob", "s", **common, delivery=Delivery(acknowledged=True)) as bob:
        wait_until(lambda: "bob" in alice.members, what="bob in alice's view")
        m1 = alice.to_user("bob", "m1")
        got = bob.receive(timeout=10)
        assert got is not None and got.user_message == "m1"
        assert bob.handed_over == 1
        r0 = bob.to_user("alice", "r0")
        assert Tag(m1.vc).concurrent_with(Tag(r0.vc))
        bob.acknowledge(1)
        r1 = bob.to_user("alice", "r1")
        assert Tag(m1.vc).happened_before(Tag(r1.vc))


def test_acknowledge_needs_the_option(alice: Communicator) -> None:
    with pytest.raises(CommunicatorError, match="acknowledged_delivery=True"):
        alice.acknowledge(0)


def test_a_snapshot_waits_until_everything_handed_is_acknowledged(
    common: dict[str, Any], alice: Communicator,
) -> None:
    """A message handed before the newcomer's join but not yet applied would be in
    neither the snapshot nor the newcomer's deliveries (it was not addressed to the
    newcomer): the answer waits for the application to acknowledge it."""
    handed = Handed()
    with Communicator(
        "bob", "s", **common, delivery=Delivery(acknowledged=True),
        listeners=Listeners(message=handed),
        state=StateTransfer(provider=lambda: handed.payloads())) as bob:
        wait_until(lambda: "bob" in alice.members, what="bob in alice's view")
        alice.to_user("bob", "m1")
        alice.to_user("bob", "m2")
        wait_until(lambda: handed.payloads() == ["m1", "m2"], what="two handed")
        bob.acknowledge(1)
        installed: list[Any] = []
        with Communicator(
            "carol", "s", **common, state=StateTransfer(consumer=installed.append)) as carol:
            wait_until(lambda: bob.counters().get("state_answers_deferred") == 1,
                       what="bob's answer deferred")
            assert not carol.wait_for_state(0.2) and installed == []
            bob.acknowledge(2)
            assert carol.wait_for_state(10)
            assert carol.counters().get("state_installed") == 1
            # the snapshot carries bob's application clock: both messages are in it
            assert carol.application_clock.get("alice") == 2
        assert installed == [["m1", "m2"]]  # the application's own state, as provided
        assert bob.counters()["state_given"] == 1


@pytest.mark.parametrize("routing", ["relayed", "direct"])
def test_frame_counters_count_message_frames_and_their_bytes(
    common: dict[str, Any], routing: str,
) -> None:
    common = {**common, "routing": routing}
    with Communicator("alice", "s", **common) as alice, \
            Communicator("bob", "s", **common) as bob:
        wait_until(lambda: "bob" in alice.members, what="bob in alice's view")
        assert alice.counters()["frames_sent"] == 0
        assert alice.counters()["frame_bytes_sent"] == 0
        alice.to_user("bob", os.urandom(1000))  # random: compression cannot shrink it
        assert bob.receive(timeout=10) is not None
        counters = alice.counters()
        assert counters["frames_sent"] == 1
        assert 1000 < counters["frame_bytes_sent"] < 2000
        alice.to_user("bob", "x" * 1000)
        assert bob.receive(timeout=10) is not None
        grew = alice.counters()["frame_bytes_sent"] - counters["frame_bytes_sent"]
        if routing == "relayed":  # a small frame travels compressed, through the server
            assert grew < 300
        else:  # peer to peer, the shortest path: as it is
            assert grew > 1000
