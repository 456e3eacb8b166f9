"""State transfer to a newcomer, without I/O: the newcomer's gate (:class:`NewcomerState`),
the members' cuts (:class:`Cuts`) and both sides at one member (:class:`StateTransfer`).
The rules are in docs/sessions.md, "State transfer".

Why the recent ids suffice: a message addressed to the newcomer was sent after its sender
saw the join, so a provider that delivered it before its snapshot did so among its most
recent deliveries.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcomm.core.messages import (
    ReceivedMessage,
    SentMessage,
    Withdrawn,
    received_unchecked,
)
from groupcomm.core.node import ProtocolNode
from groupcomm.core.session_messages import (
    SESSION_TRAFFIC,
    JoinMarker,
    Snapshot,
    StatePart,
    StateReply,
    StateRequest,
)
from groupcomm.protocol.actions import Out
from groupcomm.protocol.port import ApplicationPort
from groupcomm.protocol.session_events import (
    SessionEvent,
    StateInstalled,
    StateRequested,
    StateUnavailable,
)
from groupcomm.protocol.state_parts import StateParts
from groupcomm.wire.parts import PartsError
from groupcomm.wire.payload import dump_payload, load_payload

log = logging.getLogger(__name__)

#: seconds a newcomer waits for one member's answer before asking the next
STATE_TIMEOUT = 10.0
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
        """A member left: its marker will not come; a newcomer that left asks nothing."""
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


@dataclass
class Ask:
    """Send a :class:`StateRequest` to ``member``."""

    member: str


@dataclass
class Install:
    """Install ``reply`` (if any), deliver ``replay`` (the messages the session's store
    kept after its snapshot) then ``release``, mark ``skipped`` as seen."""

    reply: StateReply | None
    release: list[ReceivedMessage] = field(default_factory=list)
    skipped: list[ReceivedMessage] = field(default_factory=list)
    source: str | None = None
    replay: list[ReceivedMessage] = field(default_factory=list)


#: the source of a state the session server's store gave
STORE = "store"


class NewcomerState:
    """The newcomer's side: whom to ask, what waits, what the snapshot reflects."""

    def __init__(self, timeout: float = STATE_TIMEOUT) -> None:
        self.timeout = timeout
        #: True from the start until a snapshot is installed or nobody can give one
        self.waiting = True
        self._candidates: list[str] = []
        #: the member asked now
        self.asked: str | None = None
        self._deadline = 0.0
        self._held: list[ReceivedMessage] = []
        self._reflected: frozenset[str] = frozenset()
        #: the store's messages after its snapshot, delivered once it is installed
        self._replay: list[ReceivedMessage] = []

    def joined(self, me: str, members: Sequence[str], now: float,
               stored: bool = False) -> list[Ask | Install]:
        """This client joined (or came back as a new incarnation): ask the others,
        longest-standing first; ``stored``: the server sends its stored state (no other
        member holds the session's state: they are newcomers waiting for theirs, or
        there are none), wait for it."""
        self.waiting = True
        self._candidates = [m for m in members if m != me]
        self._replay = []
        if stored:
            self.asked = STORE
            self._deadline = now + self.timeout
            return []
        return self._ask_next(now)

    def stored(self, reply: StateReply, replay: list[ReceivedMessage]) -> list[Install]:
        """The server's stored state (a snapshot and the messages after it)."""
        if self.asked != STORE or not self.waiting:
            return []  # not waited for: this client got, or is getting, a member's
        if not reply.available:
            self.asked = None
            return [self._finish(None)]
        self._reflected = frozenset((*reply.reflected, *(m.app_message_id for m in replay)))
        self._replay = replay
        return [self._finish(reply)]

    def deliver(self, message: ReceivedMessage) -> str:
        """``"hold"`` (no snapshot yet), ``"skip"`` (the snapshot reflects it) or
        ``"deliver"``."""
        if self.waiting:
            self._held.append(message)
            return "hold"
        if message.app_message_id in self._reflected:
            return "skip"
        return "deliver"

    def reply(self, sender: str, reply: StateReply, now: float) -> list[Ask | Install]:
        if sender != self.asked or not self.waiting:
            return []  # a late answer from a member asked before: the first one counts
        if not reply.available:
            log.info("%s has no application state to give; asking the next member", sender)
            return self._ask_next(now)
        self._reflected = frozenset(reply.reflected)
        return [self._finish(reply)]

    def progress(self, sender: str, now: float) -> None:
        """Part of ``sender``'s state came: the member asked is answering, its time
        starts again (a large state takes more than one message)."""
        if self.waiting and sender == self.asked:
            self._deadline = now + self.timeout

    def member_left(self, member: str, now: float) -> list[Ask | Install]:
        self._candidates = [m for m in self._candidates if m != member]
        if self.waiting and member == self.asked:
            return self._ask_next(now)
        return []

    def server_restarted(self, me: str, members: Sequence[str], now: float,
                         stored: bool = False) -> list[Ask | Install]:
        """Back after a server restart, which may have lost the request or its answer:
        ask the same member again; one that waited for the stored state waits for it
        again when the server sends it (``stored``), else asks the members."""
        if not self.waiting or self.asked is None:
            return []
        if self.asked == STORE:
            self._deadline = now + self.timeout
            if stored:
                return []
            self._candidates = [m for m in members if m != me]
            return self._ask_next(now)
        self._deadline = now + self.timeout
        return [Ask(self.asked)]

    def tick(self, now: float) -> list[Ask | Install]:
        if self.waiting and self.asked is not None and now >= self._deadline:
            log.warning("%s did not send the application state within %gs; asking the next "
                        "member", self.asked, self.timeout)
            return self._ask_next(now)
        return []

    def _ask_next(self, now: float) -> list[Ask | Install]:
        if self.asked == STORE:
            self.asked = None
        if self.asked in self._candidates:
            self._candidates.remove(self.asked)
        if not self._candidates:
            if self.asked is not None:
                log.warning("no member could give the application state; going on without "
                            "it (every message addressed to this client is delivered)")
            return [self._finish(None)]
        self.asked = self._candidates[0]
        self._deadline = now + self.timeout
        return [Ask(self.asked)]

    def _finish(self, reply: StateReply | None) -> Install:
        self.waiting = False
        source = self.asked if reply is not None else None
        self.asked = None
        held, self._held = self._held, []
        reflected = self._reflected
        replay, self._replay = self._replay, []
        return Install(reply, [m for m in held if m.app_message_id not in reflected],
                       [m for m in held if m.app_message_id in reflected], source, replay)


class Member(Protocol):
    """What state transfer uses of its :class:`~groupcomm.protocol.client.ClientProtocol`."""

    name: str
    node: ProtocolNode
    port: ApplicationPort
    out: Out
    stats: Counter[str]
    now: float

    def emit(self, event: SessionEvent) -> None: ...

    def drain(self) -> None: ...

    def command(self, op: str, fields: dict[str, Any]) -> None: ...

    def take_inputs(self, markers: int = 0) -> None: ...


class StateTransfer:
    """State transfer at one member. ``provider`` gives a snapshot (or a :class:`Snapshot`),
    ``consumer`` installs one; without a consumer a member asks for nothing, without a
    provider it answers that it has nothing to give."""

    def __init__(self, member: Member, *, provider: Callable[[], Any] | None,
                 consumer: Callable[[Any], None] | None, timeout: float) -> None:
        self._member = member
        self._provider = provider
        self._consumer = consumer
        #: the newcomer's side, when the application installs snapshots
        self.gate = NewcomerState(timeout) if consumer is not None else None
        self._cuts = Cuts()
        #: newcomers whose snapshot waits until the application has caught up
        self.deferred: list[str] = []
        self._system_sent = 0
        #: the store's snapshot request waiting until the application has caught up
        self._store_request: int | None = None
        #: the session server keeps this session (docs/storage.md)
        self.stored_session = False
        #: the store had something of the session when this client joined
        self._kept = False
        #: this client holds the session's state: it installed it, or there was nothing
        #: to install. In a kept session, one that does not gives no snapshot (it would
        #: replace the kept history with less)
        self.holds = False
        #: told whether it holds it (the client says so when it joins again)
        self.on_holds: Callable[[bool], None] = lambda holds: None
        #: states larger than a frame, both ways (the communicator sets its part size
        #: under the frame limit, and its max_state)
        self.parts = StateParts()

    def _set_holds(self, holds: bool) -> None:
        self.holds = holds
        self.on_holds(holds)

    @property
    def waiting(self) -> bool:
        return self.gate is not None and self.gate.waiting

    # -- as a newcomer -------------------------------------------------------------------------
    def joined(self, members: Sequence[str], now: float, stored: bool = False, *,
               stored_session: bool = False, kept: bool = False,
               changed: bool = False) -> None:
        """This client joined; ``stored_session``: the server keeps the session,
        ``kept``: it had something of it, ``stored``: it sends that; ``changed``: what
        this client has is of another store generation."""
        self.stored_session = stored_session
        # back as a new incarnation, it still has the state it held (the transfer
        # that follows may find nobody to give one)
        self._kept = stored_session and kept and not (self.holds and not changed)
        if self.gate is None:
            self._set_holds(not self._kept)
        else:
            self._set_holds(False)
            self._member.out.state_pending()
            self._carry_out(self.gate.joined(self._member.node.name, members, now, stored))

    def stored(self, notice: Mapping[str, Any]) -> None:
        """The session server's stored state (the ``stored_state`` notice)."""
        if self.gate is None or not self.gate.waiting:
            return
        reply, replay = stored_reply(notice, self._member.node)
        if reply.available:
            self._member.stats["stored_messages_replayed"] += len(replay)
        self._carry_out(self.gate.stored(reply, replay))

    def member_left(self, member: str, now: float) -> None:
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.member_left(member, now))
        self.answer(self._cuts.member_left(member))

    def server_restarted(self, members: Sequence[str], now: float,
                         stored: bool = False) -> None:
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.server_restarted(self._member.node.name, members, now,
                                                       stored))

    def tick(self, now: float) -> None:
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.tick(now))

    def deliver(self, message: ReceivedMessage) -> bool:
        """Whether the gate takes ``message`` (held, or seen through the snapshot)."""
        gate = self.gate
        if gate is None:
            return False
        verdict = gate.deliver(message)
        if verdict == "skip":
            self._seen(message)
        return verdict != "deliver"

    def _seen(self, message: ReceivedMessage) -> None:
        """``message`` is reflected by the snapshot: its clock and trace, not the app."""
        self._member.stats["delivered_through_state"] += 1
        self._member.node.application_delivered(message)

    def _carry_out(self, actions: list[Ask | Install]) -> None:
        member = self._member
        for action in actions:
            if isinstance(action, Ask):
                member.stats["state_requests"] += 1
                member.emit(StateRequested(member=member.node.name, asked=action.member))
                self._send_system(StateRequest(), action.member)
                continue
            if action.reply is not None and self._consumer is not None:
                # what the snapshot holds happened before this member's next sends
                member.node.merge_application_clock(action.reply.clock)
                try:
                    if action.reply.state is not None or action.source != STORE:
                        self._consumer(action.reply.state)
                    member.stats["state_installed"] += 1
                except Exception:
                    log.exception("%s: the state consumer raised; going on without the "
                                  "snapshot", member.name)
            for message in action.replay:  # the store's messages after its snapshot
                member.node.merge_application_clock(message.vc)
                member.stats["delivered"] += 1
                member.port.hand_over(message)
            for message in action.skipped:
                self._seen(message)
            for message in action.release:
                member.stats["delivered"] += 1
                member.port.hand_over(message)
            member.out.state_settled()
            source = action.source
            self._set_holds(action.reply is not None or not self._kept)
            if self.stored_session and action.reply is not None and source != STORE:
                member.command("state", {})  # the store may now ask it for snapshots
            if self.deferred:
                self.answer_deferred()
            member.emit(StateInstalled(member=member.node.name, source=source)
                        if source is not None else StateUnavailable(member=member.node.name))

    # -- as a member ---------------------------------------------------------------------------
    def newcomer(self, newcomer: str, members: Sequence[str]) -> None:
        """``newcomer`` joined and asks for state: mark, to every member, the end of what
        this member sent before (tagged into the input queue, behind earlier sends)."""
        self._cuts.newcomer(newcomer, members)
        member = self._member
        node = member.node
        try:
            markers = node.tag_sends(JoinMarker(newcomer), list(node.members))
        except Exception as error:  # the module cannot carry it: the cut is not exact
            log.warning("%s: cannot mark the join of %s (%s); a snapshot may miss messages "
                        "sent before it", member.name, newcomer, error)
            return
        member.stats["join_markers"] += 1
        member.take_inputs(markers=len(markers))

    def marker(self, marker: JoinMarker, sender: str) -> None:
        self.answer(self._cuts.marker(marker.newcomer, sender))

    def answer(self, newcomers: list[str]) -> None:
        for newcomer in newcomers:
            if newcomer in self._member.node.member_set:
                self._give_snapshot(newcomer)

    def _give_snapshot(self, newcomer: str) -> None:
        if self._member.port.caught_up and not self.waiting:
            self._send_reply(self._snapshot(newcomer), newcomer)
        elif newcomer not in self.deferred:
            self._member.stats["state_answers_deferred"] += 1
            self.deferred.append(newcomer)
            self._caught_up_meanwhile()

    def awaits_catching_up(self) -> bool:
        """Whether a snapshot waits for the application to catch up (any thread)."""
        return bool(self.deferred) or self._store_request is not None

    def _caught_up_meanwhile(self) -> None:
        """After deferring: an acknowledgement that caught up meanwhile saw nothing
        deferred and posted nothing (the two writes race; each side checks the other's)."""
        if self._member.port.caught_up and not self.waiting:
            self.answer_deferred()

    def answer_deferred(self) -> None:
        if self._store_request is not None and self._member.port.caught_up:
            self.store_request(self._store_request)
        if self.deferred and self._member.port.caught_up:
            waiting, self.deferred = self.deferred, []
            self.answer(waiting)

    def store_request(self, request: int) -> None:
        """The server's store asks for a snapshot: the same as a newcomer's, once the
        application has caught up, sent to the server (docs/storage.md)."""
        member = self._member
        if not member.port.caught_up and not self.waiting:
            self._store_request = request
            self._caught_up_meanwhile()
            return
        self._store_request = None
        reply = self._snapshot("the session store")
        fields: dict[str, Any] = {"request": request, "available": reply.available}
        if reply.available:
            try:
                fmt, data = dump_payload(reply.state)
            except Exception as error:  # the state cannot travel: the store keeps none
                log.warning("%s: the snapshot for the session store cannot be serialized "
                            "(%s)", member.name, error)
                fields["available"] = False
            else:
                fields.update(fmt=fmt, data=data, reflected=list(reply.reflected),
                              clock=[list(pair) for pair in reply.clock])
        member.stats["store_snapshots_given" if fields["available"]
                     else "store_snapshots_declined"] += 1
        member.command("snapshot", fields)

    def on_system(self, message: ReceivedMessage) -> bool:
        user = message.user_message
        if isinstance(user, StateRequest):
            if self._cuts.request(message.sender):
                self._give_snapshot(message.sender)
            return True
        if isinstance(user, StateReply):
            if user.parts:  # the state follows in parts
                self._announced(message.sender, user)
            elif self.gate is not None:
                self._carry_out(self.gate.reply(message.sender, user, self._member.now))
            return True
        if isinstance(user, StatePart):
            self._part(message.sender, user)
            return True
        return False

    # -- a state larger than a frame -------------------------------------------------------
    def _send_reply(self, reply: StateReply, newcomer: str) -> None:
        """``reply``, its state in parts when one message could not carry it."""
        messages = self.parts.outgoing(reply)
        if len(messages) > 1:
            self._member.stats["state_parts_sent"] += len(messages) - 1
        for message in messages:
            self._send_system(message, newcomer)

    def _announced(self, sender: str, reply: StateReply) -> None:
        gate = self.gate
        if gate is None or not gate.waiting or sender != gate.asked:
            return  # not waited for: its parts are left aside as they come
        try:
            self.parts.announced(sender, reply)
        except PartsError as error:
            self._unusable(sender, error)
            return
        gate.progress(sender, self._member.now)

    def _part(self, sender: str, part: StatePart) -> None:
        if self.gate is None or not self.parts.expects(sender):
            return
        try:
            whole = self.parts.part(sender, part)
        except Exception as error:  # noqa: BLE001 - parts that do not make a state
            self._unusable(sender, error)
            return
        self._member.stats["state_parts_received"] += 1
        if whole is None:
            self.gate.progress(sender, self._member.now)
            return
        self._carry_out(self.gate.reply(sender, whole, self._member.now))

    def _unusable(self, sender: str, error: Exception) -> None:
        """``sender``'s state in parts cannot be installed: one line, counted, and the
        next member is asked."""
        self.parts.forget(sender)
        member = self._member
        member.stats["states_refused"] += 1
        log.error("%s: the state from %s cannot be taken: %s; asking the next member",
                  member.name, sender, error)
        if self.gate is not None:
            self._carry_out(self.gate.reply(sender, StateReply(available=False), member.now))

    def _snapshot(self, newcomer: str) -> StateReply:
        member = self._member
        recent = member.port.recent
        if self._provider is None or recent is None or self.waiting:
            return StateReply(available=False)
        if self.stored_session and not self.holds:
            log.info("%s has not the session's state (the store keeps more): %s gets no "
                     "snapshot from here", member.name, newcomer)
            return StateReply(available=False)
        try:
            value = self._provider()
        except Exception:
            log.exception("%s: the state provider raised; %s gets no snapshot from here",
                          member.name, newcomer)
            return StateReply(available=False)
        state, own = ((value.state, tuple(value.reflects)) if isinstance(value, Snapshot)
                      else (value, ()))
        member.stats["state_given"] += 1
        # read after the provider: an own send racing it is covered rather than missed
        with member.node.clock_lock:
            clock = tuple(member.node.application_clock_locked().items())
            reflected = (*recent, *own)
        return StateReply(available=True, state=state, reflected=reflected, clock=clock)

    def _send_system(self, obj: Any, dest: str) -> None:
        self._system_sent += 1
        member = self._member
        node = member.node
        node.submit(SentMessage(
            application_name=node.application, session_name=node.session,
            user_message=obj, message_id=f"{node.name}~state{self._system_sent}",
            sender=node.name, destinations=(dest,)))
        member.drain()


def stored_reply(notice: Mapping[str, Any],
                 node: ProtocolNode) -> tuple[StateReply, list[ReceivedMessage]]:
    """The state reply and the messages to replay that a verified ``stored_state``
    notice carries (the session layer's own messages left out); a malformed one is no
    state (logged)."""
    if notice.get("available") is not True:
        refused = notice.get("refused")
        if isinstance(refused, str):  # the store has the session, and says why not
            log.warning("%s: no state from the session store: %s", node.name, refused[:300])
        return StateReply(available=False), []
    try:
        state = None
        if "fmt" in notice:
            state = load_payload(notice["fmt"], notice["data"])
        replay = []
        for message_id, sender, fmt, payload, vc in notice.get("messages", []):
            user = load_payload(fmt, payload)
            if type(user) in SESSION_TRAFFIC or type(user) is Withdrawn:
                continue  # a join marker (the session layer's), or a payload that could
                # not travel (its sender's stand-in): not the application's
            replay.append(received_unchecked(
                node.application, node.session, user, str(message_id), str(sender),
                tuple((str(k), int(v)) for k, v in vc), "normal", ""))
        reply = StateReply(available=True, state=state,
                           reflected=tuple(str(r) for r in notice.get("reflected", [])),
                           clock=tuple((str(k), int(v)) for k, v in notice.get("clock", [])))
    except Exception as error:  # the server's bytes, verified, yet not what it should send
        log.error("%s: the stored state from the server is malformed (%s); going on "
                  "without it", node.name, error)
        return StateReply(available=False), []
    return reply, replay
