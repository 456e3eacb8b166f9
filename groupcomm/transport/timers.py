"""When each member of a poll loop next needs a turn without input: :class:`TurnTimers`,
a heap of ``(deadline, seq, member)`` with lazy invalidation. A member's deadline
changes after nearly every turn; rather than finding and removing its old entry, the
heap keeps it and skips it when it surfaces (its ``seq`` is no longer the member's)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable

#: entries beyond the live ones (times the members, plus this) before the heap is
#: rebuilt from the live ones: stale entries would otherwise pile up for as long as the
#: longest timer when members take many turns each
SLACK = 64


class TurnTimers:
    """One deadline per member; :meth:`pop_due` hands out the members whose deadline
    has come (each once: its timer is gone until :meth:`set` again)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        #: member -> (deadline, seq) of its live entry
        self._live: dict[Hashable, tuple[float, int]] = {}
        self._seq = itertools.count()

    def set(self, member: Hashable, deadline: float) -> None:
        """``member``'s next turn is due at ``deadline`` (replaces what was set)."""
        live = self._live.get(member)
        if live is not None and live[0] == deadline:
            return  # unchanged (most prepares of a member not due): no new entry
        seq = next(self._seq)
        self._live[member] = (deadline, seq)
        heap = self._heap
        heapq.heappush(heap, (deadline, seq, member))
        if len(heap) > 2 * len(self._live) + SLACK:
            self._heap = [(d, s, m) for m, (d, s) in self._live.items()]
            heapq.heapify(self._heap)

    def cancel(self, member: Hashable) -> None:
        """Forget ``member``'s deadline (it left the loop)."""
        self._live.pop(member, None)

    def earliest(self) -> float | None:
        """The earliest live deadline (None: no member has one)."""
        heap, live = self._heap, self._live
        while heap:
            deadline, seq, member = heap[0]
            if live.get(member, (None, None))[1] == seq:
                return deadline
            heapq.heappop(heap)  # stale: the member's deadline changed or it left
        return None

    def pop_due(self, now: float) -> list[Hashable]:
        """The members whose deadline is ``now`` or earlier, earliest first."""
        heap, live = self._heap, self._live
        due = []
        while heap and heap[0][0] <= now:
            _, seq, member = heapq.heappop(heap)
            entry = live.get(member)
            if entry is not None and entry[1] == seq:
                del live[member]
                due.append(member)
        return due

    def __len__(self) -> int:
        return len(self._live)

    def deadline(self, member: Hashable) -> float | None:
        """``member``'s live deadline, if any."""
        live = self._live.get(member)
        return None if live is None else live[0]
