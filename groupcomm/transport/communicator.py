"""The communicator: what applications talk through (docs/programming.md).

A facade over one member: its protocol object (:class:`~groupcomm.protocol.client.ClientProtocol`,
no I/O) and its sockets (:class:`~groupcomm.transport.link.MemberLink`), both owned by a
poll thread (:class:`~groupcomm.transport.loop.PollLoop`). A send is tagged at the call
and queued for that thread; every other call is handed to it (docs/architecture.md, "One
chat line, end to end"). Routings and bounded queues: docs/security.md, docs/sessions.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import SessionMessageListener
from groupcomm.core.member_ids import check_client_name
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.tracing import Tracer, tracer_for
from groupcomm.protocol.client import ClientProtocol
from groupcomm.protocol.placement import rendezvous_order
from groupcomm.protocol.port import PortError
from groupcomm.protocol.session_events import ServerAnswers, ServerSilent, SessionEvent
from groupcomm.protocol.state_parts import StateParts
from groupcomm.transport.address import endpoint, nobody_listens
from groupcomm.transport.config import (
    Connection,
    Delivery,
    Limits,
    Listeners,
    Pipelines,
    StateTransfer,
    check_routing,
    client_keys,
)
from groupcomm.transport.delays import self_delay_error
from groupcomm.transport.keys import resolve_key
from groupcomm.transport.link import MAX_ROOM_ASKED, MemberLink
from groupcomm.transport.loop import PollLoop
from groupcomm.wire.frames import FrameCodec
from groupcomm.wire.parts import PART_HEADROOM
from groupcomm.wire.streams import StreamDecoder

__all__ = ["Communicator", "CommunicatorError", "JoinError", "MessageTooLarge",
           "SendQueueFull"]

log = logging.getLogger(__name__)


class CommunicatorError(RuntimeError):
    """The communicator cannot do what was asked (not joined, closed, ...)."""


class SendQueueFull(CommunicatorError):
    """The bounded send queue stayed full for ``send_timeout`` seconds."""


class JoinError(CommunicatorError):
    """Joining the session failed (duplicate name, no server, wrong key, ...)."""


class MessageTooLarge(CommunicatorError, ValueError):
    """A payload larger than a frame may carry (``max_frame``), refused at the call."""


#: payloads whose size is checked at the call (others are measured when packed)
SIZED_PAYLOADS = frozenset({str, bytes, bytearray})
#: bytes of an envelope that are not the payload: ids, destinations, clock and the
#: module's headers (generous: a matrix header for dozens of members fits)
PAYLOAD_HEADROOM = 64 * 1024
#: seconds to wait for the join before asking whether anything listens at the address
LISTENER_PROBE_AFTER = 0.5
#: a thread sending faster than the loop yields the GIL (a zero sleep) each time this
#: many sends wait; otherwise the sends live long enough for the garbage collector to
#: promote them and run full collections (1.5 µs of CPU per message in the bench, 0.4 µs
#: with the hand-off)
HANDOFF_EVERY = 256


class Communicator:
    """A client of a session. ``causality`` names a module (or is one); otherwise
    ``pipelines`` says which filters. The option groups are
    :mod:`groupcomm.transport.config`'s. ``trace_dir`` writes a trace file per member id
    (or ``tracer`` takes every line). ``loop`` is :meth:`~groupcomm.transport.host.Host.join`'s;
    without it the communicator runs a loop of its own. Raises :class:`JoinError` when the
    join fails, ``ValueError`` for a bad option.

    ``server`` is the session server's address; or ``servers`` lists several, and the
    session meets at the first of them in its rendezvous order that answers, moving
    along that order when it falls silent (docs/deploy.md).
    """

    def __init__(
        self,
        name: str,
        session: str,
        *,
        server: str = "",
        servers: Sequence[str] = (),
        key: bytes | None = None,
        key_file: str | None = None,
        application: str = "default",
        routing: str = "relayed",
        causality: str | CausalityModule | None = None,
        listeners: Listeners = Listeners(),
        state: StateTransfer = StateTransfer(),
        delivery: Delivery = Delivery(),
        connection: Connection = Connection(),
        limits: Limits = Limits(),
        pipelines: Pipelines = Pipelines(),
        trace_dir: str | os.PathLike[str] | None = None,
        tracer: Tracer | None = None,
        loop: PollLoop | None = None,
    ) -> None:
        check_routing(routing)
        curve = client_keys(connection.curve_dir, routing, name)
        if not name or not session or not application:
            raise ValueError("name, session and application must be non-empty")
        check_client_name(name)
        resolved = key if key is not None else resolve_key(key_file)
        if resolved is None:
            raise JoinError(
                "no session key: give key_file, or set GROUPCOMM_KEY_FILE or GROUPCOMM_KEY"
            )
        if loop is not None and connection.context is not None:
            raise ValueError("a member of a host uses the host's context: give context "
                             "to Host(), not to the member")
        self.name = name
        self.session = session
        self.application = application
        self.routing = routing
        if bool(server) == bool(servers):
            raise ValueError("give the session server's address (server) or a list of "
                             "servers (servers), not both and not neither")
        #: the session's servers in rendezvous order (one: ``server``)
        self.servers = (rendezvous_order(session, [endpoint(s, "server address")
                                                   for s in servers])
                        if servers else (endpoint(server, "server address"),))
        self.codec = FrameCodec(resolved, max_frame=connection.max_frame)
        self.max_pending = limits.max_pending
        self.send_timeout = limits.send_timeout
        self.acknowledged_delivery = delivery.acknowledged
        self._own_loop = loop is None
        #: True once :meth:`close` was called
        self.closed = False
        #: True while the session server has not answered for a few heartbeats
        self.server_unreachable = False
        self._loop = loop if loop is not None else PollLoop(context=connection.context,
                                                            name=name)
        compress = connection.compress_frames
        self._link = link = MemberLink(
            name=name, server_address=self.servers[0], routing=routing,
            servers=self.servers, probe_every=connection.probe_every,
            codec=self.codec, curve=curve, bind_host=connection.bind_host,
            advertise_host=connection.advertise_host or connection.bind_host,
            max_pending=limits.max_pending, max_inbox=limits.max_inbox,
            compress=routing == "relayed" if compress is None else compress)
        #: wakes a thread waiting in receive()
        self._inbox_ready = threading.Condition()
        # without a tracer each member id gets its own file (carol.jsonl, carol~2.jsonl)
        self._protocol = protocol = ClientProtocol(
            name, session, application=application, codec=self.codec, out=link,
            filter_stacks=pipelines.stacks(causality),
            tracer_for=(lambda member: tracer) if tracer is not None
            else (lambda member: tracer_for(member, trace_dir)),
            clock=time.time, now=time.monotonic(),
            heartbeat_interval=connection.heartbeat_interval,
            state_provider=state.provider, state_consumer=state.consumer,
            state_timeout=state.timeout, release_after=delivery.release_after,
            acknowledged_delivery=delivery.acknowledged,
            post=lambda function: self._loop.call_soon(function, link),
            clock_acks=delivery.clock_acks,
            inbox_changed=self._inbox_changed, sent_listener=listeners.sent,
            attested=curve is not None)
        # a state or stored state larger than a frame travels in parts of half a frame
        protocol.transfer.parts = StateParts(
            part_size=max(1, connection.max_frame // 2 - PART_HEADROOM),
            max_state=state.max_state)
        protocol.notice_parts.limit = state.max_state
        if self._loop.shared_streams is not None:  # a host's: with its other members
            protocol.streams = StreamDecoder(max_body=protocol.streams.max_body,
                                             shared=self._loop.shared_streams,
                                             scope=(session, application))
            protocol.batches = self._loop.shared_batches
        link.drive(protocol)
        self._port = port = protocol.port  # the one part application threads touch
        self._inputs = protocol.inputs
        self._wakeup = self._loop.wakeup
        protocol.add_event_listener(self._on_event)
        if state.consumer is None:
            link.state_done.set()
        if listeners.session is not None:
            protocol.add_session_listener(listeners.session)
        if listeners.event is not None:
            protocol.add_event_listener(listeners.event)
        if listeners.message is not None:
            port.add_listener(listeners.message)
        #: the largest payload (bytes of a ``str``'s UTF-8 text, or of ``bytes``) a send
        #: takes (set by ``max_frame``): a larger one raises :class:`MessageTooLarge`
        self.payload_limit = link.frame_limit - min(PAYLOAD_HEADROOM, link.frame_limit // 4)
        # str payloads take up to 4 bytes a character: shorter ones always fit
        self._check_size_from = self.payload_limit // 4
        try:
            self._loop.add(link)
        except Exception as error:
            self._close_loop()
            raise JoinError(f"cannot start communicator {name!r}: {error}") from None
        self._await_join(connection.join_timeout)

    @property
    def application_clock(self) -> dict[str, int]:
        """A copy of the application-boundary vector clock (what the next send's tag says)."""
        return self._port.node.application_clock

    @property
    def server_address(self) -> str:
        """The session server this member talks to now."""
        return self._link.server_address

    @property
    def direct_address(self) -> str:
        return self._link.direct_address

    @property
    def frame_timeline(self) -> list[tuple[str, int]] | None:
        """:attr:`MemberLink.frame_timeline <groupcomm.transport.link.MemberLink>`."""
        return self._link.frame_timeline

    @frame_timeline.setter
    def frame_timeline(self, value: list[tuple[str, int]] | None) -> None:
        self._link.frame_timeline = value

    def to_others(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every other member of the session."""
        return self._send_all(obj, self.others)[0]

    def to_all(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every member, this client included."""
        return self._send_all(obj, list(self._port.members))[0]

    def to_user(self, name: str, obj: Any) -> SentMessage:
        """Send ``obj`` to one member (``UnknownPeerError`` if not a member)."""
        # the common send, spelled out (see _send_all): no lists, two calls less
        if self.closed:
            self._check_open()
        if type(obj) in SIZED_PAYLOADS and len(obj) > self._check_size_from:
            self._check_size(obj)
        port = self._port
        inputs = self._inputs
        if len(inputs) >= self.max_pending:
            self._wait_for_room()
        # tagged and queued for the loop as one step, under the member's clock lock
        message = port.send_one(obj, port.member_ids.get(name, name))
        link = self._link
        if threading.get_ident() == self._loop.ident:
            self._protocol.take_inputs()  # a listener replying: sent before the next one
            link.owe_turn()  # through another member than its own: that one's turn
            return message
        # the loop gives turns only to members that name themselves (see PollLoop)
        if not link.signalled:
            self._loop.signal(link)
        wakeup = self._wakeup
        if not wakeup.pending:
            wakeup.wake()
        elif not len(inputs) % HANDOFF_EVERY:
            time.sleep(0)  # hand the GIL to the loop thread (see HANDOFF_EVERY)
        return message

    def to_users(self, names: Iterable[str], obj: Any) -> SentMessage:
        """Send ``obj`` to the named members."""
        return self.send(names, obj)[0]

    def send(self, destinations: Iterable[str], obj: Any) -> list[SentMessage]:
        """Send ``obj`` to ``destinations``; returns every message the send became (one,
        or one unicast per destination with ``mfss`` / ``cykas``)."""
        resolve = self._port.resolve
        return self._send_all(obj, [resolve(n) for n in destinations])

    def _send_all(self, obj: Any, dests: list[str]) -> list[SentMessage]:
        # mfss and cykas split a multicast into unicasts (see ProtocolNode.tag_sends)
        if self.closed:
            self._check_open()
        if type(obj) in SIZED_PAYLOADS and len(obj) > self._check_size_from:
            self._check_size(obj)
        inputs = self._inputs
        if len(inputs) >= self.max_pending:
            self._wait_for_room()
        messages = self._port.send(obj, dests)  # and queued (see to_user)
        link = self._link
        if threading.get_ident() == self._loop.ident:
            self._protocol.take_inputs()
            link.owe_turn()
            return messages
        if not link.signalled:
            self._loop.signal(link)
        wakeup = self._wakeup
        if not wakeup.pending:
            wakeup.wake()
        elif len(inputs) % HANDOFF_EVERY < len(messages):
            time.sleep(0)  # hand the GIL to the loop thread (see HANDOFF_EVERY)
        return messages

    def _check_size(self, obj: str | bytes | bytearray) -> None:
        # one that passes and still does not fit once packed goes as a stand-in
        # (MemberLink._unencodable)
        size = len(obj.encode("utf-8", "surrogatepass")) if type(obj) is str else len(obj)
        limit = self.payload_limit
        if size > limit:
            raise MessageTooLarge(
                f"{self.name}: a payload of {size:,} bytes does not fit in a frame (at most "
                f"{limit:,} bytes of payload with max_frame={self.codec.max_frame:,}): "
                "nothing was sent; split it, or raise max_frame on every member")

    def wait_for_room(self, sends: int = 1) -> None:
        """Block until ``sends`` more sends fit in the queue to the network (the limit and
        timeout of a send: :class:`SendQueueFull` after ``send_timeout``). An
        application that sends while holding a lock its listeners also take calls this
        before taking the lock: a send that waited for room under it would wait for a
        loop thread waiting for the lock."""
        self._wait_for_room(max(1, min(sends, MAX_ROOM_ASKED, self.max_pending)))

    def _wait_for_room(self, sends: int = 1) -> None:
        if threading.get_ident() == self._loop.ident:
            return  # the loop takes them as this send returns
        deadline = time.monotonic() + self.send_timeout
        inputs = self._inputs
        room = self._link.room
        limit = self.max_pending - sends + 1
        with room:
            while len(inputs) >= limit:
                self._loop.wakeup.wake()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    raise SendQueueFull(
                        f"{self.name}: {len(inputs)} sends are waiting for the "
                        f"network (limit max_pending={self.max_pending}) and none left for "
                        f"{self.send_timeout:g}s: a peer or the server is too slow"
                    )
                room.wait(min(remaining, 0.05))

    def add_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Deliver messages by calling ``callback(message)`` on the loop thread (the
        callback model). Messages already waiting for :meth:`receive` go to it first."""
        self._loop.call(lambda: self._port.add_listener(callback), link=self._link)

    def remove_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Stop calling ``callback``."""
        self._loop.call(lambda: self._port.remove_listener(callback), link=self._link)

    def add_event_listener(self, callback: Callable[[SessionEvent], Any]) -> None:
        """Be told, on the loop thread, what happens in the session, as typed events
        (:mod:`groupcomm.protocol.session_events`)."""
        self._loop.call(lambda: self._protocol.add_event_listener(callback),
                        link=self._link)

    def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        """Pull model: the next delivered message, or ``None`` after ``timeout`` seconds.
        The application clock advances here (with acknowledged delivery, at
        :meth:`acknowledge`). :class:`CommunicatorError` at once when message listeners
        are registered and nothing is waiting."""
        port = self._port
        inbox = port.inbox
        if not inbox:
            if port.listeners:
                raise CommunicatorError(
                    "receive() gets nothing while message listeners are registered: "
                    "messages go to the listeners (callback model); remove them with "
                    "remove_message_listener() to pull with receive()")
            with self._inbox_ready:
                if not self._inbox_ready.wait_for(lambda: inbox, timeout):
                    return None
        try:
            message = inbox.popleft()
        except IndexError:  # another thread took it
            return None
        port.applied(message)
        return message

    def _inbox_changed(self) -> None:
        with self._inbox_ready:
            self._inbox_ready.notify()

    def acknowledge(self, count: int) -> None:
        """Acknowledged delivery: the application has applied the first ``count`` messages
        it was handed (cumulative); they now advance the application clock, so later sends
        and snapshots reflect them. Thread-safe. :class:`ValueError` for a count beyond
        what was handed, or not a non-negative int; :class:`CommunicatorError` without
        acknowledged delivery."""
        try:
            self._port.acknowledge(count, self.name)
        except PortError as error:
            raise CommunicatorError(str(error)) from None

    @property
    def state_answers_waiting(self) -> int:
        """Newcomers whose snapshot waits for the application's acknowledgement."""
        return len(self._protocol.transfer.deferred)

    @property
    def handed_over(self) -> int:
        """Messages handed to the application so far (the numbering :meth:`acknowledge`
        takes)."""
        return self._port.handed

    def add_session_message_listener(self, listener: SessionMessageListener) -> None:
        """Be told of joins and leaves, by member id, on the loop thread."""
        self._loop.call(lambda: self._protocol.add_session_listener(listener),
                        link=self._link)

    def set_minimum_delay_to_peer(self, name: str, ms: float) -> None:
        """Frames to ``name`` wait at least ``ms`` ms before they leave (testing).
        :class:`ValueError` for this client, or a bad ``ms`` (see
        :func:`~groupcomm.transport.delays.check_delay_ms`)."""
        if name in (self.name, self.member_id):
            raise ValueError(self_delay_error(name))
        self._link.delays.set_minimum_delay(name, ms)

    def set_delay_variation(self, ms: float, keep_fifo: bool = True) -> None:
        """Every frame waits a random extra 0..``ms`` ms; ``keep_fifo`` keeps per-peer order.
        :class:`ValueError` for a bad ``ms``."""
        self._link.delays.set_jitter(ms, keep_fifo)

    @property
    def others(self) -> list[str]:
        """Every member but this client, in join order."""
        port = self._port
        me = port.member_id
        return [m for m in port.members if m != me]

    @property
    def members(self) -> list[str]:
        """Current members of the session in join order, by member id."""
        return list(self._port.members)

    @property
    def member_id(self) -> str:
        """This client's member id: its name, or ``name~N`` for a name seen before."""
        return self._port.member_id

    @property
    def members_at_join(self) -> list[str]:
        """The members when this incarnation joined, itself included."""
        return list(self._protocol.members_at_join)

    def _on_event(self, event: SessionEvent) -> None:
        if isinstance(event, ServerSilent | ServerAnswers):
            self.server_unreachable = isinstance(event, ServerSilent)

    def wait_for_state(self, timeout: float | None = None) -> bool:
        """Wait until this newcomer's state transfer is over (installed, or no member
        could give one); False on ``timeout``. Wait before the first edit of shared
        state, which the snapshot would otherwise replace."""
        return self._link.state_done.wait(timeout)

    def undeliverable(self) -> list[str]:
        """Ids of messages accepted for sending but not sent (an incarnation declared
        gone, a destination that left first), newest last (docs/sessions.md)."""
        return self._loop.call(self._protocol.undeliverable, link=self._link)

    def held(self) -> list[Any]:
        """Messages the causality module still holds (buffered or unsent)."""
        return self._loop.call(self._protocol.held, link=self._link)

    def waiting_for(self) -> dict[str, list[str]]:
        """Held message id -> the members it waits on."""
        return self._loop.call(self._protocol.waiting_for, link=self._link)

    def release_waiting_on(self, name: str) -> list[str]:
        """Stop waiting for what ``name`` (gone) never sent; returns the released ids.
        See :meth:`groupcomm.core.causality.CausalityManager.release_waiting_on`."""
        return self._loop.call(lambda: self._protocol.release_waiting_on(name),
                               link=self._link)

    def counters(self) -> dict[str, int]:
        """Send/receive counts, rejected frames by reason, the message frames this
        client put on the wire (``frames_sent``, ``frame_bytes_sent``), and with the
        reliable layer its counts prefixed ``reliable_`` (``reliable_acks_sent``, ...)."""
        def read() -> dict[str, int]:
            layer = self._protocol.node.shared.get("reliable")
            return {"frames_sent": 0, "frame_bytes_sent": 0, **self._link.stats,
                    **self._protocol.counters(),
                    **{f"reliable_{key}": value
                       for key, value in getattr(layer, "stats", {}).items()}}
        return self._loop.call(read, link=self._link)

    def _await_join(self, join_timeout: float) -> None:
        """Wait until the server accepted the join; else close and raise :class:`JoinError`.
        With several servers, one where nothing listens hands the join to the next."""
        failed = f"{self.name!r} could not join session {self.session!r}"
        joined = self._link.joined
        error = None
        deadline = time.monotonic() + join_timeout
        tried = 0
        while not joined.wait(min(max(0.0, deadline - time.monotonic()),
                                  LISTENER_PROBE_AFTER)):
            # not joined yet: if nothing listens at the address, say so now rather than
            # at the timeout (or try the next server); if something does, the likely
            # cause is a key the server cannot verify (it drops such frames without
            # reading them, so it cannot answer)
            address = self.server_address
            nobody = nobody_listens(address)
            if nobody is not None and tried + 1 < len(self.servers):
                tried += 1
                following = self.servers[(self.servers.index(address) + 1)
                                         % len(self.servers)]
                log.warning("%s: %s; joining at %s", self.name, nobody, following)
                self._loop.call(lambda to=following: self._link.move_to(to), link=self._link)
                continue
            if nobody is not None:
                error = f"{failed}: {nobody}; is the session server running at that address?"
            elif not joined.wait(max(0.0, deadline - time.monotonic())):
                error = (f"{failed}: the server at {address} accepts connections "
                         f"but did not answer within {join_timeout:g}s; is the session key "
                         "the server's? (it drops frames signed with another key without "
                         "reading them)")
            break
        error = error or self._link.join_error
        if error is not None:
            self.close()
            raise JoinError(error)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every send has left this client (queued, held back by the module,
        or waiting for a socket or a delay); False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        link = self._link
        protocol = self._protocol
        while True:
            if not self._inputs and (link.closed.is_set() or not self._loop.alive):
                return True
            try:
                busy = self._loop.call(lambda: protocol.busy or link.busy(),
                                       timeout=max(0.1, deadline - time.monotonic()),
                                       link=link)
            except Exception:  # the loop stopped or did not answer in time
                return not self._inputs
            if not busy:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def close(self, timeout: float = 2.0) -> None:
        """Leave the session and release the sockets (and the loop, when its own); sends
        still on their way get up to ``timeout`` seconds (:meth:`flush`)."""
        if self.closed:
            return
        link = self._link
        running = not link.closed.is_set() and self._loop.alive
        joined = link.joined.is_set() and link.join_error is None
        if running and joined:
            if not self.flush(timeout):
                log.warning("%s: closing with sends still queued or held back", self.name)
        self.closed = True
        if running:
            if joined:
                self._loop.call_soon(self._send_leave, link)
                link.left.wait(timeout)
            link.push_linger_ms = int(timeout * 1000)
            self._loop.remove(link, timeout)
        self._close_loop(timeout)
        self._protocol.end_trace()  # nothing drives the member any more

    def _send_leave(self) -> None:
        link = self._link
        if link.closed.is_set():
            return
        link.flush_outbox()
        self._protocol.leave(dict(link.direct_sent))

    def _close_loop(self, timeout: float = 2.0) -> None:
        if self._own_loop:
            self._loop.close(timeout)

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise CommunicatorError(f"communicator {self.name!r} is closed")
