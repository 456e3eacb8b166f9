"""The garbage collector of a process that relays keystrokes for many members (a
gateway, a session server). A full collection walks every object the process tracks
and stops every member while it does; at startup half of those are the modules,
classes and functions imported, which never become garbage. Freezing them once the
process is ready (:func:`gc.freeze`) leaves them out of every later collection, so a
full collection costs what the members' own state costs.

:func:`settle` also starts counting how long collections stop the process, per
generation (:func:`report`, in the gateway's ``/stats``): a keystroke that arrives
during a full collection waits for it, so these pauses are where a p99 comes from
when the CPU is not saturated."""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger(__name__)

GENERATIONS = 3


class CollectionClock:
    """Each generation's collections: how many, and how long they stopped the process
    in total and at the longest (a :data:`gc.callbacks` entry)."""

    def __init__(self) -> None:
        self.collections = [0] * GENERATIONS
        self.paused = [0.0] * GENERATIONS
        self.longest = [0.0] * GENERATIONS
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        generation = info["generation"]
        took = time.perf_counter() - self._began
        self.collections[generation] += 1
        self.paused[generation] += took
        if took > self.longest[generation]:
            self.longest[generation] = took

    def report(self) -> list[dict[str, float]]:
        return [{"collections": self.collections[g],
                 "paused_ms": round(1e3 * self.paused[g], 3),
                 "longest_ms": round(1e3 * self.longest[g], 3)} for g in range(GENERATIONS)]


_clock: CollectionClock | None = None
#: objects frozen by settle (counting them walks the frozen list: not at every report)
_frozen = 0


def settle() -> int:
    """Once the process is ready, before it serves anyone: collect once, move everything
    tracked so far out of later collections (it lives as long as the process), and
    start timing collections. Returns how many objects were frozen."""
    global _clock, _frozen
    gc.collect()
    gc.freeze()
    if _clock is None:
        _clock = CollectionClock()
        gc.callbacks.append(_clock)
    _frozen = gc.get_freeze_count()
    log.debug("%d objects of startup left out of garbage collections", _frozen)
    return _frozen


def report() -> dict[str, Any]:
    """``frozen`` (objects left out of collections) and, per generation (0, 1, 2: the
    last is a full collection), ``collections``, ``paused_ms`` and ``longest_ms``
    since :func:`settle` (zeros before it)."""
    clock = _clock if _clock is not None else CollectionClock()
    return {"frozen": _frozen, "generations": clock.report()}
