"""The session server's rules, without I/O: :class:`SessionRegistry` takes typed inputs
(:mod:`groupcomm.protocol.registry_events`), each with its connection and ``now``, and
answers with actions for its host (the ZeroMQ server, the in-process hosts, the checker).
The rules (the order of notices, incarnations, taking over a name whose holder is gone,
departures, frames across a restart) are told in docs/sessions.md.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from groupcomm.core.member_ids import member_id, split_member
from groupcomm.protocol.registry_events import (
    Action,
    BadCommand,
    Connection,
    Forward,
    Heartbeat,
    Input,
    Join,
    KeepSnapshot,
    Leave,
    Notify,
    PartReceived,
    Rejected,
    Relay,
    Return,
    SnapshotGiven,
    StateHeld,
    Tick,
    command_input,
    routed_input,
)
from groupcomm.protocol.stall import StallWatch
from groupcomm.wire.frames import ROUTED, FrameCodec, kind_of
from groupcomm.wire.parts import DEFAULT_MAX_STATE, Reassembler
from groupcomm.wire.session import open_session, whole_session
from groupcomm.wire.streams import routed_head

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT", "MAX_PARKED_FRAMES", "MAX_REMEMBERED_NAMES", "PROBE",
    "Action", "Forward", "Heartbeat", "Input", "Join", "Leave", "Member", "Notify",
    "Rejected", "Relay", "Return", "Session", "SessionRegistry", "Tick",
]

log = logging.getLogger(__name__)

#: generous on purpose: a member removed by mistake (starved of CPU) comes back as a new
#: member and loses what was relayed to it meanwhile
DEFAULT_HEARTBEAT_TIMEOUT = 10.0
#: names whose last incarnation the registry remembers (least recently joined forgotten)
MAX_REMEMBERED_NAMES = 100_000
#: frames kept for one destination that has not joined this server yet
MAX_PARKED_FRAMES = 10_000
#: the notice that asks the holder of a name to answer (a heartbeat echoing ``probe``)
PROBE = "probe"
#: the longest a takeover waits for the holder's answer (a person restarting a client waits)
MAX_TAKEOVER_WAIT = 2.0


def _error(conn: Connection, reason: str, detail: str) -> Notify:
    return Notify(conn, "error", {"reason": reason, "detail": detail})


@dataclass
class Member:
    name: str
    conn: Connection
    address: str
    last_seen: float
    incarnation: int = 1
    wants_state: bool = False
    #: the store generation it named when it joined (for the host's store)
    generation: str = ""
    #: it said it holds the session's state when it joined (for the host's store)
    has_state: bool = False

    @property
    def member_id(self) -> str:
        return member_id(self.name, self.incarnation)


@dataclass
class Session:
    """Members of one session of one application, in join order."""

    application: str
    name: str
    members: OrderedDict[str, Member] = field(default_factory=OrderedDict)


@dataclass
class _Takeover:
    """A join waiting for the current holder of its name to answer a probe."""

    join: Join
    probe: int
    due: float


class SessionRegistry:
    """The session server's state and rules; :meth:`handle` never raises for a peer's
    mistake (that is a :class:`Rejected` action)."""

    def __init__(self, *, server_id: str, now: float,
                 heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
                 takeover_wait: float | None = None,
                 authenticated: bool = False, max_state: int = DEFAULT_MAX_STATE,
                 notice_stalls: bool = False) -> None:
        """``notice_stalls``: the host ticks at least every quarter of
        ``heartbeat_timeout`` while it runs, so a longer gap is a stall of the host
        (:mod:`groupcomm.protocol.stall`)."""
        if heartbeat_timeout <= 0:
            raise ValueError(f"heartbeat_timeout must be positive, not {heartbeat_timeout!r}")
        self.server_id = server_id
        self.heartbeat_timeout = heartbeat_timeout
        self.takeover_wait = (min(MAX_TAKEOVER_WAIT, heartbeat_timeout / 2)
                              if takeover_wait is None else takeover_wait)
        #: joins must use the name their per-client key authenticates
        self.authenticated = authenticated
        self.sessions: dict[tuple[str, str], Session] = {}
        self.applications: set[str] = set()
        #: connection -> (application, session, client name)
        self.by_conn: dict[Connection, tuple[str, str, str]] = {}
        #: the last incarnation given to each name of each session (MAX_REMEMBERED_NAMES)
        self.incarnations: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        #: the highest incarnation of each name that a session's store has messages of
        #: (set by the host's store), or that a member coming back has seen (its join's
        #: ``known``): a new process is numbered above it, so that its message ids are
        #: not those of a predecessor that the members or the stored state hold
        self.stored_incarnations: dict[tuple[str, str, str], int] = {}
        #: relayed frames for members that have not joined this server yet:
        #: (app, session, member id) -> [(frame, sender)]
        self.parked: dict[tuple[str, str, str], list[tuple[bytes, str]]] = {}
        self.started_at = now
        self.park_window = 3 * heartbeat_timeout
        #: (app, session, name) -> a join waiting for the name's holder to answer
        self.takeovers: dict[tuple[str, str, str], _Takeover] = {}
        self._probes = 0
        self.relayed = 0
        #: commands larger than a frame (a snapshot for the store), arriving in parts of
        #: at most ``max_state`` bytes in all
        self.parts = Reassembler(max_state)
        #: the host's stalls, noticed from its ticks (None: the host does not say)
        self.stall = StallWatch(heartbeat_timeout) if notice_stalls else None
        #: sessions forgotten after a stall because all their members had moved on
        self.stepped_aside = 0

    def handle(self, event: Input) -> list[Action]:
        """Apply one input; return the actions for the host, in the order to carry out."""
        out: list[Action] = []
        step = _STEPS.get(type(event))
        if step is None:
            raise TypeError(f"not a session registry input: {event!r}")
        step(self, event, out)
        return out

    def handle_frame(self, codec: FrameCodec, conn: Connection, frame: bytes, now: float,
                     user: str | None = None) -> list[Action]:
        """:meth:`handle` the input a frame from ``conn`` asks for, verified by ``codec``: a
        routed frame a relay, a session frame a command (``user``: the name the client's
        key authenticates). Raises ``FrameRejected``, or :class:`BadCommand` naming the op."""
        event, nonce, counter = self.open_frame(codec, conn, frame, now, user)
        return self.handle_opened(codec, event, nonce, counter)

    def open_frame(self, codec: FrameCodec, conn: Connection, frame: bytes, now: float,
                   user: str | None = None) -> tuple[Input, bytes, int]:
        """The first half of :meth:`handle_frame`: the input, the frame's nonce and
        counter (a host that looks at the input before the registry handles it)."""
        body, nonce, counter = codec.open(frame)
        if kind_of(body) == ROUTED:
            return (routed_input(self.by_conn, conn, now, routed_head(body)[0], frame),
                    nonce, counter)
        command = whole_session(self.parts, conn, open_session(body))
        if command is None:
            return PartReceived(conn, now), nonce, counter
        try:
            event = command_input(command, conn, now, user=user)
        except BadCommand as error:
            raise BadCommand(f"{command.get('op')}: {error}") from None
        return event, nonce, counter

    def handle_opened(self, codec: FrameCodec, event: Input, nonce: bytes,
                      counter: int) -> list[Action]:
        """The second half of :meth:`handle_frame`."""
        actions = self.handle(event)
        if type(event) is Relay and any(type(action) is Return for action in actions):
            codec.forget(nonce, counter)  # its sender sends this very frame again
        return actions

    def describe(self, conn: Connection) -> str:
        """Who a connection is, for logs: ``name@session`` or a short connection id."""
        known = self.by_conn.get(conn)
        if known:
            return f"{known[2]}@{known[1]}"
        shown = conn.hex()[:8] if isinstance(conn, bytes) else str(conn)
        return f"connection {shown}"

    def members_of(self, application: str, session: str) -> list[str]:
        """The member ids of a session, in join order (empty if there is none)."""
        found = self.sessions.get((application, session))
        return [m.member_id for m in found.members.values()] if found else []

    def _join(self, join: Join, out: list[Action]) -> None:
        if self.authenticated and join.client != join.user:
            out.append(Rejected("name_not_authenticated", f"join as {join.client!r} with the "
                                f"key of {join.user!r}", self.describe(join.conn)))
            out.append(_error(join.conn, "name_not_authenticated",
                              f"this key belongs to {join.user!r}, not {join.client!r}"))
            return
        session = self.sessions.get((join.application, join.session))
        existing = session.members.get(join.client) if session else None
        if existing is not None:
            if existing.conn == join.conn:
                return  # a retried join from the same connection: already a member
            if self._back_after_stall(join, existing):
                # it moved away while this server was stalled and is back already: the
                # same member on a new connection, taken back under its id
                self._forget(session, existing)
                self._admit(join, out)
                return
            self._ask_holder(join, existing, out)
            return
        previous = self.by_conn.get(join.conn)
        if previous is not None:
            out.append(_error(join.conn, "already_joined",
                              f"this connection already joined as {previous[2]!r}"))
            return
        self._admit(join, out)

    def _admit(self, join: Join, out: list[Action]) -> None:
        app, name = join.application, join.session
        known = self.stored_incarnations
        for other, incarnation in join.known:  # after a restart of this server
            key = (app, name, other)
            if incarnation > known.get(key, 0):
                known[key] = incarnation
        is_new_application = app not in self.applications
        is_new_session = (app, name) not in self.sessions
        session = self.sessions.setdefault((app, name), Session(app, name))
        self.applications.add(app)
        incarnation = self._incarnation_for((app, name, join.client), join.incarnation)
        member = Member(join.client, join.conn, join.address, join.now, incarnation,
                        join.wants_state, join.generation, join.has_state)
        session.members[join.client] = member
        self.by_conn[join.conn] = (app, name, join.client)
        log.info("%s joined %s/%s (%d members)", member.member_id, app, name,
                 len(session.members))
        out.append(Notify(join.conn, "welcome", {
            "client": join.client, "server_id": self.server_id, "incarnation": incarnation}))
        users = [m.member_id for m in session.members.values()]
        addresses = {m.member_id: m.address for m in session.members.values()}
        notice = {"client": member.member_id, "application": app, "session": name,
                  "is_new_session": is_new_session, "is_new_application": is_new_application,
                  "all_users": users, "addresses": addresses,
                  "wants_state": member.wants_state}
        for other in session.members.values():
            out.append(Notify(other.conn, "joined", notice))
        self._unpark(session, member, out)

    def _incarnation_for(self, key: tuple[str, str, str], proposed: int) -> int:
        """``proposed`` (the incarnation a client had) when above the last given here
        (this server restarted and forgot it), else the next one (it was removed)."""
        last = self.incarnations.get(key, 0)
        if proposed == 0:  # a new process: above what the store has of the name too
            last = max(last, self.stored_incarnations.get(key, 0))
        incarnation = proposed if proposed > last else last + 1
        self.incarnations[key] = incarnation
        self.incarnations.move_to_end(key)
        if len(self.incarnations) > MAX_REMEMBERED_NAMES:
            self.incarnations.popitem(last=False)
        return incarnation

    def _ask_holder(self, join: Join, holder: Member, out: list[Action]) -> None:
        if 0 < join.incarnation < holder.incarnation:
            # an older incarnation (it was stalled and a new start took its name): it
            # must not take the name back from its successor
            out.append(_error(join.conn, "replaced", f"this client was replaced by "
                              f"{holder.member_id}, started under its name while this one "
                              "did not answer"))
            return
        key = (join.application, join.session, join.client)
        pending = self.takeovers.get(key)
        if pending is not None:
            if pending.join.conn != join.conn:
                self._refuse_taken(join, "another client is taking it over", out)
            return  # a retried join while its probe is out
        self._probes += 1
        self.takeovers[key] = _Takeover(join, self._probes, join.now + self.takeover_wait)
        log.info("%s asks for the name of %s in %s/%s; asking the holder whether it is "
                 "alive", self.describe(join.conn), holder.member_id, join.application,
                 join.session)
        out.append(Notify(holder.conn, PROBE, {"probe": self._probes}))

    def _refuse_taken(self, join: Join, why: str, out: list[Action]) -> None:
        log.warning("refused client name %r in session %s/%s: %s", join.client,
                    join.application, join.session, why)
        out.append(_error(join.conn, "duplicate_name", f"client name {join.client!r} is taken "
                          f"in session {join.session!r} of application {join.application!r}: "
                          f"{why}; stop that client or pick another name"))

    def _takeovers_due(self, now: float, out: list[Action]) -> None:
        for key, pending in list(self.takeovers.items()):
            if now < pending.due:
                continue
            session = self.sessions[key[:2]]  # a pending takeover has a holder
            holder = session.members[key[2]]
            log.warning("%s in %s/%s did not answer within %gs; a new client takes its "
                        "name over", holder.member_id, key[0], key[1], self.takeover_wait)
            self._remove(session, holder, "was replaced in", None, out)  # admits pending

    def _member(self, event: Leave | Heartbeat | Relay | SnapshotGiven | StateHeld
                ) -> tuple[Session, Member] | None:
        session = self.sessions.get((event.application, event.session))
        member = session.members.get(event.client) if session else None
        if session is None or member is None or member.conn != event.conn:
            return None
        return session, member

    def _leave(self, leave: Leave, out: list[Action]) -> None:
        found = self._member(leave)
        if found is None:
            out.append(Rejected("unknown_peer", "leave from a client that is not a member",
                                self.describe(leave.conn)))
            return
        session, member = found
        if not leave.counts_valid:
            out.append(Rejected("malformed", "leave: direct_frames must map names to counts "
                                ">= 0; ignored", self.describe(leave.conn)))
        out.append(Notify(leave.conn, "left", {"client": member.member_id,
                                               "application": session.application,
                                               "session": session.name}))
        self._remove(session, member, "left", leave.direct_frames, out)

    def _remove(self, session: Session, member: Member, why: str,
                direct_frames: Mapping[str, int] | None, out: list[Action]) -> None:
        """Drop ``member`` and tell the others (with the frames it pushed to each)."""
        del session.members[member.name]
        self.by_conn.pop(member.conn, None)
        log.info("%s %s %s/%s", member.member_id, why, session.application, session.name)
        for other in session.members.values():
            out.append(Notify(other.conn, "left", {
                "client": member.member_id, "application": session.application,
                "session": session.name,
                "direct_frames": (direct_frames or {}).get(other.member_id, 0)}))
        if not session.members:
            del self.sessions[(session.application, session.name)]
        pending = self.takeovers.pop((session.application, session.name, member.name), None)
        if pending is not None and pending.join.conn not in self.by_conn:
            # the holder is gone (left, timed out or did not answer): the newcomer that
            # waited for its name joins now
            self._admit(pending.join, out)

    def _heartbeat(self, beat: Heartbeat, out: list[Action]) -> None:
        found = self._member(beat)
        if found is None:
            # e.g. the server restarted: tell the client so it can join again
            out.append(_error(beat.conn, "not_a_member",
                              "heartbeat from a client that is not a member; join again"))
            return
        member = found[1]
        member.last_seen = beat.now
        if beat.probe is not None:
            key = (beat.application, beat.session, beat.client)
            pending = self.takeovers.get(key)
            if pending is not None and pending.probe == beat.probe:
                del self.takeovers[key]
                self._refuse_taken(pending.join, f"{member.member_id} is running (it "
                                   "answered just now)", out)
        out.append(Notify(beat.conn, "pong", {"server_id": self.server_id}))

    def _relay(self, relay: Relay, out: list[Action]) -> None:
        found = self._member(relay)
        if found is None:
            # e.g. this server restarted: the client sends it again once it rejoined
            out.append(Rejected("unknown_peer", "relay from a client that is not a member; "
                                "returned to it", self.describe(relay.conn)))
            out.append(Return(relay.conn, relay.frame, relay.dests))
            return
        session, member = found
        member.last_seen = relay.now
        sender = member.member_id
        for dest in relay.dests:
            name, incarnation = split_member(dest)
            target = session.members.get(name)
            if target is None and self._park(session, dest, relay, sender):
                continue
            if target is None or target.incarnation != incarnation:
                why = "unknown client" if target is None else (
                    f"client that is now {target.member_id}")
                out.append(Rejected("unknown_peer", f"relay to {why} {dest!r}", sender))
                continue
            self.relayed += 1
            out.append(Forward(target.conn, relay.frame, sender))

    def _snapshot_given(self, given: SnapshotGiven, out: list[Action]) -> None:
        found = self._member(given)
        if found is None:
            out.append(Rejected("unknown_peer", "snapshot from a client that is not a member",
                                self.describe(given.conn)))
            return
        found[1].last_seen = given.now
        out.append(KeepSnapshot(given, found[1].member_id))

    def _state_held(self, held: StateHeld, out: list[Action]) -> None:
        found = self._member(held)
        if found is None:
            out.append(Rejected("unknown_peer", "state news from a client that is not a "
                                "member", self.describe(held.conn)))
            return
        found[1].last_seen = held.now

    def _park(self, session: Session, dest: str, relay: Relay, sender: str) -> bool:
        """Keep a frame for ``dest`` when this server is new and has never met its name
        (members rejoin one by one after a restart); False when not kept."""
        if (session.application, session.name, split_member(dest)[0]) in self.incarnations:
            return False
        if relay.now - self.started_at > self.park_window:
            return False
        parked = self.parked.setdefault((session.application, session.name, dest), [])
        if len(parked) >= MAX_PARKED_FRAMES:
            return False
        parked.append((relay.frame, sender))
        return True

    def _unpark(self, session: Session, member: Member, out: list[Action]) -> None:
        """Hand ``member`` the frames kept for it; drop those for another incarnation."""
        app, name = session.application, session.name
        for key in [k for k in self.parked
                    if k[:2] == (app, name) and split_member(k[2])[0] == member.name]:
            frames = self.parked.pop(key)
            if key[2] != member.member_id:
                out.append(Rejected("unknown_peer", f"{len(frames)} frame(s) kept for "
                                    f"{key[2]}, which joined as {member.member_id}", key[2]))
                continue
            for frame, sender in frames:
                self.relayed += 1
                out.append(Forward(member.conn, frame, sender))

    def _tick(self, tick: Tick, out: list[Action]) -> None:
        """Expire parked frames, due takeovers and silent members (silent before
        ``caught_up_at``, see :class:`Tick`: while the server never catches up,
        departures are noticed late)."""
        if self.parked and tick.now - self.started_at > self.park_window:
            for (app, session, dest), frames in self.parked.items():
                out.append(Rejected("unknown_peer", f"{len(frames)} frame(s) kept for "
                                    f"{dest} in {app}/{session}, which never joined", dest))
            self.parked.clear()
        if self.takeovers:
            self._takeovers_due(tick.now, out)
        if self.stall is not None:
            phase = self.stall.tick(tick.now)
            if phase == "holding":
                return
            if phase == "decide":
                self._step_aside(self.stall.attached_after())
                self.stall.decided()
        deadline = tick.caught_up_at - self.heartbeat_timeout
        for session in list(self.sessions.values()):
            for member in list(session.members.values()):
                if member.last_seen < deadline:
                    log.warning("%s in %s/%s stopped sending heartbeats; reporting it as left",
                                member.member_id, session.application, session.name)
                    self._remove(session, member, "timed out of", None, out)

    def _step_aside(self, attached_after: float) -> None:
        """After a stall: forget, as a restart would, each session none of whose members
        was heard after ``attached_after`` (they moved to another server, or are gone)."""
        for key, session in list(self.sessions.items()):
            if any(m.last_seen > attached_after for m in session.members.values()):
                continue
            count = len(session.members)
            for member in list(session.members.values()):
                self._forget(session, member)
            self.stepped_aside += 1
            log.warning("%s/%s: none of its %d member(s) was heard since this server "
                        "resumed after a stall (they moved to another server, or are "
                        "gone); forgetting the session as a restart would, so that they "
                        "come back under their ids", key[0], key[1], count)

    def _back_after_stall(self, join: Join, holder: Member) -> bool:
        """``join`` is ``holder`` itself (its incarnation), back from another server
        while this one holds its timeouts after a stall, its old connection silent."""
        stall = self.stall
        return (stall is not None and stall.resumed_at is not None
                and 0 < join.incarnation == holder.incarnation
                and holder.last_seen <= stall.attached_after())

    def _forget(self, session: Session, member: Member) -> None:
        """Drop ``member`` without a departure notice, as a restart forgets it: it may
        come back under its incarnation; a new process under its name is numbered
        above it."""
        del session.members[member.name]
        self.by_conn.pop(member.conn, None)
        name = (session.application, session.name, member.name)
        self.takeovers.pop(name, None)
        self.incarnations.pop(name, None)
        self.stored_incarnations[name] = max(self.stored_incarnations.get(name, 0),
                                             member.incarnation)
        if not session.members:
            del self.sessions[(session.application, session.name)]

    def next_deadline(self) -> float | None:
        """The first due takeover: hosts tick at least that soon."""
        return min((t.due for t in self.takeovers.values()), default=None)


#: the registry's step for each type of input
_STEPS: dict[type, Callable[[SessionRegistry, Any, list[Action]], None]] = {
    Relay: SessionRegistry._relay, Heartbeat: SessionRegistry._heartbeat,
    Join: SessionRegistry._join, Leave: SessionRegistry._leave, Tick: SessionRegistry._tick,
    SnapshotGiven: SessionRegistry._snapshot_given, StateHeld: SessionRegistry._state_held,
    PartReceived: lambda registry, part, out: None}
