"""Members of a session and its server in one process, exchanging real signed frames (for
:mod:`groupcomm.tools.localnet`, :mod:`groupcomm.sim.stack`, the session checker):
:class:`InProcessMember` carries out its ``Out`` as the ZeroMQ member link does, and
:class:`InProcessServer` is a real :class:`~groupcomm.protocol.registry.SessionRegistry`
behind the ZeroMQ server's checks.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

from groupcomm.core.messages import ReceivedMessage, SentMessage, Withdrawn
from groupcomm.core.node import ProtocolNode
from groupcomm.core.tracing import NullTracer, Tracer
from groupcomm.protocol.actions import Out
from groupcomm.protocol.client import ClientProtocol, FilterStacks
from groupcomm.protocol.client_actions import APPLICATION
from groupcomm.protocol.client_actions import SESSION as SESSION_NAME
from groupcomm.protocol.registry import Action, Forward, Notify, Rejected, Return, SessionRegistry
from groupcomm.protocol.registry_events import BadCommand, KeepSnapshot
from groupcomm.wire.envelopes import pack_envelopes
from groupcomm.wire.frames import NONCE_SIZE, FrameCodec, FrameRejected
from groupcomm.wire.session import seal_session
from groupcomm.wire.streams import StreamEncoder

__all__ = ["KEY", "Carrier", "Delivery", "InProcessMember", "InProcessServer",
           "seeded_codec"]

log = logging.getLogger(__name__)

#: the session key of in-process sessions (no other process shares them)
KEY = b"groupcomm in-process session key"
#: what one frame carries at most (a message larger than this is withdrawn)
FRAME_LIMIT = 8 * 1024 * 1024

#: what the server hands a connection: ``("session", notice, frame an error returns or
#: None)`` or ``("message", relayed frame, sender)``
Delivery = tuple


def seeded_codec(seed: str) -> FrameCodec:
    """A :class:`FrameCodec` whose nonce is made from ``seed``, for runs that repeat
    exactly (each start of a client needs its own seed: nonces are not reused)."""
    codec = FrameCodec(KEY)
    nonce = hashlib.sha256(seed.encode()).digest()[:NONCE_SIZE]
    codec.nonce = nonce
    # the signed prefix is the version byte, then the nonce (see FrameCodec.seal)
    codec._prefix = codec._prefix[:1] + nonce  # noqa: SLF001
    return codec


class Carrier(Protocol):
    """What takes an in-process member's frames (its host's network)."""

    def command(self, member: InProcessMember, frame: bytes) -> None:
        """A sealed session command for the server."""

    def relay(self, member: InProcessMember, frame: bytes, dests: tuple[str, ...],
              message: SentMessage | None) -> None:
        """A routed frame for the server to relay; ``message`` is what it carries (None
        for a frame the server returned)."""

    def push(self, member: InProcessMember, dest: str, frame: bytes,
             message: SentMessage) -> None:
        """A routed frame carrying ``message`` straight to ``dest`` (empty when
        ``unencoded``)."""


class InProcessMember(Out):
    """One member: a :class:`ClientProtocol` and its ``Out`` (whose ``peer_addresses`` stays
    a no-op: the carrier knows every member). ``routing`` is ``relayed``,
    ``direct`` or ``unencoded`` (messages pushed as objects: the simulator's, whose
    ground-truth clocks would cost more than the protocol). ``listeners`` are called
    with each message handed over; ``state_options`` go to the :class:`ClientProtocol`."""

    def __init__(self, name: str, carrier: Carrier, *, now: float,
                 filter_stacks: FilterStacks, codec: FrameCodec | None = None,
                 routing: str = "relayed", tracer_for: Callable[[str], Tracer] | None = None,
                 clock: Callable[[], float] | None = None, heartbeat_interval: float = 1.0,
                 **state_options: Any) -> None:
        if routing not in ("relayed", "direct", "unencoded"):
            raise ValueError(f"routing must be relayed, direct or unencoded, not {routing!r}")
        self.name = name
        self.carrier = carrier
        self.routing = routing
        self.codec = codec if codec is not None else FrameCodec(KEY)
        self.streams = StreamEncoder(compress=False)
        self.listeners: list[Callable[[ReceivedMessage], Any]] = []
        self.may_relay = False
        #: relayed messages that wait while the server does not know this member
        self.waiting: list[tuple[SentMessage, tuple[str, ...]]] = []
        #: frames pushed to each member (a graceful leave says how many)
        self.direct_sent: Counter[str] = Counter()
        self.join_error: str | None = None
        self.joined = False
        self.left = False
        self.state_done = True
        null = NullTracer()
        self.protocol = ClientProtocol(
            name, SESSION_NAME, application=APPLICATION, codec=self.codec, out=self,
            filter_stacks=filter_stacks,
            tracer_for=tracer_for if tracer_for is not None else (lambda member: null),
            clock=clock if clock is not None else (lambda: now), now=now,
            heartbeat_interval=heartbeat_interval, **state_options)
        self.protocol.port.add_listener(self._handed)

    @property
    def node(self) -> ProtocolNode:
        return self.protocol.node

    @property
    def member(self) -> str:
        return self.protocol.node.name

    # -- inputs: the one place the in-process hosts call ClientProtocol --------------------------
    def start(self, address: str = "") -> None:
        self.protocol.start(address)

    def send(self, payload: Any, dests: Sequence[str]) -> list[SentMessage]:
        """Raises what :meth:`ProtocolNode.tag_sends` raises."""
        messages = self.protocol.port.send(payload, dests)
        self.protocol.take_inputs()
        self._flush()
        return messages

    def message_frame(self, frame: bytes, now: float, direct: bool = False) -> None:
        self.protocol.on_message_frame(frame, None, direct, now)
        self.protocol.end_batch()  # each arrival here is a batch of its own
        self._flush()

    def messages(self, messages: list[ReceivedMessage], now: float) -> None:
        self.protocol.on_messages(messages, now)
        self.protocol.end_batch()
        self._flush()

    def take(self, delivery: Delivery, now: float) -> None:
        """What :class:`InProcessServer` handed this member's connection."""
        if delivery[0] == "message":
            self.protocol.on_message_frame(delivery[1], None, False, now)
            self.protocol.end_batch()
        else:
            self.protocol.on_session_frame(delivery[1], delivery[2], now)
        self._flush()

    def timer(self, now: float) -> None:
        self.protocol.timer(now)
        self._flush()

    def leave(self) -> None:
        self.protocol.leave(dict(self.direct_sent))
        self._flush()

    # -- Out: what the protocol asks for --------------------------------------------------------
    def transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        push = self.carrier.push
        if self.routing == "unencoded":
            for dest in dests:
                push(self, dest, b"", message)
        elif self.routing == "direct":
            body = self._body(message)
            for dest in dests:
                self.direct_sent[dest] += 1
                push(self, dest, self.codec.seal(self.streams.wrap((dest,), body)), message)
        else:
            self.waiting.append((message, dests))
            self._flush()

    def to_server(self, command: bytes) -> None:
        self.carrier.command(self, command)

    def relay(self, frame: bytes, dests: Sequence[str]) -> None:
        self.carrier.relay(self, frame, tuple(dests), None)

    def drop_peer(self, member: str) -> None:
        self.direct_sent.pop(member, None)

    def discard_queued(self) -> None:
        self.waiting.clear()
        self.streams.restart()

    def restart_streams(self) -> None:
        self.streams.restart()

    def join_settled(self, error: str | None) -> None:
        self.join_error = error
        self.joined = error is None

    def left_session(self) -> None:
        self.left = True

    def state_pending(self) -> None:
        self.state_done = False

    def state_settled(self) -> None:
        self.state_done = True

    def frames_uncompressed(self) -> None:
        pass  # this host's frames never are compressed

    def relay_allowed(self, allowed: bool) -> None:
        self.may_relay = allowed

    def _handed(self, message: ReceivedMessage) -> None:
        for listener in self.listeners:
            listener(message)

    def _flush(self) -> None:
        if not self.waiting or not self.may_relay:
            return
        waiting, self.waiting = self.waiting, []
        for message, dests in waiting:
            frame = self.codec.seal(self.streams.wrap(dests, self._body(message)))
            self.carrier.relay(self, frame, dests, message)

    def _body(self, message: SentMessage) -> bytes:
        """The packed batch of one message (a stand-in if it cannot travel)."""
        return next(pack_envelopes([message], FRAME_LIMIT, self._unencodable, FRAME_LIMIT))

    def _unencodable(self, message: SentMessage, error: Exception) -> SentMessage:
        log.error("%s: message %s cannot be sent (%s); its receivers get a stand-in",
                  self.name, message.message_id, error)
        self.protocol.report_undeliverable([message.message_id],
                                           f"could not send them: {error}")
        return message.replace(user_message=Withdrawn(f"{type(error).__name__}: {error}"))


class InProcessServer:
    """The session server's side: frames in, per connection what it receives out."""

    def __init__(self, *, now: float, registry: SessionRegistry | None = None,
                 codec: FrameCodec | None = None) -> None:
        self.codec = codec if codec is not None else FrameCodec(KEY)
        self.registry = registry if registry is not None else SessionRegistry(
            server_id="in-process", now=now)
        #: refused input by reason (the server's log and counters)
        self.rejects: Counter[str] = Counter()

    def members(self) -> list[str]:
        return self.registry.members_of(APPLICATION, SESSION_NAME)

    def receive(self, conn: Hashable, frame: bytes, now: float) -> list[tuple[Hashable, Delivery]]:
        """What each connection is to receive, in order, for a frame from ``conn``."""
        return self.carry_out(self.actions(conn, frame, now))

    def actions(self, conn: Hashable, frame: bytes, now: float) -> list[Action]:
        """The registry's answer to a frame from ``conn`` (none for a refused frame, which
        is counted by reason)."""
        try:
            return self.registry.handle_frame(self.codec, conn, frame, now)
        except (FrameRejected, BadCommand) as error:  # a bad command is malformed
            self.rejects[getattr(error, "reason", "malformed")] += 1
            log.warning("in-process server: refused a frame of %s: %s", conn, error)
            return []

    def notice(self, op: str, **fields: Any) -> Delivery:
        """A notice sealed by this server, as a connection receives it."""
        return ("session", seal_session(self.codec, op, **fields), None)

    def carry_out(self, actions: list[Action]) -> list[tuple[Hashable, Delivery]]:
        """The registry's actions as what each connection receives."""
        out: list[tuple[Hashable, Delivery]] = []
        for action in actions:
            kind = type(action)
            if kind is Forward:
                out.append((action.conn, ("message", action.frame, action.sender)))
            elif kind is Notify:
                out.append((action.conn, self.notice(action.op, **action.fields)))
            elif kind is Return:
                out.append((action.conn, ("session", seal_session(
                    self.codec, "error", reason="not_a_member",
                    detail="relay from a client that is not a member; join again",
                    returned=list(action.dests)), action.frame)))
            elif kind is Rejected:
                self.rejects[action.reason] += 1
            elif kind is KeepSnapshot:  # a snapshot, and this server keeps no store
                self.rejects["malformed"] += 1
        return out
