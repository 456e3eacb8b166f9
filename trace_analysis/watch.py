"""``groupcomm analyze --watch``: analyse a trace directory again whenever it changes.

An analysis runs once there are traces and after every change, as soon as the trace
files (name, size, modification time) have looked the same twice in a row, so a file is
not read in the middle of a burst of lines.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from trace_analysis.loaded import TRACE_PATTERNS

log = logging.getLogger(__name__)

#: (file name, size, modification time in ns) of every trace file
Snapshot = tuple[tuple[str, int, int], ...]


def snapshot(directory: str | Path) -> Snapshot:
    """The state of the trace files of ``directory`` (empty when there are none)."""
    found = []
    folder = Path(directory)
    if not folder.is_dir():
        return ()
    for pattern in TRACE_PATTERNS:
        for path in folder.glob(pattern):
            try:
                stat = path.stat()
            except OSError:  # removed between the listing and the stat
                continue
            if path.is_file():
                found.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def describe(state: Snapshot) -> str:
    size = sum(entry[1] for entry in state)
    return f"{len(state)} file{'s' if len(state) != 1 else ''}, {size / 1000:.1f} kB"


def watch(directory: str | Path, analyse: Callable[[Snapshot], None],
          stop: threading.Event, interval: float = 1.0,
          say: Callable[[str], None] | None = None) -> int:
    """Call ``analyse(state)`` at the start and after each settled change until ``stop``
    is set; returns how many times it was called."""
    tell = say or (lambda text: None)
    analysed: Snapshot | None = None
    previous = snapshot(directory)
    if not previous:
        tell(f"waiting for trace files in {directory}")
    count = 0
    while not stop.is_set():
        current = snapshot(directory)
        if current and current == previous and current != analysed:
            analysed = current
            analyse(current)
            count += 1
            tell(f"watching {directory} for changes (Ctrl-C ends)")
            previous = snapshot(directory)
            continue
        previous = current
        stop.wait(interval)
    return count
