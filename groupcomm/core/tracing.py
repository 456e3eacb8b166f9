"""Trace writing in the schema of docs/trace_schema.md: one JSON object per line, one
``<process>.jsonl`` per process. Callers read a tracer's ``enabled`` before they build an
event, so tracing off (:class:`NullTracer`) costs one attribute read per event site.
"""

from __future__ import annotations

import json
import os
import platform
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from groupcomm.core.trace_schema import EVENTS, record_problem

TRACE_DIR_ENV = "GROUPCOMM_TRACE_DIR"
#: set on a log record (``extra``) whose news a session event also carries
#: (:mod:`groupcomm.protocol.session_events`): an application that says the events in
#: its own words leaves these records out of what it shows
SAID_BY_EVENT = "said_by_event"
#: the ``extra`` of such a record
EVENT_EXTRA = {SAID_BY_EVENT: True}


class Tracer:
    """Interface of trace sinks: ``emit`` writes one event, ``flush`` pushes what is
    buffered (a member does it once a heartbeat, so a process killed outright leaves its
    trace up to then), ``close`` flushes and releases the sink."""

    enabled: bool = False

    def emit(self, record: dict[str, Any]) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class NullTracer(Tracer):
    """Tracing off."""


class JsonlTracer(Tracer):
    """Appends events to ``<trace_dir>/<process>.jsonl``; thread-safe (pull-model apps
    record ``deliver`` on their own thread). Its first record also carries ``pid`` and
    ``host``, so that the analysis can tell a trace still being written from a killed
    process's."""

    enabled = True

    def __init__(self, trace_dir: str | os.PathLike[str], process: str) -> None:
        directory = Path(trace_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{trace_file_stem(process)}.jsonl"
        self._lock = threading.Lock()
        # opened at the first line: a communicator that turns out to be another
        # incarnation (carol~2) leaves no empty carol.jsonl behind
        self._file: IO[str] | None = None
        self._closed = False

    def emit(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"))
        with self._lock:
            if self._file is None:
                if self._closed:
                    return
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
                line = json.dumps({**record, "pid": os.getpid(), "host": platform.node()},
                                  separators=(",", ":"))
            self._file.write(line + "\n")

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None


class MemoryTracer(Tracer):
    """Keeps events in a list (tests, simulator, checker)."""

    enabled = True

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def emit(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(record)

    def write_dir(self, trace_dir: str | os.PathLike[str]) -> list[Path]:
        """Write the kept events as one ``<process>.jsonl`` per process."""
        return write_trace_dir(self.records, trace_dir)


def tracer_for(process: str, trace_dir: str | os.PathLike[str] | None) -> Tracer:
    """A :class:`JsonlTracer` when a directory is given (or in ``GROUPCOMM_TRACE_DIR``)."""
    directory = trace_dir if trace_dir is not None else os.environ.get(TRACE_DIR_ENV)
    if not directory:
        return NullTracer()
    return JsonlTracer(directory, process)


def write_trace_dir(
    records: Iterable[Mapping[str, Any]], trace_dir: str | os.PathLike[str]
) -> list[Path]:
    """Write ``records`` grouped by ``process`` into ``trace_dir``; returns the files."""
    directory = Path(trace_dir)
    directory.mkdir(parents=True, exist_ok=True)
    handles: dict[str, IO[str]] = {}
    try:
        for record in records:
            process = str(record["process"])
            handle = handles.get(process)
            if handle is None:
                handle = open(directory / f"{trace_file_stem(process)}.jsonl", "w",  # noqa: SIM115
                              encoding="utf-8")
                handles[process] = handle
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    finally:
        for handle in handles.values():
            handle.close()
    return [directory / f"{trace_file_stem(p)}.jsonl" for p in handles]


class TraceSchemaError(ValueError):
    """A trace record does not fit the schema."""


def validate_record(record: Mapping[str, Any]) -> None:
    """Raise :class:`TraceSchemaError` saying what breaks the schema: what the analyzer
    refuses (:func:`~groupcomm.core.trace_schema.record_problem`), an unknown event, or
    a ``release`` without its ``client`` and ``msgs``."""
    problem = record_problem(dict(record))
    if problem is None and record["event"] not in EVENTS:
        problem = f"unknown event {record['event']!r}"
    if problem is None and record["event"] == "release" and not (
            isinstance(record.get("client"), str) and isinstance(record.get("msgs"), list)
            and all(isinstance(m, str) for m in record["msgs"])):
        problem = "a release needs 'client' (a string) and 'msgs' (a list of strings)"
    if problem is not None:
        raise TraceSchemaError(f"{problem}: {dict(record)!r}")


def trace_file_stem(process: str) -> str:
    """The name of ``process``'s trace file without ``.jsonl``."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in process) or "_"
