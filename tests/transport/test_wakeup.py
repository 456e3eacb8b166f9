"""The I/O thread's wake-up signal never leaves work queued with nobody woken.

Regression: ``clear()`` used to lower the flag before emptying the pipe, so a wake-up
landing in between was swallowed and the flag stayed up with an empty pipe; every
later sender skipped its write and the I/O thread slept until its next heartbeat
(``groupcomm bench``: 100,000 sends took 0.5 s in some runs, 2.8 s in others).
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections import deque

import pytest

from groupcomm.transport import wakeup
from groupcomm.transport.wakeup import WakeSignal


def _readable(signal: WakeSignal) -> bool:
    return bool(select.select([signal.fileno], [], [], 0)[0])


def test_wake_is_written_once_and_clear_consumes_it() -> None:
    signal = WakeSignal()
    try:
        assert not signal.pending and not _readable(signal)
        for _ in range(1000):
            signal.wake()
        assert signal.pending and _readable(signal)
        assert len(os.read(signal.fileno, 4096)) == 1  # one byte for the whole burst
        signal.wake()  # still pending: no new byte
        assert not _readable(signal)
        signal.clear()
        assert not signal.pending
        signal.wake()
        assert _readable(signal)
        signal.clear()
        assert not signal.pending and not _readable(signal)
    finally:
        signal.close()
    signal.close()  # idempotent


@pytest.mark.parametrize("racing_read", [0, 1])
def test_a_wake_racing_clear_is_never_lost(monkeypatch: pytest.MonkeyPatch,
                                           racing_read: int) -> None:
    """A sender's wake() lands while the I/O thread is inside clear() (during the
    read that finds the byte, or the one that finds the pipe empty). Afterwards the
    flag being up must mean a byte is waiting, or the next poll would sleep with
    work queued and every later sender would skip its write."""
    signal = WakeSignal()
    real_read = os.read
    reads = 0

    def read_with_race(fd: int, n: int) -> bytes:
        nonlocal reads
        if reads == racing_read:
            signal.wake()  # the other thread, between two steps of clear()
        reads += 1
        return real_read(fd, n)

    try:
        signal.wake()
        monkeypatch.setattr(wakeup.os, "read", read_with_race)
        signal.clear()
        monkeypatch.undo()
        assert reads >= racing_read + 1
        assert not signal.pending or _readable(signal), "flag up, pipe empty: wake-up lost"
        # and the next sender is heard either way
        signal.wake()
        assert _readable(signal)
    finally:
        monkeypatch.undo()
        signal.close()


def test_threaded_producer_never_leaves_the_poller_asleep() -> None:
    """A producer thread queues items and wakes; the consumer polls with *no* timeout,
    clears, then drains. A lost wake-up leaves it asleep forever with items queued.
    (With the old order of clear() this hung in 5 trials of 5.)"""
    items = 50_000
    signal = WakeSignal()
    queued: deque[int] = deque()
    taken: list[int] = []
    consumer_done = threading.Event()

    def consume() -> None:
        while len(taken) < items:
            select.select([signal.fileno], [], [])
            signal.clear()
            while queued:
                taken.append(queued.popleft())
        consumer_done.set()

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: more interleavings
    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        for i in range(items):
            queued.append(i)
            if not signal.pending:
                signal.wake()
            elif not len(queued) % 16:
                time.sleep(0)  # release the GIL mid-burst, as Communicator senders do
        assert consumer_done.wait(60), (
            f"consumer asleep with {len(queued)} items queued, pending={signal.pending}")
        assert taken == list(range(items))
    finally:
        sys.setswitchinterval(old_interval)
        if not consumer_done.is_set():  # unblock the daemon thread before closing
            os.write(signal._write, b"x")  # noqa: SLF001
        consumer.join(5)
        signal.close()
