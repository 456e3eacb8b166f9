"""In-memory causal-delivery checks on trace records (the definitions of
docs/trace_schema.md): the small, dependency-free version of the Spark analysis
(:mod:`trace_analysis`) that unit tests, the simulator and the model checker run. For
the send of m by s, m → m′ iff ``vc(send m)[s] <= vc(send m′)[s]``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the kinds of finding a verdict lists, in the order :meth:`Verdict.as_dict` counts them
_KINDS = ("causal_violations", "fifo_violations", "undelivered", "duplicates", "unexpected")


@dataclass
class Verdict:
    """What the checks found; ``ok`` when nothing is wrong."""

    messages: int = 0
    deliveries: int = 0
    #: (process, m, m′): m → m′, both delivered at process, m′ first
    causal_violations: list[tuple[str, str, str]] = field(default_factory=list)
    fifo_violations: list[tuple[str, str, str]] = field(default_factory=list)
    #: (message, destination) never delivered there
    undelivered: list[tuple[str, str]] = field(default_factory=list)
    #: (process, message) delivered more than once
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    #: deliveries of messages nobody sent, or at a process not among their destinations
    unexpected: list[tuple[str, str]] = field(default_factory=list)

    @property
    def safe(self) -> bool:
        """No causal violation, duplicate or unexpected delivery."""
        return not (self.causal_violations or self.duplicates or self.unexpected)

    @property
    def ok(self) -> bool:
        """Safe, and everything sent was delivered."""
        return self.safe and not self.undelivered

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "deliveries": self.deliveries,
                **{kind: len(getattr(self, kind)) for kind in _KINDS}}


def check_records(records: Iterable[Mapping[str, Any]], *, limit: int = 1000) -> Verdict:
    """Check ``send`` / ``deliver`` records (any order across processes; each process's
    records in its own order). At most ``limit`` examples are listed per kind."""
    sends: dict[str, tuple[str, int, tuple[str, ...]]] = {}
    clocks: dict[str, Mapping[str, int]] = {}
    deliveries: dict[str, list[str]] = defaultdict(list)
    for record in records:
        event = record.get("event")
        if event == "send":
            msg, vc, sender = record["msg"], record["vc"], record["process"]
            if msg not in sends:
                sends[msg] = (sender, vc[sender], tuple(record["dests"]))
                clocks[msg] = vc
        elif event == "deliver":
            deliveries[record["process"]].append(record["msg"])
    verdict = Verdict(messages=len(sends))

    def note(found: list[Any], item: tuple[str, ...]) -> None:
        if len(found) < limit:
            found.append(item)

    delivered_at: dict[str, set[str]] = defaultdict(set)
    for process, order in deliveries.items():
        seen: set[str] = set()
        firsts: list[str] = []
        for msg in order:
            verdict.deliveries += 1
            if msg in seen:
                note(verdict.duplicates, (process, msg))
                continue
            seen.add(msg)
            if msg not in sends or process not in sends[msg][2]:
                note(verdict.unexpected, (process, msg))
            else:
                firsts.append(msg)
        delivered_at[process] = seen
        # m delivered at position j violates with every earlier m′ such that m → m′,
        # i.e. vc(m′)[sender(m)] >= vc(m)[sender(m)]
        for j, msg in enumerate(firsts):
            sender, own, _ = sends[msg]
            for earlier in firsts[:j]:
                if clocks[earlier].get(sender, 0) >= own:
                    note(verdict.causal_violations, (process, msg, earlier))
                    if sends[earlier][0] == sender:
                        note(verdict.fifo_violations, (process, msg, earlier))
    for msg, (_, _, dests) in sends.items():
        for dest in dests:
            if msg not in delivered_at.get(dest, ()):
                note(verdict.undelivered, (msg, dest))
    return verdict
