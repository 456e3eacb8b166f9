"""How each process's trace ends, and which undelivered messages that explains.

A communicator that closes records its own departure last (a ``leave`` event whose
``client`` is the process itself). A trace that stops without one belongs to a process
that was killed, crashed, or was declared gone and came back as a new incarnation (whose
trace is another file). Only the last line of each file is read, so this costs nothing
next to the analysis. Abrupt endings are judged only when at least one process of the
directory recorded its own departure: traces from the simulator or the model checker
record none, and end when the run ends.

A (message, destination) pair never delivered whose destination's membership ended during
the run (its trace stops abruptly, or it left more than :data:`DEPARTURE_GRACE` seconds
before the last process ended) is counted as ``undelivered_to_departed``: the member
left, was killed or was declared gone before the message reached it. A pair whose
destination stayed but whose sender's membership ended is ``undelivered_from_departed``:
the message went down with its sender (a sender-side module's output buffer, or frames
that never left a killed process; the sender's module reports them undeliverable). The
others, ``undelivered_present``, are protocol failures (at the end of a run every
process leaves, within a moment of the others: that is not a departure that excuses a
loss).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: processes that leave within this many seconds of the last one simply ended with the run
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

    def departed(self) -> set[str]:
        """Processes whose membership ended during the run: traces that stop abruptly,
        and those that left more than the grace before the last process ended."""
        if not self.last_ts:
            return set(self.abrupt)
        end = max(self.last_ts.values())
        early = {p for p, ts in self.last_ts.items() if ts < end - DEPARTURE_GRACE}
        return early | set(self.abrupt)


def _local_tail(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - size))
        return handle.read()


def _last_record(tail: bytes) -> dict[str, Any] | None:
    for raw in reversed(tail.splitlines()):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            return None  # a line cut short by the kill: the trace ends abruptly
        return record if isinstance(record, dict) else None
    return None


def trace_endings(files: Sequence[Any],
                  read_tail: Callable[[Any, int], bytes] | None = None) -> Endings:
    """Read the last record of each file: local paths, or any file ``read_tail(file,
    size)`` reads the last bytes of (files with a ``stem``: see
    :class:`trace_analysis.store.RemoteFile`)."""
    endings = Endings()
    unclean: list[str] = []
    for path in files:
        tail = _local_tail(path, _TAIL_BYTES) if isinstance(path, Path) or read_tail is None \
            else read_tail(path, _TAIL_BYTES)
        record = _last_record(tail)
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


def undelivered_with_departed(sends: Any, deliveries: Any,
                              departed: set[str]) -> tuple[int, int]:
    """(message, destination) pairs never delivered whose destination is one of
    ``departed``, and those whose destination is not but whose sender is (Spark frames:
    the send table and the laid-out deliveries)."""
    if not departed:
        return 0, 0
    from pyspark.sql import functions as F

    gone = sorted(departed)
    pairs = sends.select("msg", "sender", F.explode("dests").alias("p"))
    reached = deliveries.filter(F.col("copy") == 1).select("msg", "p")
    missing = (pairs.filter(F.col("p").isin(gone) | F.col("sender").isin(gone))
               .join(reached, ["msg", "p"], "left_anti"))
    row = missing.agg(
        F.sum(F.col("p").isin(gone).cast("long")).alias("to"),
        F.sum((~F.col("p").isin(gone)).cast("long")).alias("from"),
    ).first()
    return int(row["to"] or 0), int(row["from"] or 0)
