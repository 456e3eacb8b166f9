"""Workloads of the simulator: what each process sends, to whom, and when it may (a
partially ordered set of sends, as in the Cykas paper, 004 §5.1).

A planned send is due when the previous send of its process was made ``interval`` ago
(the first at time 0), its ``at_ms`` has come and every send in its ``after`` has been
delivered at its process (scripts only); it is made once no job runs there. The job a
send starts at each recipient (``job_ms``) is drawn here, from the seed, so that every
protocol simulates the same program.

Random workloads are *uniform* (each send to one other process, drawn uniformly, 004
§5.3) or *hotspots* (``round(hotspot_share * n)`` processes, at least one, receive a send
with probability ``hotspot_weight``, 004 §5.4; uniformly within the chosen group, never
the sender, the other group when the chosen one has no one else); with ``broadcast``
every send goes to all others (``vector`` carries broadcasts only). Scripts:
:func:`script_from_dict`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class WorkloadError(ValueError):
    """A workload description is malformed (bad script, impossible parameters)."""


@dataclass(frozen=True, slots=True)
class PlannedSend:
    """One application send event of the program."""

    key: str
    sender: str
    dests: tuple[str, ...]
    after: tuple[str, ...] = ()
    job_ms: float = 0.0
    at_ms: float = 0.0


@dataclass
class Workload:
    """Processes (in join order) and each one's ordered sends."""

    processes: list[str]
    sends: dict[str, list[PlannedSend]] = field(default_factory=dict)
    #: (source, dest) -> propagation delay in ms for links that differ from the default
    link_delays: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def max_sends(self) -> int:
        return max((len(plan) for plan in self.sends.values()), default=0)


def process_names(count: int) -> list[str]:
    """``p000``, ``p001``, ...: zero-padded so that sorted order is index order."""
    if count < 1:
        raise WorkloadError("a simulation needs at least one process")
    width = max(3, len(str(count - 1)))
    return [f"p{i:0{width}d}" for i in range(count)]


def random_workload(processes: int, messages_per_process: int, *, seed: int = 0,
                    job_fraction: float = 0.0, job_ms: float = 0.0, job_sd_ms: float = 0.0,
                    hotspot_share: float = 0.0, hotspot_weight: float = 0.8,
                    broadcast: bool = False) -> Workload:
    """A uniform or hotspot workload drawn from ``random.Random(seed)`` (see module doc).

    Job lengths are ``job_ms``, or normally distributed around it with standard
    deviation ``job_sd_ms`` (clipped at 0) when that is positive.
    """
    if messages_per_process < 0:
        raise WorkloadError("messages per process must be >= 0")
    for what, share in (("job fraction", job_fraction), ("hotspot share", hotspot_share),
                        ("hotspot weight", hotspot_weight)):
        if not 0.0 <= share <= 1.0:
            raise WorkloadError(f"{what} must be within [0, 1]")
    if job_ms < 0 or job_sd_ms < 0:
        raise WorkloadError("job lengths must be >= 0")
    names = process_names(processes)
    if processes < 2 and messages_per_process > 0:
        raise WorkloadError("sending messages needs at least two processes")
    rng = random.Random(seed)
    hot: list[str] = []
    if hotspot_share > 0:
        count = max(1, round(hotspot_share * processes))
        hot = sorted(rng.sample(names, count))
    hot_set = set(hot)
    cold = [n for n in names if n not in hot_set]
    workload = Workload(processes=names)
    for sender in names:
        plan: list[PlannedSend] = []
        hot_others = [n for n in hot if n != sender]
        cold_others = [n for n in cold if n != sender]
        others = [n for n in names if n != sender]
        for k in range(messages_per_process):
            if broadcast:
                dests = tuple(others)
            elif hot:
                group = hot_others if rng.random() < hotspot_weight else cold_others
                if not group:
                    group = cold_others or hot_others
                dests = (rng.choice(group),)
            else:
                dests = (rng.choice(others),)
            job = 0.0
            if job_fraction > 0 and rng.random() < job_fraction:
                job = max(0.0, rng.gauss(job_ms, job_sd_ms)) if job_sd_ms > 0 else job_ms
            plan.append(PlannedSend(f"{sender}:{k}", sender, dests, (), job))
        workload.sends[sender] = plan
    return workload


def script_from_dict(data: Mapping[str, Any]) -> Workload:
    """A workload from an explicit script.

    ::

        {"processes": ["alice", "bob", "carol"],
         "sends": [
           {"id": "m1", "from": "alice", "to": "carol"},
           {"id": "m2", "from": "alice", "to": "bob", "job_ms": 20},
           {"id": "m3", "from": "bob", "to": ["carol"], "after": ["m2"]}]}

    ``to`` is a name or a list of names; ``after`` names sends that must have been
    delivered at the sender first (so they must be addressed to it); ``job_ms`` is the
    job the message starts at each recipient; ``at_ms`` the earliest time of the send.
    Each process makes its sends in the order listed. ``processes`` is optional (the
    names used, in order of first appearance). ``links`` optionally maps
    ``"source->dest"`` to that link's propagation delay in ms (to contrive races).
    Raises :class:`WorkloadError`.
    """
    if not isinstance(data, Mapping):
        raise WorkloadError("a script must be a JSON object with a 'sends' list")
    raw_sends = data.get("sends")
    if not isinstance(raw_sends, list):
        raise WorkloadError("a script needs a 'sends' list")
    names: list[str] = []
    declared = data.get("processes")
    if declared is not None:
        if not isinstance(declared, list) or not all(isinstance(n, str) and n for n in declared):
            raise WorkloadError("'processes' must be a list of non-empty names")
        names = list(dict.fromkeys(declared))
    sends: list[PlannedSend] = []
    seen: dict[str, PlannedSend] = {}
    for position, item in enumerate(raw_sends):
        where = f"send #{position}"
        if not isinstance(item, Mapping):
            raise WorkloadError(f"{where} must be an object")
        key = str(item.get("id", f"s{position}"))
        if key in seen:
            raise WorkloadError(f"{where}: duplicate id {key!r}")
        sender = item.get("from")
        to = item.get("to")
        if not isinstance(sender, str) or not sender:
            raise WorkloadError(f"{where} ({key}): 'from' must be a process name")
        dests = (to,) if isinstance(to, str) else tuple(to) if isinstance(to, list) else ()
        if not dests or not all(isinstance(d, str) and d for d in dests):
            raise WorkloadError(f"{where} ({key}): 'to' must be a name or a list of names")
        after = item.get("after", [])
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise WorkloadError(f"{where} ({key}): 'after' must be a list of send ids")
        try:
            job = float(item.get("job_ms", 0.0))
            at = float(item.get("at_ms", 0.0))
        except (TypeError, ValueError):
            raise WorkloadError(f"{where} ({key}): job_ms and at_ms must be numbers") from None
        if job < 0 or at < 0:
            raise WorkloadError(f"{where} ({key}): job_ms and at_ms must be >= 0")
        for name in (sender, *dests):
            if name not in names:
                if declared is not None:
                    raise WorkloadError(f"{where} ({key}): unknown process {name!r}")
                names.append(name)
        planned = PlannedSend(key, sender, tuple(dict.fromkeys(dests)), tuple(after), job, at)
        seen[key] = planned
        sends.append(planned)
    for planned in sends:
        for dep in planned.after:
            if dep not in seen:
                raise WorkloadError(f"send {planned.key}: 'after' names unknown send {dep!r}")
            if planned.sender not in seen[dep].dests:
                raise WorkloadError(
                    f"send {planned.key}: waits for {dep!r}, which is not addressed to "
                    f"{planned.sender!r} and so is never delivered there"
                )
    if len(names) < 1:
        raise WorkloadError("a script needs at least one process")
    links: dict[tuple[str, str], float] = {}
    raw_links = data.get("links", {})
    if not isinstance(raw_links, Mapping):
        raise WorkloadError("'links' must map 'source->dest' to a delay in ms")
    for spec, value in raw_links.items():
        source, _, dest = str(spec).partition("->")
        if source not in names or dest not in names:
            raise WorkloadError(f"link {spec!r}: expected 'source->dest' with known processes")
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise WorkloadError(f"link {spec!r}: the delay must be a number >= 0")
        links[(source, dest)] = float(value)
    workload = Workload(processes=names, sends={n: [] for n in names}, link_delays=links)
    for planned in sends:
        workload.sends[planned.sender].append(planned)
    return workload


def load_script(path: str | Path) -> Workload:
    """Read a JSON script file (see :func:`script_from_dict`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise WorkloadError(f"cannot read script {path}: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise WorkloadError(f"script {path} is not JSON: {error}") from None
    return script_from_dict(data)

