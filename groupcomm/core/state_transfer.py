"""State transfer to a newcomer, without I/O.

A member that joins a session that is already under way usually needs the application's
state (the conversation so far, the text being edited), not only the messages sent after
it joined. The application gives its communicator a *provider* (returns a snapshot of the
application state) and a *consumer* (installs one). A newcomer asks one member for a
snapshot (the longest-standing one first); that member calls its provider between two
deliveries and answers with the snapshot and the ids of the messages its application had
been handed (:data:`REFLECTED_IDS` most recent; application-level ids, so that the copies
of a send that ``mfss`` and ``cykas`` split into unicasts count as one message). The newcomer holds every delivery from
its join until the snapshot is installed, then delivers exactly the messages the
snapshot does not already reflect: none twice, none missing.

Why the recent ids suffice: a message addressed to the newcomer was sent after its sender
saw the join, so the provider, if it delivered it before its snapshot, did so shortly
before, among its most recent deliveries. Messages skipped because the snapshot reflects
them still advance the application clock (their tags stay exact) and are traced as
delivered: the application has seen them, through the snapshot.

**The cut.** A snapshot must also hold every message sent to the provider before the
join, including those still on their way when the newcomer asks (they are not addressed
to the newcomer, which will never get them). So every member that sees the join of a
newcomer that asks for state sends every member, itself included, a :class:`JoinMarker`
through its causality module, after everything it sent before (a module delivers one
sender's messages in order, and a sender-side module sends them in order). A member
answers the newcomer's request only once it has delivered the marker of every member
that was there at the join (:class:`Cuts`): everything they sent it before the join has
been delivered then, and is in its application's state. Markers are consumed by the
communicators, never handed to applications.

If the asked member has no provider, fails, leaves or does not answer within the
timeout, the next member is asked; when nobody can answer, the newcomer goes on without
a snapshot (a warning says so) and delivers everything addressed to it. A newcomer back
after a server restart asks the same member again: the request, or its answer, may have
been inside the server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from groupcomm.core.messages import ReceivedMessage, SystemMessage

log = logging.getLogger(__name__)

#: ids of the most recent deliveries a snapshot carries
REFLECTED_IDS = 10_000
#: seconds a newcomer waits for one member's answer before asking the next
STATE_TIMEOUT = 10.0


@dataclass(frozen=True)
class JoinMarker:
    """Sent by a member, to every member, once it has seen ``newcomer`` join: what it
    sent before comes before this (see the module docstring, the cut)."""

    newcomer: str


#: newcomers whose cut a member keeps track of at once (the oldest are forgotten)
MAX_CUTS = 256


class Cuts:
    """A member's side of the cut: per newcomer, which members' markers it has
    delivered, and whether the newcomer's request may be answered."""

    def __init__(self) -> None:
        #: newcomer -> members whose marker is still awaited
        self._awaited: dict[str, set[str]] = {}
        #: newcomers whose request waits for the cut
        self.deferred: list[str] = []

    def newcomer(self, newcomer: str, members: Sequence[str]) -> None:
        """``newcomer`` joined, asking for state; ``members`` were there with it."""
        self._awaited[newcomer] = {m for m in members if m != newcomer}
        if len(self._awaited) > MAX_CUTS:
            del self._awaited[next(iter(self._awaited))]

    def marker(self, newcomer: str, sender: str) -> list[str]:
        """``sender``'s marker for ``newcomer`` was delivered; returns the newcomers
        whose deferred request may now be answered."""
        awaited = self._awaited.get(newcomer)
        if awaited is not None:
            awaited.discard(sender)
        return self._ready()

    def request(self, newcomer: str) -> bool:
        """True when the request of ``newcomer`` may be answered now; else it waits."""
        if not self._awaited.get(newcomer):
            self._awaited.pop(newcomer, None)
            return True
        if newcomer not in self.deferred:
            self.deferred.append(newcomer)
        return False

    def member_left(self, member: str) -> list[str]:
        """A member left: its marker will not come (what it sent before the join is
        lost with it, or was delivered); a newcomer that left asks nothing more."""
        self._awaited.pop(member, None)
        if member in self.deferred:
            self.deferred.remove(member)
        for awaited in self._awaited.values():
            awaited.discard(member)
        return self._ready()

    def _ready(self) -> list[str]:
        ready = [n for n in self.deferred if not self._awaited.get(n)]
        for newcomer in ready:
            self.deferred.remove(newcomer)
            self._awaited.pop(newcomer, None)
        return ready


@dataclass(frozen=True)
class Snapshot:
    """What a provider may return instead of the bare state: the state, and the
    application-level ids of this member's own sends that it holds (the messages it was
    handed are known to the communicator already)."""

    state: Any
    reflects: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StateRequest(SystemMessage):
    """A newcomer asks for the application state."""

    travels_pickled: ClassVar[bool] = True
    kind: str = "state_request"


@dataclass(frozen=True, slots=True)
class StateReply(SystemMessage):
    """A member's snapshot (``available`` False: it has none to give)."""

    travels_pickled: ClassVar[bool] = True
    available: bool
    state: Any = None
    reflected: tuple[str, ...] = ()
    #: the provider's application clock at the snapshot: the newcomer merges it, so its
    #: tags say that its sends happened after everything the snapshot holds
    clock: tuple[tuple[str, int], ...] = ()
    kind: str = "state_reply"


@dataclass
class Ask:
    """Send a :class:`StateRequest` to ``member``."""

    member: str


@dataclass
class Install:
    """Call the consumer with ``state`` (when ``reply`` is not None), then deliver
    ``release`` to the application and mark ``skipped`` as seen (clock and trace)."""

    reply: StateReply | None
    release: list[ReceivedMessage] = field(default_factory=list)
    skipped: list[ReceivedMessage] = field(default_factory=list)
    #: the member whose snapshot this is (None when no member could give one)
    source: str | None = None


class NewcomerState:
    """The newcomer's side: whom to ask, what waits, what the snapshot reflects."""

    def __init__(self, timeout: float = STATE_TIMEOUT) -> None:
        self.timeout = timeout
        #: True from the start until a snapshot is installed or nobody can give one
        self.waiting = True
        self._candidates: list[str] = []
        self._asked: str | None = None
        self._deadline = 0.0
        self._held: list[ReceivedMessage] = []
        self._reflected: frozenset[str] = frozenset()

    @property
    def asked(self) -> str | None:
        return self._asked

    def joined(self, me: str, members: Sequence[str], now: float) -> list[Ask | Install]:
        """This client joined (or came back as a new incarnation): ask the members that
        were there before it, longest-standing first; alone, there is nothing to ask."""
        self.waiting = True
        self._candidates = [m for m in members if m != me]
        return self._ask_next(now)

    def deliver(self, message: ReceivedMessage) -> str:
        """What to do with a message ready for the application: ``"hold"`` (the
        snapshot is not in yet), ``"skip"`` (the snapshot reflects it) or
        ``"deliver"``."""
        if self.waiting:
            self._held.append(message)
            return "hold"
        if message.app_message_id in self._reflected:
            return "skip"
        return "deliver"

    def reply(self, sender: str, reply: StateReply, now: float) -> list[Ask | Install]:
        if sender != self._asked or not self.waiting:
            return []  # a late answer from a member asked before: the first one counts
        if not reply.available:
            log.info("%s has no application state to give; asking the next member", sender)
            return self._ask_next(now)
        self._reflected = frozenset(reply.reflected)
        return [self._finish(reply)]

    def member_left(self, member: str, now: float) -> list[Ask | Install]:
        self._candidates = [m for m in self._candidates if m != member]
        if self.waiting and member == self._asked:
            return self._ask_next(now)
        return []

    def server_restarted(self, now: float) -> list[Ask | Install]:
        """This client is back after a server restart: the request, or the answer, may
        have been inside the server, so the member asked is asked again (an answer to
        the first request, if it comes, counts as well)."""
        if not self.waiting or self._asked is None:
            return []
        self._deadline = now + self.timeout
        return [Ask(self._asked)]

    def tick(self, now: float) -> list[Ask | Install]:
        if self.waiting and self._asked is not None and now >= self._deadline:
            log.warning("%s did not send the application state within %gs; asking the next "
                        "member", self._asked, self.timeout)
            return self._ask_next(now)
        return []

    def _ask_next(self, now: float) -> list[Ask | Install]:
        if self._asked in self._candidates:
            self._candidates.remove(self._asked)
        if not self._candidates:
            if self._asked is not None:
                log.warning("no member could give the application state; going on without "
                            "it (every message addressed to this client is delivered)")
            return [self._finish(None)]
        self._asked = self._candidates[0]
        self._deadline = now + self.timeout
        return [Ask(self._asked)]

    def _finish(self, reply: StateReply | None) -> Install:
        self.waiting = False
        source = self._asked if reply is not None else None
        self._asked = None
        held, self._held = self._held, []
        reflected = self._reflected
        return Install(reply, [m for m in held if m.app_message_id not in reflected],
                       [m for m in held if m.app_message_id in reflected], source)


#: the payload types of the session layer's own messages, which are neither the
#: application's nor the protocol's and are not traced (see ProtocolNode.trace)
SESSION_TRAFFIC: frozenset[type] = frozenset({JoinMarker, StateRequest, StateReply})
