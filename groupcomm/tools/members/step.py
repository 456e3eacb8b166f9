"""One step of ``groupcomm member-bench``: a fresh ``groupcomm serve`` and the load
processes (:mod:`groupcomm.tools.members.load`) holding ``sessions`` × ``members``
terminal members, each typing at ``rate``; the step's row and why it saturated.

A keystroke's latency runs from the moment its member typed it to the moment each other
member of its session applied it to its text (what its screen draws next). Typing and
applying happen in different load processes: both times are read from the machine's
monotonic clock, the same in every process. The load processes run on the same machine
as the server, so their work is part of the figure; their CPU is in the row."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupcomm.tools.procs import LineProcess, ProcessError, ServerProcess
from groupcomm.tools.procstat import ProcessSample
from groupcomm.transport.keys import write_new_key
from groupcomm.web.capacity import DRAIN_TIMEOUT, JOIN_TIMEOUT, WARM_UP, Progress, percentiles


@dataclass(frozen=True)
class Load:
    """What one step runs: ``sessions`` × ``per_session`` members typing ``rate`` keys a
    second for ``seconds``, ``per_process`` members in each load process."""

    sessions: int
    per_session: int
    rate: float
    seconds: float
    per_process: int
    causality: str = "matrix"
    reliable: bool = True

    @property
    def members(self) -> int:
        return self.sessions * self.per_session

    def placement(self) -> list[list[str]]:
        """``NAME@SESSION`` of each load process's members: a session's members side by
        side, so that most of a process's members share few sessions."""
        specs = [f"m{s}-{k}@cap{s}" for s in range(self.sessions)
                 for k in range(self.per_session)]
        return [specs[i:i + self.per_process] for i in range(0, len(specs), self.per_process)]


@dataclass(frozen=True)
class Limits:
    """Where the run stops: p99 above ``p99_ms`` (or the p99 of how late the load
    processes typed the keys), one member's module holding more than ``queue`` messages,
    the server growing more than ``mb_per_member`` per member (None: no limit)."""

    p99_ms: float = 50.0
    queue: int = 1000
    mb_per_member: float | None = None


class StepError(RuntimeError):
    """The step could not run to its end (a process failed or did not answer)."""


def _ask_all(loads: list[LineProcess], command: str, answer: str, timeout: float) -> list[str]:
    """Give every load process ``command``, then wait for each one's ``answer`` line."""
    prefixes = (answer, "error")
    before = [sum(1 for line in p.lines if line.startswith(prefixes)) for p in loads]
    for process in loads:
        process.type(command)
    lines = []
    for process, count in zip(loads, before, strict=True):
        process.wait_line(lambda _, p=process, n=count: sum(
            1 for x in p.lines if x.startswith(prefixes)) > n, timeout, f"its {answer!r}")
        line = [x for x in process.lines if x.startswith(prefixes)][count]
        if line.startswith("error"):
            raise StepError(f"{process.name}: {line}")
        lines.append(line.split(" ", 1)[1] if " " in line else "")
    return lines


def run_step(load: Load, progress: Progress) -> dict[str, Any]:
    """The step's row (``error`` in it if the step could not run to its end)."""
    row: dict[str, Any] = {"sessions": load.sessions, "members_per_session": load.per_session,
                           "members": load.members, "rate": load.rate}
    with tempfile.TemporaryDirectory(prefix="groupcomm-member-bench-") as folder:
        key_file = Path(folder) / "session.key"
        write_new_key(key_file)
        server: ServerProcess | None = None
        loads: list[LineProcess] = []
        try:
            server = ServerProcess(key_file)
            row.update(_measure(load, server, key_file, loads, progress))
        except (StepError, ProcessError, OSError) as error:
            row["error"] = str(error).splitlines()[0][:300]
        finally:
            for process in loads:
                process.quit("quit", timeout=10)
            if server is not None:
                server.terminate()
    return row


def _measure(load: Load, server: ServerProcess, key_file: Path, loads: list[LineProcess],
             progress: Progress) -> dict[str, Any]:
    empty = ProcessSample.take(server.process.pid)
    for number, specs in enumerate(load.placement()):
        loads.append(LineProcess(f"load{number}", [
            sys.executable, "-m", "groupcomm.tools.members.load", "--server", server.address,
            "--key-file", str(key_file), "--causality", load.causality,
            *([] if load.reliable else ["--no-reliable"]), *specs]))
    for process in loads:  # they join side by side
        line = process.wait_line(lambda x: x.startswith(("joined", "error")), JOIN_TIMEOUT,
                                 "its members' joins")
        if line.startswith("error"):
            raise StepError(f"{process.name}: {line}")
    _ask_all(loads, f"ready {load.per_session} {JOIN_TIMEOUT:g}", "ready", JOIN_TIMEOUT + 10)
    processes = f"{len(loads)} load process{'es' if len(loads) > 1 else ''}"
    progress(f"{load.members} members joined ({processes}); typing "
             f"{load.rate:g} keys/s each for {load.seconds:g} s")
    pids = {"server": server.process.pid, **{p.name: p.process.pid for p in loads}}
    joined = {who: ProcessSample.take(pid) for who, pid in pids.items()}
    counted_from = time.monotonic() + WARM_UP * load.seconds
    typed: dict[str, int] = {}
    for line in _ask_all(loads, f"type {load.rate:g} {load.seconds:g}", "typed",
                         load.seconds + 120):
        typed.update(json.loads(line))
    typed_in: dict[str, int] = {}
    for name, keys in typed.items():
        session = f"cap{name[1:].split('-')[0]}"
        typed_in[session] = typed_in.get(session, 0) + keys
    results = [json.loads(line) for line in _ask_all(
        loads, f"drain {json.dumps(typed_in, separators=(',', ':'))} {DRAIN_TIMEOUT:g}",
        "result", DRAIN_TIMEOUT + 60)]
    # from the first key to the last delivery: the CPU all the typing cost
    done = {who: ProcessSample.take(pid) for who, pid in pids.items()}
    sent = {mid: at for r in results for mid, at in r["sent"].items()}
    samples = [(at - sent[mid]) * 1000 for r in results for mid, at in r["arrivals"]
               if sent.get(mid, 0) >= counted_from]
    expected = sum(1 for at in sent.values() if at >= counted_from) * (load.per_session - 1)
    deliveries = sum(typed.values()) * (load.per_session - 1)
    server_use = done["server"].since(joined["server"], empty)
    load_use = [done[p.name].since(joined[p.name]) for p in loads]
    load_cpu = sum(u["cpu_seconds"] for u in load_use)
    return {
        **percentiles(samples), "undelivered": max(0, expected - len(samples)),
        "held_max": max(r["held_max"] for r in results),
        # the most late typing of one load process: 1% of its keys were later than this
        "lag_p99_ms": max(r["lag_p99_ms"] for r in results),
        "server_cpu_percent": round(server_use["cpu_percent"], 1),
        # percent of the time its threads waited for a core (others held it)
        "server_waited_percent": round(server_use["waited_percent"], 1),
        "server_rss_mb": round(server_use["rss_mb"], 1),
        # grown since it started, over the members
        "server_mb_per_member": round(server_use["rss_grown_mb"] / load.members, 3),
        "server_cpu_us_per_delivery": round(1e6 * server_use["cpu_seconds"]
                                            / max(1, deliveries), 1),
        # percent of one core each member costs the server while typing
        "server_cpu_percent_per_member": round(server_use["cpu_percent"] / load.members, 3),
        "load_processes": len(loads),
        "load_cpu_percent": round(sum(u["cpu_percent"] for u in load_use), 1),
        "load_rss_mb": round(sum(u["rss_mb"] for u in load_use), 1),
        # a member's own memory: what a terminal editor's process holds for it
        "load_mb_per_member": round(sum(u["rss_mb"] for u in load_use) / load.members, 2),
        "load_cpu_us_per_delivery": round(1e6 * load_cpu / max(1, deliveries), 1),
    }


def verdict(row: dict[str, Any], limits: Limits) -> str | None:
    """Why this step saturated (None: it held)."""
    members = row["members"]
    if row.get("error"):
        return f"stopped at {members} members: {row['error']}"
    if row.get("undelivered"):
        return (f"stopped at {members} members: {row['undelivered']} keystroke deliveries "
                f"had not arrived {DRAIN_TIMEOUT:g} s after typing stopped")
    if row.get("held_max", 0) > limits.queue:
        return (f"stopped at {members} members: a member's module held {row['held_max']} "
                f"messages (limit {limits.queue})")
    if row.get("lag_p99_ms", 0) > limits.p99_ms:
        return (f"stopped at {members} members: 1% of the keys were typed more than "
                f"{row['lag_p99_ms']:g} ms behind the schedule (> {limits.p99_ms:g} ms): "
                "the load processes, not the server, are the limit here")
    if row.get("p99_ms", 0) > limits.p99_ms:
        return (f"stopped at {members} members: p99 {row['p99_ms']:g} ms > "
                f"{limits.p99_ms:g} ms limit")
    per_member = row.get("server_mb_per_member")
    if (limits.mb_per_member is not None and per_member is not None
            and per_member > limits.mb_per_member):
        return (f"stopped at {members} members: server memory {per_member:g} MB per member "
                f"> {limits.mb_per_member:g} MB limit")
    return None


def from_peer(row: dict[str, Any]) -> dict[str, Any]:
    """A pycrdt-websocket step's row (:mod:`groupcomm.web.crdt_peer`, whose server is
    in the gateway's place) in this bench's names."""
    names = {"tabs_per_session": "members_per_session", "tabs": "members",
             "gateway_cpu_percent": "server_cpu_percent",
             "gateway_waited_percent": "server_waited_percent",
             "gateway_rss_mb": "server_rss_mb",
             "gateway_cpu_us_per_delivery": "server_cpu_us_per_delivery"}
    converted = {names.get(key, key): value for key, value in row.items()
                 if key != "gateway_mb_per_tab"}
    if "gateway_mb_per_tab" in row:  # over the others: grown since the first joined
        converted["server_mb_per_member"] = row["gateway_mb_per_tab"]
    return converted
