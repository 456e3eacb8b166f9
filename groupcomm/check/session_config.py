"""What the session checker (:mod:`groupcomm.check.session_rules`) is asked, the
known-bad registries and state transfers it is meant to catch (described in
docs/check_results.md), and what it answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groupcomm.protocol.registry import Action, Forward, SessionRegistry
from groupcomm.protocol.state_transfer import Ask, Cuts, Install, NewcomerState

__all__ = ["REGISTRIES", "TRANSFERS", "SessionCheckConfig", "SessionCheckResult"]


class _ReusesIncarnation(SessionRegistry):
    """Known-bad: forgets a name's incarnation when it leaves."""

    def _remove(self, session: Any, member: Any, why: str, direct: Any,
                out: list[Action]) -> None:
        self.incarnations.pop((session.application, session.name, member.name), None)
        super()._remove(session, member, why, direct, out)


class _RelaysBeforeJoin(SessionRegistry):
    """Known-bad: hands a member the frames kept for it before telling it (and the
    others) who the members are."""

    def _admit(self, join: Any, out: list[Action]) -> None:
        mine: list[Action] = []
        super()._admit(join, mine)
        forwards = [a for a in mine if isinstance(a, Forward)]
        rest = [a for a in mine if not isinstance(a, Forward)]
        out.extend(rest[:1] + forwards + rest[1:])  # welcome, frames, then the notices


#: registry variant name -> class (the first is the real one)
REGISTRIES: dict[str, type[SessionRegistry]] = {
    "correct": SessionRegistry,
    "reuses-incarnation": _ReusesIncarnation,
    "relays-before-join": _RelaysBeforeJoin,
}


class _CutsAtOnce(Cuts):
    """Known-bad: answers a newcomer's request at once, whatever markers it awaits."""

    def request(self, newcomer: str) -> bool:
        super().request(newcomer)
        if newcomer in self.deferred:
            self.deferred.remove(newcomer)
        return True


class _AsksOnce(NewcomerState):
    """Known-bad: after a server restart, does not ask again."""

    def server_restarted(self, me: str, members: Sequence[str], now: float,
                         stored: bool = False) -> list[Ask | Install]:
        return []


#: state-transfer variant name -> (the members' cut, the newcomer's side); the first is
#: the real one
TRANSFERS: dict[str, tuple[type[Cuts], type[NewcomerState]]] = {
    "correct": (Cuts, NewcomerState),
    "answers-before-cut": (_CutsAtOnce, NewcomerState),
    "asks-once": (Cuts, _AsksOnce),
}


@dataclass(frozen=True)
class SessionCheckConfig:
    """The bounds of one exhaustive run."""

    processes: int = 2
    #: names that start after the others (any time)
    late: tuple[str, ...] = ()
    #: names that may leave (once)
    leaving: tuple[str, ...] = ()
    #: names that may crash and be restarted under the same name (once)
    restarting: tuple[str, ...] = ()
    #: application messages each start of a client may send (each to every member it
    #: knows)
    messages: int = 1
    #: the names that send (default: every one)
    senders: tuple[str, ...] | None = None
    #: how many seconds may pass (heartbeats, timeouts and takeovers need them)
    ticks: int = 0
    server_restart: bool = False
    direct: bool = False
    registry: str = "correct"
    #: the causality module of every member
    protocol: str = "none"
    #: every client's application gives snapshots (state transfer) ...
    state: bool = False
    #: ... and these install them, asking as newcomers (None: every client)
    asking: tuple[str, ...] | None = None
    transfer: str = "correct"
    #: seconds a newcomer waits for one member's snapshot (None: longer than any run,
    #: so that one never coming is seen)
    state_timeout: float | None = None
    max_states: int = 2_000_000

    def names(self) -> list[str]:
        return [f"p{i}" for i in range(1, self.processes + 1)]

    def validate(self) -> None:
        """Raise ValueError naming the bad bound."""
        if not 1 <= self.processes <= 4:
            raise ValueError(f"processes must be 1 to 4, not {self.processes}")
        names = self.names()
        for role, chosen in (("late", self.late), ("leaving", self.leaving),
                             ("restarting", self.restarting), ("senders", self.senders or ()),
                             ("asking", self.asking or ())):
            unknown = [n for n in chosen if n not in names]
            if unknown:
                raise ValueError(f"{role}: {', '.join(unknown)} is not one of "
                                 f"{', '.join(names)}")
        if set(self.late) >= set(names):
            raise ValueError("at least one process must start first")
        if self.messages < 0 or self.ticks < 0:
            raise ValueError("messages and ticks must be >= 0")
        if self.state_timeout is not None and self.state_timeout <= 0:
            raise ValueError("the state timeout must be > 0 seconds")
        for what, value, known in (("registry", self.registry, REGISTRIES),
                                   ("state transfer", self.transfer, TRANSFERS)):
            if value not in known:
                raise ValueError(f"{what} {value!r} is not one of {', '.join(known)}")


@dataclass
class SessionCheckResult:
    """What one run found."""

    config: SessionCheckConfig
    result: str  # ok | violation | incomplete
    states: int
    transitions: int
    depth: int
    final_states: int
    unsettled: int
    violation: str | None = None
    counterexample: list[str] = field(default_factory=list)

    def summary(self) -> str:
        head = (f"{self.result}: {self.states:,} states, {self.transitions:,} transitions, "
                f"depth {self.depth}, {self.final_states:,} quiescent states judged, "
                f"{self.unsettled:,} left unsettled by the bounds")
        if self.violation is None:
            return head
        steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(self.counterexample, 1))
        return f"{head}\n{self.violation}\ncounterexample ({len(self.counterexample)} " \
               f"steps):\n{steps}"
