"""A small execution held in memory: the application events of each process, in order
(collected once for the space-time diagram and the ShiViz log of a small run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class AppEvent:
    """A ``send`` or ``deliver`` recorded by ``process``."""

    process: str
    event: str
    msg: str
    sender: str
    ts: float
    dests: tuple[str, ...] = ()


@dataclass
class Execution:
    """Per process, its application events in line order."""

    events: dict[str, list[AppEvent]] = field(default_factory=dict)

    @property
    def processes(self) -> list[str]:
        return sorted(self.events)

    def sends(self) -> dict[str, AppEvent]:
        """The first send of each message."""
        found: dict[str, AppEvent] = {}
        for events in self.events.values():
            for e in events:
                if e.event == "send":
                    found.setdefault(e.msg, e)
        return found

    def add(self, event: AppEvent) -> None:
        self.events.setdefault(event.process, []).append(event)


def undelivered_pairs(execution: Execution) -> list[tuple[str, str]]:
    """Every (message, destination) with no delivery of the message there, sorted."""
    delivered = {(e.msg, p) for p, events in execution.events.items()
                 for e in events if e.event == "deliver"}
    return sorted((msg, dest) for msg, send in execution.sends().items()
                  for dest in set(send.dests) if (msg, dest) not in delivered)


def collect(events: DataFrame) -> Execution:
    """Collect the sends and deliveries of ``events`` (callers check the size first)."""
    from pyspark.sql import functions as F

    rows = (
        events.filter(F.col("event").isin("send", "deliver"))
        .select("process", "event", "msg", "sender", "ts", "dests", "file", "blk", "rid")
        .orderBy("file", "blk", "rid")
        .collect()
    )
    execution = Execution()
    for r in rows:
        execution.add(AppEvent(r["process"], r["event"], r["msg"], r["sender"],
                               float(r["ts"]), tuple(r["dests"] or ())))
    return execution
