"""A payload too large for a frame never wedges a pair of members: a str or bytes
payload is refused at the call (MessageTooLarge, nothing sent); any other payload that
turns out too large when packed travels as a stand-in (Withdrawn) that keeps the causal
order at the receivers, is reported undeliverable at the sender and counted, not shown,
at the receiver."""

from __future__ import annotations

import threading
import time

import pytest

from groupcomm import Communicator, MessageTooLarge
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.config import Connection, Listeners


def _pair(group: ProcessGroup, module: str, **connection):
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality=module, connection=Connection(**connection))
    got: list[object] = []
    arrived = threading.Event()

    def record(message) -> None:
        got.append(message.user_message)
        arrived.set()

    alice = Communicator("alice", "s", **common)
    bob = Communicator("bob", "s", **common, listeners=Listeners(message=record))
    deadline = time.monotonic() + 10
    while "bob" not in alice.members and time.monotonic() < deadline:
        time.sleep(0.01)
    return alice, bob, got, arrived


@pytest.mark.parametrize("module", ["matrix", "mfss"])
def test_a_str_too_large_for_a_frame_is_refused_at_the_call(group: ProcessGroup,
                                                             module: str) -> None:
    alice, bob, got, arrived = _pair(group, module)
    try:
        started = time.monotonic()
        with pytest.raises(MessageTooLarge, match=r"a payload of 20,000,000 bytes does not "
                                                  r"fit in a frame .*nothing was sent"):
            alice.to_user("bob", "x" * 20_000_000)
        with pytest.raises(MessageTooLarge):
            alice.send(["bob"], b"y" * 17_000_000)
        assert time.monotonic() - started < 5
        alice.to_user("bob", "after")
        assert arrived.wait(10) and got == ["after"]
        assert alice.undeliverable() == [] and bob.held() == []
    finally:
        alice.close()
        bob.close()


@pytest.mark.parametrize("module", ["matrix", "mfss"])
def test_a_payload_too_large_once_packed_travels_as_a_stand_in(group: ProcessGroup,
                                                               module: str) -> None:
    alice, bob, got, arrived = _pair(group, module, max_frame=1 << 20)
    try:
        big = alice.to_user("bob", {"blob": b"x" * 2_000_000})  # a dict: measured when packed
        alice.to_user("bob", "after")
        assert arrived.wait(10), bob.counters()
        assert got == ["after"]  # not held behind the message that could not travel
        deadline = time.monotonic() + 10
        while not bob.counters().get("withdrawn") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bob.counters()["withdrawn"] == 1
        assert alice.undeliverable() == [big.message_id]
        assert alice.counters()["unencodable"] == 1
        assert bob.held() == [] and alice.held() == []
    finally:
        alice.close()
        bob.close()


def test_a_small_max_frame_still_carries_what_fits(group: ProcessGroup) -> None:
    alice, bob, got, arrived = _pair(group, "matrix", max_frame=64 * 1024)
    try:
        alice.to_user("bob", "x" * 1000)
        assert arrived.wait(10) and got == ["x" * 1000]
        with pytest.raises(MessageTooLarge, match="max_frame=65,536"):
            alice.to_user("bob", "y" * 100_000)
    finally:
        alice.close()
        bob.close()
