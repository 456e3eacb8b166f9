"""The session server: membership of named sessions of named applications, and relay.

Clients connect a DEALER socket to the server's ROUTER. The server sequences joins and
leaves per session and tells every member about each one, in the same order at every
member (all notices of a session leave the server's single thread in one order, and a
ZeroMQ connection is FIFO). It relays messages for clients that use relayed routing
and tells members each other's direct addresses for direct routing. A client whose
heartbeats stop is declared gone and reported as left.

Every frame is verified before anything in it is decoded; bad frames are dropped,
counted by reason and logged, and the server keeps serving.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from groupcomm.core.membership import member_id, split_member
from groupcomm.transport.address import endpoint
from groupcomm.transport.curve import ServerKeys, start_authenticator
from groupcomm.transport.rejects import RejectLog
from groupcomm.wire.frames import (
    DEFAULT_MAX_FRAME,
    MESSAGE,
    SESSION,
    FrameCodec,
    FrameRejected,
    kind_of,
)
from groupcomm.wire.session import open_session, seal_session

__all__ = ["DEFAULT_HEARTBEAT_TIMEOUT", "Member", "RejectLog", "Session", "SessionServer"]

log = logging.getLogger(__name__)

#: generous on purpose: a client starved of CPU on a loaded machine (or a server that
#: falls behind) must not be declared gone; a member removed by mistake comes back as a
#: new member and loses what was relayed to it meanwhile (see README, faults)
DEFAULT_HEARTBEAT_TIMEOUT = 10.0
#: names whose last incarnation the server remembers (least recently joined forgotten)
MAX_REMEMBERED_NAMES = 100_000
#: frames kept for one destination that has not joined this server yet (see _park)
MAX_PARKED_FRAMES = 10_000


@dataclass
class Member:
    """A client in a session."""

    name: str
    identity: bytes
    address: str
    last_seen: float
    #: which membership of ``name`` in the session this is (1, 2, ...); see member_id
    incarnation: int = 1
    #: it asks for the application state (members then mark the end of what they sent
    #: before its join: see groupcomm.core.state_transfer)
    wants_state: bool = False

    @property
    def member_id(self) -> str:
        """The name peers know this membership by (``carol``, then ``carol~2``, ...)."""
        return member_id(self.name, self.incarnation)


@dataclass
class Session:
    """Members of one session of one application, in join order."""

    application: str
    name: str
    members: OrderedDict[str, Member] = field(default_factory=OrderedDict)


class SessionServer:
    """Runs on the thread that calls :meth:`serve_forever` (it owns the socket)."""

    def __init__(
        self,
        key: bytes,
        bind: str = "tcp://127.0.0.1:0",
        *,
        heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
        max_frame: int = DEFAULT_MAX_FRAME,
        context: zmq.Context | None = None,
        curve: ServerKeys | None = None,
    ) -> None:
        self.codec = FrameCodec(key, max_frame=max_frame)
        self.heartbeat_timeout = heartbeat_timeout
        self._context = context or zmq.Context.instance()
        #: per-client keys (see :mod:`groupcomm.transport.curve`): joins must use the key's name,
        #: relayed frames carry the sender the server received them from
        self.curve = curve
        self._auth = start_authenticator(self._context, curve) if curve else None
        self.socket = self._context.socket(zmq.ROUTER)
        if curve:
            curve.apply(self.socket)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, max_frame * 2 + 4096)
        self.socket.bind(endpoint(bind, "bind address"))
        self.address: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.server_id = os.urandom(4).hex()
        self.sessions: dict[tuple[str, str], Session] = {}
        self.applications: set[str] = set()
        self.by_identity: dict[bytes, tuple[str, str, str]] = {}
        #: the last incarnation given to each name of each session, kept after the name
        #: leaves (and after the session empties) so that a name that comes back is a new
        #: member; bounded by MAX_REMEMBERED_NAMES
        self.incarnations: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self.rejects = RejectLog("session server")
        self.relayed = 0
        #: relayed frames for members that have not joined this server yet, kept while it
        #: is new (see _park): (app, session, member id) -> [(frame, attested sender)]
        self._parked: dict[tuple[str, str, str], list[tuple[bytes, str]]] = {}
        self._started_at = time.monotonic()
        #: how long after its start the server keeps frames for names it has not met
        self.park_window = 3 * heartbeat_timeout
        self._stopping = False
        #: when the server last had no input waiting: everything sent before then has
        #: been read, so silence is judged against this, not against the wall clock
        self._caught_up_at = time.monotonic()

    # -- loop ---------------------------------------------------------------------------------
    def serve_forever(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Serve until :meth:`stop` is called or ``should_stop()`` is true."""
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        check_every = max(self.heartbeat_timeout / 4, 0.05)
        next_check = time.monotonic() + check_every
        try:
            while not self._stopping and not should_stop():
                timeout_ms = max(0.0, (next_check - time.monotonic()) * 1000)
                if not poller.poll(timeout_ms):
                    self._caught_up_at = time.monotonic()
                else:
                    # drain what is ready without going back to poll for each message
                    for _ in range(1000):
                        try:
                            if self.curve is None:
                                parts = self.socket.recv_multipart(zmq.NOBLOCK, copy=True)
                                self.handle(parts)
                            else:  # the User-Id property lives on the frames
                                frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
                                self.handle([f.bytes for f in frames],
                                            user=frames[-1].get("User-Id"))
                        except zmq.Again:
                            self._caught_up_at = time.monotonic()
                            break
                if time.monotonic() >= next_check:
                    self.expire_silent_clients()
                    next_check = time.monotonic() + check_every
        finally:
            self.socket.close(linger=0)
            if self._auth is not None:
                self._auth.stop()

    def stop(self) -> None:
        """Ask the loop to end (call from the serving thread or a signal handler)."""
        self._stopping = True

    # -- input ------------------------------------------------------------------------------
    def handle(self, parts: list[bytes], user: str | None = None) -> None:
        """Handle one multipart message from a client: ``[identity, frame, (frame)]``;
        ``user`` is the authenticated client name with per-client keys."""
        if len(parts) < 2:
            self.rejects.reject("malformed", "message without a frame")
            return
        identity, frame = parts[0], parts[1]
        peer = self._describe(identity)
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "the server takes session frames only")
            command = open_session(body)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, peer)
            return
        op = command["op"]
        try:
            if op == "join":
                if self.curve is not None and command.get("client") != user:
                    self.rejects.reject("name_not_authenticated",
                                        f"join as {command.get('client')!r} with the key of "
                                        f"{user!r}", peer)
                    self._send(identity, "error", reason="name_not_authenticated",
                               detail=f"this key belongs to {user!r}, not "
                               f"{command.get('client')!r}")
                    return
                self._join(identity, command)
            elif op == "leave":
                self._leave(identity, command)
            elif op == "heartbeat":
                self._heartbeat(identity, command)
            elif op == "relay":
                self._relay(identity, command, parts[2:])
            else:
                self.rejects.reject("malformed", f"op {op!r} is not for the server", peer)
        except (TypeError, ValueError) as error:
            self.rejects.reject("malformed", f"{op}: {error}", peer)

    def _describe(self, identity: bytes) -> str:
        known = self.by_identity.get(identity)
        return f"{known[2]}@{known[1]}" if known else f"connection {identity.hex()[:8]}"

    def _send(self, identity: bytes, op: str, **fields: Any) -> None:
        self.socket.send_multipart([identity, seal_session(self.codec, op, **fields)])

    def _session_of(self, command: dict[str, Any]) -> tuple[str, str, str]:
        client, app, session = command["client"], command["application"], command["session"]
        if not all(isinstance(v, str) and v for v in (client, app, session)):
            raise ValueError("client, application and session must be non-empty strings")
        return client, app, session

    def _join(self, identity: bytes, command: dict[str, Any]) -> None:
        client, app, name = self._session_of(command)
        address = command["address"]
        if not isinstance(address, str):
            raise ValueError("address must be a string")
        key = (app, name)
        is_new_application = app not in self.applications
        is_new_session = key not in self.sessions
        session = self.sessions.setdefault(key, Session(app, name))
        self.applications.add(app)
        existing = session.members.get(client)
        if existing is not None:
            if existing.identity == identity:
                return  # a retried join from the same connection: already a member
            log.warning("refused duplicate client name %r in session %s/%s", client, app, name)
            self._send(
                identity, "error", reason="duplicate_name",
                detail=f"client name {client!r} is already taken in session {name!r} "
                f"of application {app!r}",
            )
            return
        previous = self.by_identity.get(identity)
        if previous is not None:
            self._send(identity, "error", reason="already_joined",
                       detail=f"this connection already joined as {previous[2]!r}")
            return
        incarnation = self._incarnation_for((app, name, client), command.get("incarnation"))
        member = Member(client, identity, address, time.monotonic(), incarnation,
                        command.get("wants_state") is True)
        session.members[client] = member
        self.by_identity[identity] = (app, name, client)
        log.info("%s joined %s/%s (%d members)", member.member_id, app, name,
                 len(session.members))
        self._send(identity, "welcome", client=client, server_id=self.server_id,
                   incarnation=incarnation)
        users = [m.member_id for m in session.members.values()]
        addresses = {m.member_id: m.address for m in session.members.values()}
        for other in session.members.values():
            self._send(
                other.identity, "joined", client=member.member_id, application=app,
                session=name, is_new_session=is_new_session,
                is_new_application=is_new_application, all_users=users, addresses=addresses,
                wants_state=member.wants_state,
            )
        self._unpark(app, name, member)

    def _incarnation_for(self, key: tuple[str, str, str], proposed: Any) -> int:
        """The incarnation of a new membership of ``key``'s name.

        A client that was a member asks to keep its incarnation (``proposed``): after a
        restart of this server, which has forgotten it, it keeps it (it lost nothing, and
        every member still knows it by that name). A proposal at or below the last
        incarnation this server gave the name means the client was removed meanwhile
        (declared gone while it was stalled): it comes back as the next incarnation.
        """
        last = self.incarnations.get(key, 0)
        if isinstance(proposed, int) and not isinstance(proposed, bool) and proposed > last:
            incarnation = proposed
        else:
            incarnation = last + 1
        self.incarnations[key] = incarnation
        self.incarnations.move_to_end(key)
        if len(self.incarnations) > MAX_REMEMBERED_NAMES:
            self.incarnations.popitem(last=False)
        return incarnation

    def _member(self, identity: bytes, command: dict[str, Any]) -> tuple[Session, Member] | None:
        client, app, name = self._session_of(command)
        session = self.sessions.get((app, name))
        member = session.members.get(client) if session else None
        if session is None or member is None or member.identity != identity:
            return None
        return session, member

    def _leave(self, identity: bytes, command: dict[str, Any]) -> None:
        found = self._member(identity, command)
        if found is None:
            self.rejects.reject("unknown_peer", "leave from a client that is not a member",
                                self._describe(identity))
            return
        session, member = found
        direct_frames = command.get("direct_frames", {})
        if not isinstance(direct_frames, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in direct_frames.items()
        ):
            # the leave still counts; receivers just cannot wait for its last frames
            self.rejects.reject("malformed", "leave: direct_frames must map names to "
                                "counts >= 0; ignored", self._describe(identity))
            direct_frames = {}
        self._send(identity, "left", client=member.member_id,
                   application=session.application, session=session.name)
        self._remove(session, member, "left", direct_frames)

    def _remove(self, session: Session, member: Member, why: str,
                direct_frames: dict[str, int] | None = None) -> None:
        """Drop ``member`` and tell the others; ``direct_frames`` (graceful leave) says how
        many frames it pushed straight to each of them, so each can wait for the last."""
        del session.members[member.name]
        self.by_identity.pop(member.identity, None)
        log.info("%s %s %s/%s", member.member_id, why, session.application, session.name)
        for other in session.members.values():
            self._send(other.identity, "left", client=member.member_id,
                       application=session.application, session=session.name,
                       direct_frames=(direct_frames or {}).get(other.member_id, 0))
        if not session.members:
            del self.sessions[(session.application, session.name)]

    def _heartbeat(self, identity: bytes, command: dict[str, Any]) -> None:
        found = self._member(identity, command)
        if found is None:
            # e.g. the server restarted: tell the client so it can join again
            self._send(identity, "error", reason="not_a_member",
                       detail="heartbeat from a client that is not a member; join again")
            return
        found[1].last_seen = time.monotonic()
        self._send(identity, "pong", server_id=self.server_id)

    def _relay(self, identity: bytes, command: dict[str, Any], payload: list[bytes]) -> None:
        found = self._member(identity, command)
        if found is None:
            # e.g. this server restarted and the client has not joined again yet: give
            # the frame back, so that the client sends it again once it has (nothing it
            # accepted is lost to a restart)
            self.rejects.reject("unknown_peer", "relay from a client that is not a member; "
                                "returned to it", self._describe(identity))
            self._send_parts(identity, "error", payload[:1], reason="not_a_member",
                             detail="relay from a client that is not a member; join again",
                             returned=command.get("dests", []))
            return
        session, member = found
        member.last_seen = time.monotonic()
        if len(payload) != 1:
            self.rejects.reject("malformed", "relay without exactly one message frame",
                                member.member_id)
            return
        dests = command["dests"]
        if not isinstance(dests, list | tuple) or not all(isinstance(d, str) for d in dests):
            raise ValueError("dests must be a list of names")
        frame = payload[0]
        for dest in dests:
            name, incarnation = split_member(dest)
            target = session.members.get(name)
            if target is None and self._park(session, dest, frame, member.member_id):
                continue
            if target is None or target.incarnation != incarnation:
                why = "unknown client" if target is None else (
                    f"client that is now {target.member_id}")
                self.rejects.reject("unknown_peer", f"relay to {why} {dest!r}",
                                    member.member_id)
                continue
            self._forward(target, frame, member.member_id)

    def _park(self, session: Session, dest: str, frame: bytes, sender: str) -> bool:
        """Keep a frame for ``dest`` when this server is new and has never met its name:
        after a restart, members join again one by one, and a member that rejoined
        first relays to others that have not yet. Returns False when the frame is not
        kept (the name was met here, the server is no longer new, or too many wait)."""
        key = (session.application, session.name, dest)
        if (session.application, session.name, split_member(dest)[0]) in self.incarnations:
            return False
        if time.monotonic() - self._started_at > self.park_window:
            return False
        parked = self._parked.setdefault(key, [])
        if len(parked) >= MAX_PARKED_FRAMES:
            return False
        parked.append((frame, sender))
        return True

    def _unpark(self, app: str, session: str, member: Member) -> None:
        """Hand ``member`` the frames kept for it; drop those kept for another
        incarnation of its name (that one will not come)."""
        for key in [k for k in self._parked if k[:2] == (app, session)
                    and split_member(k[2])[0] == member.name]:
            frames = self._parked.pop(key)
            if key[2] != member.member_id:
                self.rejects.reject("unknown_peer", f"{len(frames)} frame(s) kept for "
                                    f"{key[2]}, which joined as {member.member_id}")
                continue
            for frame, sender in frames:
                self._forward(member, frame, sender)

    def _forward(self, target: Member, frame: bytes, sender: str) -> None:
        if self.curve is None:
            self.socket.send_multipart([target.identity, MESSAGE, frame])
        else:  # attest who sent it: the receiver checks the signed sender against it
            self.socket.send_multipart([target.identity, MESSAGE, frame, sender.encode()])
        self.relayed += 1

    def _drop_expired_parked(self) -> None:
        if self._parked and time.monotonic() - self._started_at > self.park_window:
            for (app, session, dest), frames in self._parked.items():
                self.rejects.reject("unknown_peer", f"{len(frames)} frame(s) kept for "
                                    f"{dest} in {app}/{session}, which never joined")
            self._parked.clear()

    def _send_parts(self, identity: bytes, op: str, extra: list[bytes], **fields: Any) -> None:
        self.socket.send_multipart([identity, seal_session(self.codec, op, **fields), *extra])

    def expire_silent_clients(self) -> None:
        """Declare clients whose heartbeats stopped as left.

        A client is silent when nothing came from it for ``heartbeat_timeout`` before the
        last moment the server had read all its input. Measured against the wall clock
        instead, a server that falls behind under load (its input queue holding seconds
        of frames) would declare busy, live clients gone and drop what is relayed to them.
        The price: while the server never catches up, departures are noticed late.
        """
        self._drop_expired_parked()
        deadline = self._caught_up_at - self.heartbeat_timeout
        for session in list(self.sessions.values()):
            for member in list(session.members.values()):
                if member.last_seen < deadline:
                    log.warning("%s in %s/%s stopped sending heartbeats; reporting it as left",
                                member.name, session.application, session.name)
                    self._remove(session, member, "timed out of")
