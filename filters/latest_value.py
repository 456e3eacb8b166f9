"""A jitter buffer for volatile values, latest value wins (the slides' telepointer demo).

A telepointer, a cursor, a selection: each such message is obsolete once the next one
from the same sender about the same thing arrives, and shown as they arrive, network
jitter makes them jump. This receive filter holds them for ``hold`` seconds after their
arrival, so that they go on at an even pace, and marks a held message a newer one
replaced with the header ``superseded`` (an application shows only the others).

Any other message (a text edit, a control message) first releases everything held, in
arrival order, then passes at once: the filter never reorders or drops a message, so a
causality module after it and the trace analysis see every one in the order it came
(the hold shows in the latency, not as ``buffer`` events). The ``slot`` function given
to :class:`LatestValueCreator` says which messages are volatile: it takes a payload and
returns a key (``"cursor"``) or ``None`` for a message never held. Time comes from the
host's clock and ticker: no I/O here.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any

from groupcomm.module_kit import (
    FilterHost,
    MessageFilter,
    MessageFilterCreator,
    ReceivedMessage,
)

#: the header a replaced value is handed on with
SUPERSEDED = "superseded"
#: how many volatile values' ids are remembered to know a resent copy of one
SEEN_KEPT = 1024
#: seconds a volatile value is held by default (a few ticks of the I/O loop)
DEFAULT_HOLD = 0.06


class LatestValueFilter(MessageFilter[ReceivedMessage]):
    """Holds volatile messages up to ``hold`` seconds; see the module docstring."""

    def __init__(self, host: FilterHost, slot: Callable[[Any], Hashable | None],
                 hold: float) -> None:
        super().__init__()
        self.host = host
        self.slot = slot
        self.hold = hold
        #: [release time, message, superseded] in arrival order
        self._queue: deque[list[Any]] = deque()
        #: (sender, slot) -> the queue entry holding its latest value
        self._latest: dict[tuple[str, Hashable], list[Any]] = {}
        #: how many held values a newer one replaced
        self.superseded = 0
        #: the ids of the latest volatile values (a copy of one is not a new value)
        self._seen: OrderedDict[str, None] = OrderedDict()
        host.add_ticker(self._tick)

    def filter_message(self, message: ReceivedMessage) -> None:
        key = self._slot_of(message)
        if key is None:
            self.release_all()
            self.forward(message)
            return
        if message.message_id in self._seen:
            # a copy of a value seen: under the reliable layer none comes (the layer, below
            # this filter, drops them), but without it a duplicated frame does; it
            # replaces nothing, or an older value's copy would hide the newest, and goes
            # on marked, after the value itself (the receiver's duplicate check drops it)
            self._queue.append([self.host.now() + self.hold, message, True])
            return
        self._seen[message.message_id] = None
        if len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)
        older = self._latest.get(key)
        if older is not None and not older[2]:
            older[2] = True
            self.superseded += 1
        entry = [self.host.now() + self.hold, message, False]
        self._queue.append(entry)
        self._latest[key] = entry

    def _slot_of(self, message: ReceivedMessage) -> tuple[str, Hashable] | None:
        if not message.is_user_message():
            return None
        try:
            key = self.slot(message.user_message)
        except Exception:  # noqa: BLE001 - a faulty slot function must not lose a message
            return None
        return None if key is None else (message.sender, key)

    def _tick(self, now: float) -> None:
        queue = self._queue
        while queue and queue[0][0] <= now:
            self._release(queue.popleft())

    def release_all(self) -> None:
        """Hand on everything held, in arrival order."""
        self._tick(math.inf)

    def _release(self, entry: list[Any]) -> None:
        _, message, superseded = entry
        key = self._slot_of(message)
        if key is not None and self._latest.get(key) is entry:
            del self._latest[key]
        self.forward(message.with_header(SUPERSEDED, True) if superseded else message)

    def held(self) -> list[ReceivedMessage]:
        return [entry[1] for entry in self._queue]


class LatestValueCreator(MessageFilterCreator[ReceivedMessage]):
    """Makes a :class:`LatestValueFilter` per communicator (pass it as ``extra_receive``)."""

    def __init__(self, slot: Callable[[Any], Hashable | None],
                 hold: float = DEFAULT_HOLD) -> None:
        if hold < 0:
            raise ValueError(f"hold must be >= 0 seconds, got {hold}")
        self.slot = slot
        self.hold = hold

    def get_message_filter(self, host: FilterHost) -> LatestValueFilter:
        return LatestValueFilter(host, self.slot, self.hold)
