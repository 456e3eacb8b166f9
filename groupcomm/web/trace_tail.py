"""Following a directory of trace files as they grow (``groupcomm watch``): each poll reads
the lines appended since the last, parses them against the trace schema, and hands the
records on by view (the directory itself, and each subdirectory: a gateway writes
``DIR/im`` and ``DIR/edit``). A line cut short by a writer that has not finished it waits
for the rest; a bad line is counted and warned about once, with its file and line number,
and skipped."""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.core.trace_schema import record_problem

log = logging.getLogger(__name__)

#: bytes read from one file per poll (a large trace is read over several polls)
CHUNK = 4 * 1024 * 1024


@dataclass
class _File:
    offset: int = 0
    line: int = 0
    partial: bytes = b""
    done: bool = False  # a .gz file is read once, whole


@dataclass
class Batch:
    """What one poll found: records by view name, in ``ts`` order within each."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    bad: int = 0


class TraceTail:
    """Reads the new lines of ``directory``'s ``*.jsonl`` (and ``*.jsonl.gz``) files,
    down one level of subdirectories."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._files: dict[Path, _File] = {}
        #: bad lines per reason
        self.bad: Counter[str] = Counter()

    def view_of(self, path: Path) -> str:
        """The view a file belongs to: its subdirectory's name, ``.`` for the top."""
        parent = path.parent
        return "." if parent == self.directory else parent.name

    def _paths(self) -> list[Path]:
        found = []
        for pattern in ("*.jsonl", "*.jsonl.gz", "*/*.jsonl", "*/*.jsonl.gz"):
            found.extend(p for p in self.directory.glob(pattern) if p.is_file())
        return sorted(found)

    def poll(self) -> Batch:
        """Read what was appended since the last poll."""
        batch = Batch()
        for path in self._paths():
            state = self._files.setdefault(path, _File())
            if state.done:
                continue
            try:
                data = self._read(path, state)
            except OSError as error:
                log.warning("cannot read trace file %s: %s", path, error.strerror or error)
                continue
            lines = (state.partial + data).split(b"\n")
            state.partial = lines.pop()  # the line still being written, or b""
            if state.done and state.partial:
                lines.append(state.partial)
                state.partial = b""
            records = batch.records.setdefault(self.view_of(path), [])
            for raw in lines:
                state.line += 1
                record = self._parse(path, state.line, raw)
                if record is not None:
                    records.append(record)
                elif raw.strip():
                    batch.bad += 1
        for records in batch.records.values():
            records.sort(key=lambda r: r["ts"])  # stable: each file keeps its own order
        return batch

    def _read(self, path: Path, state: _File) -> bytes:
        if path.name.endswith(".gz"):
            state.done = True
            with gzip.open(path, "rb") as handle:
                return handle.read()
        size = path.stat().st_size
        if size < state.offset:  # truncated or replaced: start again
            log.warning("trace file %s shrank; reading it again from the start", path)
            state.offset, state.line, state.partial = 0, 0, b""
        with open(path, "rb") as handle:
            handle.seek(state.offset)
            data = handle.read(CHUNK)
        state.offset += len(data)
        return data

    def _parse(self, path: Path, number: int, raw: bytes) -> dict[str, Any] | None:
        """The record of one line, or None: blank (skipped quietly) or bad (counted and
        warned about)."""
        if not raw.strip():
            return None
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            problem = f"not JSON ({error.msg if hasattr(error, 'msg') else error})"
        else:
            problem = record_problem(record)
            if problem is None:
                return record
        self.bad[problem] += 1
        log.warning("%s:%d: bad trace line skipped (%s; %d bad lines so far): %.120r",
                    path, number, problem, sum(self.bad.values()), raw)
        return None
