"""How each process's trace ends, and which undelivered messages that explains.

A communicator that closes records its own departure last (a ``leave`` event whose
``client`` is the process itself). A trace that stops without one belongs to a process
that was killed, crashed, or was declared gone and came back as a new incarnation (whose
trace is another file). Only the last line of each file is read, so this costs nothing
next to the analysis. Abrupt endings are judged only when at least one process of the
directory recorded its own departure: traces from the simulator or the model checker
record none, and end when the run ends.

A message addressed to a member whose trace ended (cleanly or not) shortly after, or
before, the message was sent could not reach it: such (message, destination) pairs are
counted as ``undelivered_to_departed``, apart from the undelivered messages that are
protocol failures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: a message sent less than this many seconds before its destination's trace ended
#: could still have been on its way when it left
DEPARTURE_GRACE = 1.0
#: how much of a file's end is read to find its last line
_TAIL_BYTES = 64 * 1024


@dataclass
class Endings:
    """The end of every process's trace."""

    #: process -> ts of its last record
    last_ts: dict[str, float] = field(default_factory=dict)
    #: processes whose trace ends with their own departure
    left: set[str] = field(default_factory=set)
    #: processes whose trace stops without it (only judged when :attr:`judged`)
    abrupt: list[str] = field(default_factory=list)
    judged: bool = False

    def departed_early(self) -> dict[str, float]:
        """Processes that ended before the others (by more than the grace): process ->
        the time of its last record."""
        if not self.last_ts:
            return {}
        end = max(self.last_ts.values())
        return {p: ts for p, ts in self.last_ts.items() if ts < end - DEPARTURE_GRACE}


def _last_record(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - _TAIL_BYTES))
        lines = handle.read().splitlines()
    for raw in reversed(lines):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            return None  # a line cut short by the kill: the trace ends abruptly
        return record if isinstance(record, dict) else None
    return None


def trace_endings(files: list[Path]) -> Endings:
    """Read the last record of each file."""
    endings = Endings()
    unclean: list[str] = []
    for path in files:
        record = _last_record(path)
        process = str(record.get("process", path.stem)) if record else path.stem
        ts = record.get("ts") if record else None
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            endings.last_ts[process] = float(ts)
        if record and record.get("event") == "leave" and record.get("client") == process:
            endings.left.add(process)
        else:
            unclean.append(process)
    endings.judged = bool(endings.left)
    endings.abrupt = sorted(unclean) if endings.judged else []
    return endings


def undelivered_to_departed(sends: Any, deliveries: Any, early: dict[str, float]) -> int:
    """(message, destination) pairs never delivered whose destination's trace ended
    before the message was sent plus :data:`DEPARTURE_GRACE` (Spark frames: the send
    table and the laid-out deliveries)."""
    if not early:
        return 0
    from pyspark.sql import functions as F

    spark = sends.sparkSession
    ends = spark.createDataFrame(list(early.items()), "p string, end_ts double")
    pairs = (sends.select("msg", "send_ts", F.explode("dests").alias("p"))
             .join(F.broadcast(ends), "p")
             .filter(F.col("send_ts") > F.col("end_ts") - DEPARTURE_GRACE))
    reached = deliveries.filter(F.col("copy") == 1).select("msg", "p")
    return pairs.join(reached, ["msg", "p"], "left_anti").count()
