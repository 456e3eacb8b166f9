"""How each process's trace ends, which undelivered messages that explains, and releases
(the rules: docs/trace_schema.md, "What the analysis reports")."""

from __future__ import annotations

import gzip
import json
import logging
import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.core.member_ids import split_member
from groupcomm.core.tracing import trace_file_stem

#: processes that leave within this many seconds of the last one simply ended with the run
DEPARTURE_GRACE = 1.0
#: how much of a file's end is read to find its last line
_TAIL_BYTES = 64 * 1024
#: how much of a file is read at a time when its lines are searched
_CHUNK_BYTES = 8 * 1024 * 1024
#: a process that started this much after the record naming its id is another process
#: that got the id again
_START_SLACK = 1.0

log = logging.getLogger(__name__)


@dataclass
class Endings:
    """The end of every process's trace: the ts of its last record, whether it ends with
    its own departure (``left``), stops without it (``abrupt``, judged only when some
    trace has one), or is still being written (``open``: process -> writer's id)."""

    last_ts: dict[str, float] = field(default_factory=dict)
    left: set[str] = field(default_factory=set)
    abrupt: list[str] = field(default_factory=list)
    open: dict[str, int] = field(default_factory=dict)

    def departed(self) -> set[str]:
        """Processes whose membership ended during the run: traces that stop abruptly,
        and those that left more than the grace before the last process ended (never an
        open trace's)."""
        if not self.last_ts:
            return set(self.abrupt)
        end = max(self.last_ts.values())
        early = {p for p, ts in self.last_ts.items() if ts < end - DEPARTURE_GRACE}
        return (early | set(self.abrupt)) - set(self.open)

    def classify(self, sender: str, destination: str) -> str:
        """Which of :data:`UNDELIVERED_KINDS` an undelivered pair counts in."""
        if sender in self.open or destination in self.open:
            return "undelivered_open"
        departed = self.departed()
        if destination in departed:
            return "undelivered_to_departed"
        if sender in departed:
            return "undelivered_from_departed"
        return "undelivered_present"


def _json_object(raw: bytes | str) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _open(path: Path) -> Any:
    return (gzip.open if path.name.endswith(".gz") else open)(path, "rb")


def matching_lines(path: Path, needle: bytes) -> list[bytes]:
    """The lines of the local trace file ``path`` (``.gz`` or not) that contain
    ``needle``, in order (searched a chunk at a time, without splitting lines)."""
    found: list[bytes] = []
    with _open(path) as handle:
        carry = b""
        while True:
            chunk = handle.read(_CHUNK_BYTES)
            data = carry + chunk
            if not chunk:
                end = len(data)
            else:
                end = data.rfind(b"\n") + 1
                if end == 0:  # no line ends in this chunk yet
                    carry = data
                    continue
            at = data.find(needle, 0, end)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                stop = data.find(b"\n", at, end)
                stop = end if stop < 0 else stop
                found.append(data[start:stop])
                at = data.find(needle, stop, end)
            carry = data[end:]
            if not chunk:
                return found


def _writer(path: Path) -> tuple[int, str, float] | None:
    """(pid, host, ts) of the last record of ``path`` that names its writer (a file whose
    start names none, as the simulator's and the checker's, is not searched)."""
    with _open(path) as handle:
        if b'"pid"' not in handle.read(_TAIL_BYTES):
            return None
    for raw in reversed(matching_lines(path, b'"pid"')):
        record = _json_object(raw) or {}
        pid, host, ts = record.get("pid"), record.get("host"), record.get("ts")
        if (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
                and isinstance(host, str) and isinstance(ts, int | float)):
            return pid, host, float(ts)
    return None


def process_running(pid: int, since: float | None = None) -> bool:
    """Whether process ``pid`` of this host runs (not a zombie) and, when ``since`` (a
    wall-clock time) is given and readable, started no later than it (a later process
    that got the id again is not the one meant)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass  # someone else's process: it exists
    except OSError:  # ProcessLookupError among them
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True  # no /proc: the signal test is all there is
    if fields[0] in ("Z", "X"):
        return False  # killed, not yet reaped
    if since is None:
        return True
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(float(line.split()[1]) for line in handle if line.startswith("btime "))
    except (OSError, StopIteration):
        return True
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= since + _START_SLACK


def _moved_on(process: str, pid: int, traces: dict[str, Path]) -> bool:
    """Whether ``pid`` also writes a later incarnation of ``process`` (``carol~2`` after
    ``carol``): declared gone, the process went on as a new member, and this trace ended
    then, without a departure."""
    name, incarnation = split_member(process)
    for other, path in traces.items():
        other_name, other_incarnation = split_member(other)
        if other_name == name and other_incarnation > incarnation:
            writer = _writer(path)
            if writer is not None and writer[0] == pid and writer[1] == platform.node():
                return True
    return False


def trace_endings(files: Sequence[Any],
                  read_tail: Callable[[Any, int], bytes] | None = None) -> Endings:
    """Read the last record of each file: local paths, or files with a ``stem`` whose
    last bytes ``read_tail(file, size)`` reads (:class:`~trace_analysis.loaded.RemoteFile`).
    A local file that stops without a departure is searched for its writer."""
    endings = Endings()
    unclean: list[str] = []
    local_files: dict[str, Path] = {}
    for path in files:
        local = isinstance(path, Path) or read_tail is None
        if local:
            with open(path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - _TAIL_BYTES))
                tail = handle.read()
        else:
            tail = read_tail(path, _TAIL_BYTES)
        # None for a line cut short by a kill: the trace ends abruptly
        record = next((_json_object(raw) for raw in reversed(tail.splitlines())
                       if raw.strip()), None)
        process = str(record.get("process", path.stem)) if record else path.stem
        if local:
            local_files[process] = Path(path)
        ts = record.get("ts") if record else None
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            endings.last_ts[process] = float(ts)
        if record and record.get("event") == "leave" and record.get("client") == process:
            endings.left.add(process)
        else:
            unclean.append(process)
    for process in list(unclean):  # a writer of this host still running: still open
        writer = _writer(local_files[process]) if process in local_files else None
        if writer is None or writer[1] != platform.node():
            continue
        pid = writer[0]
        if process_running(pid, writer[2]) and not _moved_on(process, pid, local_files):
            endings.open[process] = pid
            unclean.remove(process)
    endings.abrupt = sorted(unclean) if endings.left else []
    return endings


@dataclass(frozen=True)
class Release:
    """``process`` gave up waiting for ``member`` and delivered ``msgs`` without their
    causes."""

    process: str
    member: str
    msgs: tuple[str, ...]


def parse_release(raw: bytes | str) -> Release | None:
    """The release a trace line records, or None (another event, or malformed)."""
    record = _json_object(raw)
    if record is None or record.get("event") != "release":
        return None
    process, member, msgs = record.get("process"), record.get("client"), record.get("msgs")
    if not (isinstance(process, str) and isinstance(member, str) and isinstance(msgs, list)
            and all(isinstance(m, str) for m in msgs)):
        log.warning("a release record without 'client' or 'msgs' is left out: %.200r", raw)
        return None
    return Release(process, member, tuple(msgs))


def read_releases(files: Sequence[Any], processes: Iterable[str],
                  read_lines: Callable[[list[Any], bytes], list[bytes]]) -> list[Release]:
    """The release records of the files of ``processes`` (every file when one of theirs
    is not found by its name): local files searched here, others by ``read_lines(files,
    needle)``."""
    wanted = {trace_file_stem(p) for p in processes}
    if not wanted:
        return []
    chosen = [f for f in files if f.stem.removesuffix(".jsonl") in wanted]
    if len({f.stem.removesuffix(".jsonl") for f in chosen}) < len(wanted):
        chosen = list(files)
    remote = [f for f in chosen if not isinstance(f, Path)]
    lines = [line for f in chosen if isinstance(f, Path)
             for line in matching_lines(f, b'"release"')]
    if remote:
        lines += read_lines(remote, b'"release"')
    return [r for r in map(parse_release, lines) if r is not None]


def describe(result: Mapping[str, Any]) -> list[str]:
    """The readable report's lines about endings, undelivered pairs and releases."""
    lines = []
    departed = result.get("undelivered_to_departed", 0)
    with_sender = result.get("undelivered_from_departed", 0)
    still = result.get("undelivered_open", 0)
    if departed or with_sender or still:
        lines.append(
            f"  of the undelivered: {departed} were addressed to members whose membership "
            f"ended before they could arrive (left, killed or declared gone); "
            f"{with_sender} went down with a sender that left, was killed or was declared "
            f"gone; {still} are to or from a process still running (open trace); "
            f"{result.get('undelivered_present', 0)} to members still there, from senders "
            "still there")
    opened = result.get("open_traces") or {}
    if opened:
        lines.append("traces still open (the run goes on; nothing is judged of their end): "
                     + ", ".join(f"{p} (pid {pid} alive)" for p, pid in sorted(opened.items())))
    abrupt = result.get("abrupt_endings") or []
    if abrupt:
        lines.append(f"traces that end abruptly (no departure recorded: killed, crashed or "
                     f"declared gone): {', '.join(abrupt)}")
    released = result.get("released_deliveries", 0)
    if released or result.get("releases"):
        lines.append(f"delivered without their causes after a release: {released} (a module "
                     f"gave up waiting for a member {result.get('releases', 0)} time(s); "
                     "a cause that arrived later also counts as a causal violation)")
    return lines


UNDELIVERED_KINDS = ("undelivered_open", "undelivered_to_departed",
                     "undelivered_from_departed", "undelivered_present")


def undelivered_by_ending(sends: Any, deliveries: Any, endings: Endings,
                          undelivered: int) -> dict[str, int]:
    """The ``undelivered`` pairs by :meth:`Endings.classify` (Spark frames: the send
    table and the laid-out deliveries)."""
    opened, gone = sorted(endings.open), sorted(endings.departed())
    if not undelivered or not (opened or gone):
        return {**dict.fromkeys(UNDELIVERED_KINDS[:3], 0), "undelivered_present": undelivered}
    from pyspark.sql import functions as F

    def among(column: str, names: list[str]) -> Any:
        return F.col(column).isin(names) if names else F.lit(False)

    pairs = sends.select("msg", "sender", F.explode("dests").alias("p"))
    reached = deliveries.filter(F.col("copy") == 1).select("msg", "p")
    involved = among("p", opened + gone) | among("sender", opened + gone)
    missing = pairs.filter(involved).distinct().join(reached, ["msg", "p"], "left_anti")
    still = among("p", opened) | among("sender", opened)
    kinds = UNDELIVERED_KINDS[:3]  # open, to departed, from departed
    parts = (still, ~still & among("p", gone), ~still & ~among("p", gone))
    row = missing.agg(*[F.sum(part.cast("long")).alias(kind)
                        for part, kind in zip(parts, kinds, strict=True)]).first()
    counts = {kind: int(row[kind] or 0) for kind in kinds}
    return {**counts, "undelivered_present": undelivered - sum(counts.values())}


def released_deliveries(deliveries: Any, releases: Sequence[Release]) -> int:
    """How many (process, message) pairs of ``releases`` the process delivered."""
    pairs = sorted({(r.process, m) for r in releases for m in r.msgs})
    if not pairs:
        return 0
    from pyspark.sql import functions as F

    spark = deliveries.sparkSession
    wanted = spark.createDataFrame(pairs, "p string, msg string")
    firsts = deliveries.filter(F.col("copy") == 1).select("p", "msg")
    return firsts.join(F.broadcast(wanted), ["p", "msg"], "left_semi").count()
