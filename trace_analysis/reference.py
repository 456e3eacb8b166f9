"""A single-process, pure-Python checker of trace directories by the Spark job's method
and rules: the baseline of ``groupcomm analyze-bench`` and a second opinion for tests."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trace_analysis.endings import Release, parse_release, trace_endings
from trace_analysis.layout import count_earlier_at_least
from trace_analysis.loaded import list_trace_files
from trace_analysis.schema import MALFORMED, OK, parse_line


@dataclass
class ReferenceResult:
    """Counts of :func:`check_directory` (the same names as the Spark result)."""

    events: int = 0
    messages: int = 0
    deliveries: int = 0
    causal_violations: int = 0
    fifo_violations: int = 0
    undelivered: int = 0
    duplicates: int = 0
    malformed_lines: int = 0
    per_process: dict[str, int] = field(default_factory=dict)
    undelivered_open: int = 0
    undelivered_to_departed: int = 0
    undelivered_from_departed: int = 0
    undelivered_present: int = 0
    abrupt_endings: list[str] = field(default_factory=list)
    open_traces: dict[str, int] = field(default_factory=dict)
    releases: int = 0
    released_deliveries: int = 0


def check_directory(trace_dir: str | Path) -> ReferenceResult:
    """Check every trace file of ``trace_dir`` in this process."""
    result = ReferenceResult()
    senders: dict[str, int] = {}  # sender name -> column
    sends: dict[str, tuple[int, int, tuple[str, ...], dict[str, int]]] = {}
    deliveries: dict[str, list[str]] = defaultdict(list)
    releases: list[Release] = []
    files = list_trace_files(trace_dir)
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                status, _, record = parse_line(line.rstrip("\n"))
                if status != OK:
                    if status == MALFORMED:
                        result.malformed_lines += 1
                    continue
                assert record is not None
                result.events += 1
                event = record["event"]
                if event == "deliver":
                    deliveries[record["process"]].append(record["msg"])
                elif event == "release":
                    release = parse_release(line)
                    if release is not None:
                        releases.append(release)
                elif event == "send":
                    msg = record["msg"]
                    if msg in sends:
                        continue
                    sender = record["process"]
                    column = senders.setdefault(sender, len(senders))
                    sends[msg] = (column, record["vc"].get(sender, 0), tuple(record["dests"]),
                                  record["vc"])
    result.messages = len(sends)
    names = list(senders)
    expected = sum(len(set(dests)) for _, _, dests, _ in sends.values())
    delivered_at_destination = 0
    for process, order in deliveries.items():
        seen: set[str] = set()
        firsts: list[str] = []
        for msg in order:
            result.deliveries += 1
            if msg in seen:
                result.duplicates += 1
                continue
            seen.add(msg)
            if msg in sends:
                firsts.append(msg)
                if process in sends[msg][2]:
                    delivered_at_destination += 1
        result.per_process[process] = len(order)
        causal, fifo = _count_process(firsts, sends, names)
        result.causal_violations += causal
        result.fifo_violations += fifo
    result.undelivered = expected - delivered_at_destination
    endings = trace_endings(files)
    result.abrupt_endings, result.open_traces = endings.abrupt, dict(endings.open)
    result.undelivered_present = result.undelivered
    if result.undelivered and (endings.open or endings.departed()):
        result.undelivered_present = 0
        reached = {(msg, process) for process, order in deliveries.items() for msg in order}
        for msg, (column, _, dests, _) in sends.items():
            for dest in set(dests):
                if (msg, dest) not in reached:
                    kind = endings.classify(names[column], dest)
                    setattr(result, kind, getattr(result, kind) + 1)
    result.releases = len(releases)
    delivered = {r.process: set(deliveries.get(r.process, ())) for r in releases}
    result.released_deliveries = len({(r.process, m) for r in releases for m in r.msgs
                                      if m in delivered[r.process]})
    return result


def _count_process(firsts: list[str], sends: dict, names: list[str]) -> tuple[int, int]:
    """Violations among one process's first deliveries (running maxima, then counting)."""
    width = len(names)
    maxima = [0] * width
    flagged: dict[int, list[int]] = defaultdict(list)  # sender column -> positions
    columns: list[list[int]] = [[] for _ in range(width)]  # per column: vc value per position
    for position, msg in enumerate(firsts):
        column, own, _, vc = sends[msg]
        if maxima[column] >= own and position:
            flagged[column].append(position)
        for k, name in enumerate(names):
            value = vc.get(name, 0)
            columns[k].append(value)
            if value > maxima[k]:
                maxima[k] = value
    causal = fifo = 0
    for column, positions in flagged.items():
        values = np.asarray(columns[column], dtype=np.int64)
        causal += int(count_earlier_at_least(values, positions).sum())
        # FIFO: only earlier deliveries from the same sender
        same = np.asarray([sends[m][0] == column for m in firsts], dtype=bool)
        index = np.flatnonzero(same)
        rank = {int(p): i for i, p in enumerate(index)}
        fifo += int(count_earlier_at_least(values[index], [rank[p] for p in positions]).sum())
    return causal, fifo
