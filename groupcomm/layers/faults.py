"""Fault-injection filters for testing: drop, duplicate, reorder (``--filter
drop:p=0.05,seed=1`` and the like). They sit nearest the network and draw from a seeded
random generator, which is why they live here and not in ``filters/``."""

from __future__ import annotations

import functools
import random
from typing import Any

from groupcomm.core.filtering import FilterHost, MessageFilter, MessageFilterCreator
from groupcomm.core.messages import GroupMessage


class _FaultFilter(MessageFilter[Any]):
    def __init__(self, host: FilterHost, p: float, seed: int | None, user_only: bool) -> None:
        super().__init__()
        self.host = host
        self.p = p
        self.user_only = user_only
        # seed per process so that processes do not drop in lockstep
        self.random = random.Random(None if seed is None else f"{seed}:{host.name}")
        self.count = 0

    def _hit(self, message: GroupMessage) -> bool:
        if self.user_only and not message.is_user_message():
            return False
        return self.p > 0 and self.random.random() < self.p


class DropFilter(_FaultFilter):
    """Drops each message with probability ``p``."""

    def filter_message(self, message: Any) -> None:
        if self._hit(message):
            self.count += 1
            self.host.trace("reject", message, reason="injected_drop")
            return
        self.forward(message)


class DuplicateFilter(_FaultFilter):
    """Forwards each message twice with probability ``p``."""

    def filter_message(self, message: Any) -> None:
        self.forward(message)
        if self._hit(message):
            self.count += 1
            self.forward(message)


class ReorderFilter(_FaultFilter):
    """With probability ``p`` holds a message back until the next one has passed."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.held: list[Any] = []

    def filter_message(self, message: Any) -> None:
        if not self.held and self._hit(message):
            self.count += 1
            self.held.append(message)
            return
        self.forward(message)
        while self.held:
            self.forward(self.held.pop(0))


class FaultCreator(MessageFilterCreator[Any]):
    """Makes one kind of fault filter per communicator, from the options
    ``p=0.1[,seed=N][,what=all|user]``."""

    def __init__(self, cls: type[_FaultFilter], description: str, p: str | float = 0.1,
                 seed: str | int | None = None, what: str = "all") -> None:
        if what not in ("all", "user"):
            raise ValueError(f"what must be 'all' or 'user', got {what!r}")
        self.p = float(p)
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"probability must be within 0..1, got {self.p}")
        self.cls = cls
        self.description = description
        self.seed = None if seed is None else int(seed)
        self.user_only = what == "user"

    def get_message_filter(self, host: FilterHost) -> MessageFilter[Any]:
        return self.cls(host, self.p, self.seed, self.user_only)


FAULT_FILTERS = [
    {"name": "drop", "send": functools.partial(
        FaultCreator, DropFilter, "drops messages with probability p"),
     "description": "testing: drop messages on send with probability p (drop:p=0.05,seed=1)"},
    {"name": "duplicate", "send": functools.partial(
        FaultCreator, DuplicateFilter, "duplicates messages with probability p"),
     "description": "testing: send messages twice with probability p (duplicate:p=0.05)"},
    {"name": "reorder", "receive": functools.partial(
        FaultCreator, ReorderFilter, "swaps a message with the next one (probability p)"),
     "description": "testing: swap a received message with the next one (reorder:p=0.1)"},
]
