"""What a loaded trace directory is, whichever the loader: the trace files of a
directory, the columns and events the checks keep, and :class:`Loaded`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from trace_analysis.schema import FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

TRACE_PATTERNS = ("*.jsonl", "*.jsonl.gz")
#: columns of :attr:`Loaded.events`
EVENT_COLUMNS = ("file", "blk", "rid") + FIELDS
#: the events pass 2 keeps (everything else is only counted)
HEAVY_EVENTS = ("send", "deliver", "buffer", "unbuffer")
#: the loaders :func:`load` offers (the first is the default)
LOADERS = ("workers", "native")
#: how many subfolders holding traces the error for a folder of trace folders names
SUBFOLDERS_NAMED = 10


class TraceDirError(ValueError):
    """The trace directory is missing or holds no trace files."""


@dataclass
class Loaded:
    """The parsed trace: counts of every valid event, the events the checks need (cached),
    and what was wrong with the rest."""

    #: send, deliver, buffer and unbuffer events; columns EVENT_COLUMNS
    events: DataFrame
    #: one dict per (protocol, process, event, kind) of valid events: n, bytes (meta_bytes)
    counts: list[dict[str, Any]]
    files: list[Path]
    lines: int
    blank_lines: int
    malformed: int
    malformed_samples: list[dict[str, Any]]
    seconds: float
    cached: list[DataFrame] = field(default_factory=list)
    #: the send events as an Arrow table (columns of
    #: :data:`trace_analysis.send_index.RAW_COLUMNS`) when the loader collected them
    #: while parsing; None to select them from ``events``
    sends: Any = None

    def unpersist(self) -> None:
        """Drop the cached data (the session lives on for the next analysis)."""
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def list_trace_files(trace_dir: str | Path) -> list[Path]:
    """The trace files of a directory, sorted; raises :class:`TraceDirError`."""
    directory = Path(trace_dir)
    if not directory.exists():
        raise TraceDirError(f"trace directory {directory} does not exist")
    if not directory.is_dir():
        raise TraceDirError(f"{directory} is not a directory")
    files = _trace_files_in(directory)
    if not files:
        holders = sorted(sub.name for sub in directory.iterdir()
                         if sub.is_dir() and _trace_files_in(sub))
        if holders:
            shown = ", ".join(holders[:SUBFOLDERS_NAMED])
            more = len(holders) - SUBFOLDERS_NAMED
            raise TraceDirError(
                f"no traces in {directory}; its subfolders {shown}"
                f"{f' (and {more} more)' if more > 0 else ''} hold traces: analyze one "
                "of them")
        raise TraceDirError(f"no trace files (*.jsonl) in {directory}")
    return files


def _trace_files_in(directory: Path) -> list[Path]:
    return sorted({p for pattern in TRACE_PATTERNS for p in directory.glob(pattern)
                   if p.is_file()})


def add_counts(counts: dict[tuple, list[int]], rows: list[Any]) -> None:
    """Add rows of (protocol, process, event, kind, n, bytes) to ``counts``."""
    for row in rows:
        entry = counts.setdefault(
            (row["protocol"], row["process"], row["event"], row["kind"]), [0, 0])
        entry[0] += row["n"]
        entry[1] += row["bytes"] or 0


def malformed_samples(blocks: dict[tuple[str, int], tuple[int, int]],
                      rows: list[Any]) -> list[dict[str, Any]]:
    """The samples of malformed ``rows`` (file, blk, rid, reason, raw): file name, line
    number, reason and the first 200 characters."""
    numbers = line_numbers(blocks, rows)
    return [{"file": Path(unquote(urlparse(row["file"]).path)).name,
             "line": numbers[(row["file"], row["blk"], row["rid"])], "reason": row["reason"],
             "text": row["raw"] if len(row["raw"]) <= 200 else row["raw"][:200] + "..."}
            for row in rows]


def finished(events: DataFrame, counts: dict[tuple, list[int]], files: list[Any],
             lines: int, blank: int, malformed: int, samples: list[dict[str, Any]],
             started: float, say: Callable[[str], None], cached: list[DataFrame],
             sends: Any = None) -> Loaded:
    """What a loader found, logged and said."""
    if malformed:
        log.warning("%d malformed lines (first: %s)", malformed,
                    ", ".join(f"{s['file']}:{s['line']}" for s in samples))
    seconds = time.monotonic() - started
    say(f"{lines - blank - malformed:,} events, {malformed:,} malformed lines, "
        f"{blank:,} blank ({seconds:.1f} s)")
    count_rows = [{"protocol": k[0], "process": k[1], "event": k[2], "kind": k[3],
                   "n": v[0], "bytes": v[1]} for k, v in sorted(counts.items(), key=str)]
    return Loaded(events, count_rows, list(files), lines, blank, malformed, samples,
                  seconds, cached, sends)


def line_numbers(blocks: dict[tuple[str, int], tuple[int, int]],
                 rows: list[Any]) -> dict[tuple[str, int, int], int]:
    """1-based line numbers of ``rows`` (each with file, blk, rid) from the per-block
    (lines, first id) of pass 1."""
    before: dict[tuple[str, int], int] = {}
    for file in {key[0] for key in blocks}:
        total = 0
        for blk in sorted(b for f, b in blocks if f == file):
            before[(file, blk)] = total
            total += blocks[(file, blk)][0]
    return {
        (row["file"], row["blk"], row["rid"]):
            before[(row["file"], row["blk"])] + row["rid"] - blocks[(row["file"], row["blk"])][1]
            + 1
        for row in rows
    }
