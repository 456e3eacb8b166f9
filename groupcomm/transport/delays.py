"""Delays injected per peer for testing (source 003: ``setMinimumDelayToPeer``): frames
to a delayed peer wait in a timer heap, with an optional random jitter; ``keep_fifo``
keeps the per-peer order anyway."""

from __future__ import annotations

import heapq
import math
import random
import threading
from dataclasses import dataclass, field
from typing import Any

#: the longest injected delay or jitter accepted: one hour
MAX_DELAY_MS = 3_600_000.0


def check_delay_ms(what: str, ms: float) -> float:
    """``ms`` as a float when it is a usable delay; else :class:`ValueError` saying
    ``what`` must be a finite number of milliseconds from 0 to :data:`MAX_DELAY_MS`
    (NaN or infinity would hold every frame forever)."""
    try:
        value = float(ms)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_DELAY_MS):
        raise ValueError(f"{what} must be a finite number of ms from 0 to "
                         f"{MAX_DELAY_MS:.0f} (one hour), got {ms}")
    return value


def self_delay_error(name: str) -> str:
    """The words for a delay to oneself (messages to oneself never cross a link)."""
    return f"cannot delay messages to {name}: that is this member itself"


@dataclass(order=True)
class _Due:
    due: float
    seq: int
    peer: str = field(compare=False)
    item: Any = field(compare=False)


class DelayPlan:
    """Per-peer minimum delays, jitter, and the heap of frames waiting to go out.
    Settings may be changed from any thread; the heap belongs to the I/O thread."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._minimum_ms: dict[str, float] = {}
        self._jitter_ms = 0.0
        self.keep_fifo = True
        self._rng = random.Random(seed)
        #: the frames waiting, earliest at [0] (a heap: read it, do not change it)
        self.waiting: list[_Due] = []
        #: any delay or jitter configured (an attribute: read per message)
        self.active = False
        self._last_due: dict[str, float] = {}
        self._seq = 0

    def set_minimum_delay(self, peer: str, ms: float) -> None:
        """Frames to ``peer`` wait at least ``ms`` milliseconds (0 removes the delay);
        :class:`ValueError` unless ``ms`` passes :func:`check_delay_ms`."""
        ms = check_delay_ms("delay", ms)
        with self._lock:
            if ms:
                self._minimum_ms[peer] = ms
            else:
                self._minimum_ms.pop(peer, None)
            self.active = bool(self._minimum_ms) or self._jitter_ms > 0

    def set_jitter(self, ms: float, keep_fifo: bool = True) -> None:
        """A random extra delay of up to ``ms`` for every frame; :class:`ValueError`
        unless ``ms`` passes :func:`check_delay_ms`."""
        ms = check_delay_ms("jitter", ms)
        with self._lock:
            self._jitter_ms = ms
            self.keep_fifo = keep_fifo
            self.active = bool(self._minimum_ms) or self._jitter_ms > 0

    def schedule(self, now: float, peer: str, item: Any) -> bool:
        """Queue ``item`` for ``peer`` if it must wait; False when it can go now (only
        when nothing to that peer still waits, so FIFO holds when a delay is removed)."""
        with self._lock:
            ms = self._minimum_ms.get(peer, 0.0)
            if self._jitter_ms:
                ms += self._rng.uniform(0, self._jitter_ms)
        due = now + ms / 1000.0
        last = self._last_due.get(peer)
        if self.keep_fifo and last is not None and last > now:
            due = max(due, last)
        if due <= now:
            return False
        self._seq += 1
        heapq.heappush(self.waiting, _Due(due, self._seq, peer, item))
        self._last_due[peer] = max(due, last or 0.0) if self.keep_fifo else due
        return True

    def pop_due(self, now: float) -> list[tuple[str, Any]]:
        """Frames due by ``now``, earliest first."""
        heap = self.waiting
        ready = []
        while heap and heap[0].due <= now:
            entry = heapq.heappop(heap)
            ready.append((entry.peer, entry.item))
        return ready

    def __len__(self) -> int:
        return len(self.waiting)
