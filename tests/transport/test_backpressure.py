"""Bounded queues: a full inbox pauses reading and loses nothing; a full send queue
makes the sender wait, then fail clearly."""

from __future__ import annotations

import time

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator, SendQueueFull
from groupcomm.transport.config import Limits


def test_full_inbox_pauses_reading_and_loses_nothing(group: ProcessGroup) -> None:
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file), routing="direct")
    with Communicator("reader", "s", **common, limits=Limits(max_inbox=5)) as reader, \
            Communicator("writer", "s", **common) as writer:
        deadline = time.monotonic() + 10
        while "reader" not in writer.members:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for i in range(200):
            writer.to_user("reader", i)
        deadline = time.monotonic() + 10
        while reader.counters().get("inbox_full_pauses", 0) == 0:
            assert time.monotonic() < deadline, reader.counters()
            time.sleep(0.01)
        got = [reader.receive(timeout=10) for _ in range(200)]
        assert [m.user_message for m in got if m is not None] == list(range(200))


def test_send_queue_full_makes_the_sender_wait_then_fail(group: ProcessGroup) -> None:
    assert group.server is not None
    with Communicator(
        "alice", "s", server=group.server.address, key_file=str(group.key_file),
        limits=Limits(max_pending=3, send_timeout=0.3)) as alice:
        stall = __import__("threading").Event()
        alice._loop.call_soon(lambda: stall.wait(5))  # noqa: SLF001 - hold the I/O thread
        with pytest.raises(SendQueueFull, match="max_pending=3"):
            for i in range(10):
                alice.to_user("alice", i)
        stall.set()
