"""The communicator: what applications talk through.

One I/O thread per communicator owns its ZeroMQ sockets and runs both pipelines, so
filters and managers are single-threaded. Calls from other threads are handed to it
through a queue and a wake-up pipe. Application sends are tagged at the call (on the
caller's thread) so tags reflect exactly what the application had seen (source 001).

Two routings: ``relayed`` (every frame goes through the session server) and ``direct``
(each client binds a PULL socket; the server tells members each other's addresses and
peers PUSH to each other).

Bounded queues: at most ``max_pending`` sends wait for the I/O thread — a sending
thread then waits, and gets :class:`SendQueueFull` after ``send_timeout`` seconds; a
socket that cannot take a frame (a slow peer) keeps it in an ordered backlog, and
past :data:`MAX_BACKLOG_FRAMES` waiting frames the communicator takes no new sends
(so the application's sends wait); with ``max_inbox`` undelivered messages in the
pull-model inbox it stops reading from the network, which pushes back on the senders
through ZeroMQ's high-water marks. Nothing already accepted is dropped.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import zmq

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator, SessionMessageListener
from groupcomm.core.membership import check_client_name
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.state_transfer import STATE_TIMEOUT
from groupcomm.core.tracing import Tracer, tracer_for
from groupcomm.transport.address import endpoint
from groupcomm.transport.config import ROUTINGS, check_routing, client_keys, filter_stacks
from groupcomm.transport.delays import self_delay_error
from groupcomm.transport.errors import (
    CommunicatorError,
    JoinError,
    MessageTooLarge,
    SendQueueFull,
)
from groupcomm.transport.inbound import Inbound
from groupcomm.transport.io_loop import (
    BACKLOG_RETRY,
    MAX_BACKLOG_FRAMES,
    READ_BUDGET,
    TICK_INTERVAL,
    IOLoop,
)
from groupcomm.transport.keys import resolve_key
from groupcomm.transport.outbox import MAX_BATCH_BYTES, MAX_OUTBOX_MESSAGES, Outbox
from groupcomm.transport.rejects import RejectLog
from groupcomm.transport.session_link import (
    DEPART_WAIT,
    EARLY_WAIT,
    MAX_EARLY_MESSAGES,
    SERVER_SILENCE_HEARTBEATS,
    SessionLink,
)
from groupcomm.transport.state_link import StateLink
from groupcomm.transport.wakeup import WakeSignal
from groupcomm.wire.frames import DEFAULT_MAX_FRAME, FrameCodec

__all__ = [
    "BACKLOG_RETRY", "DEPART_WAIT", "EARLY_WAIT", "HANDOFF_EVERY", "MAX_BACKLOG_FRAMES",
    "MAX_BATCH_BYTES", "MAX_EARLY_MESSAGES", "MAX_OUTBOX_MESSAGES", "READ_BUDGET", "ROUTINGS",
    "SERVER_SILENCE_HEARTBEATS", "TICK_INTERVAL", "Communicator", "CommunicatorError",
    "JoinError", "MessageTooLarge", "SendQueueFull",
]

log = logging.getLogger(__name__)

#: payloads whose size is checked at the call (others are measured when packed)
SIZED_PAYLOADS = frozenset({str, bytes, bytearray})
#: bytes of an envelope that are not the payload: ids, destinations, clock and the
#: module's headers (generous: a matrix header for dozens of members fits)
PAYLOAD_HEADROOM = 64 * 1024

#: A thread sending faster than the I/O thread takes its sends lets the I/O thread run
#: (a zero sleep releases the GIL) each time this many sends wait. Without it the sender
#: keeps the GIL for the interpreter's whole switch interval (5 ms, thousands of sends):
#: the sends wait longer, and live long enough for the garbage collector to promote them
#: and then run full collections — about 1.5 µs of CPU per message in the bench, against
#: 0.4 µs with the hand-off.
HANDOFF_EVERY = 256


class Communicator(IOLoop, SessionLink, StateLink, Inbound, Outbox):
    """A client of a session: sends through the send pipeline, delivers through the
    receive pipeline.

    ``causality`` names a module (or is a module instance); otherwise the explicitly
    given ``send_filters`` / ``receive_filters`` factories are used; otherwise the
    selectors' current factories. ``extra_send`` / ``extra_receive`` factories are
    added below the causality module (nearer the network) on each side.
    ``message_listener`` / ``session_listener`` are registered before the join, so they
    miss nothing (see :meth:`add_message_listener`, :meth:`add_session_message_listener`).

    This class is the API and the hand-over between threads; the I/O thread's parts
    are its bases: :class:`~groupcomm.transport.io_loop.IOLoop` (the poll loop),
    :class:`~groupcomm.transport.session_link.SessionLink` (join, leave, heartbeat,
    membership), :class:`~groupcomm.transport.inbound.Inbound` (frames in) and
    :class:`~groupcomm.transport.outbox.Outbox` (frames out).
    """

    def __init__(
        self,
        name: str,
        session: str,
        *,
        server: str,
        application: str = "default",
        key: bytes | None = None,
        key_file: str | None = None,
        routing: str = "relayed",
        causality: str | CausalityModule | None = None,
        send_filters: Sequence[MessageFilterCreator[SentMessage]] | None = None,
        receive_filters: Sequence[MessageFilterCreator[ReceivedMessage]] | None = None,
        extra_send: Sequence[MessageFilterCreator[SentMessage]] = (),
        extra_receive: Sequence[MessageFilterCreator[ReceivedMessage]] = (),
        trace_dir: str | os.PathLike[str] | None = None,
        tracer: Tracer | None = None,
        bind_host: str = "127.0.0.1",
        advertise_host: str | None = None,
        heartbeat_interval: float = 0.5,
        join_timeout: float = 10.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_pending: int = 10_000,
        max_inbox: int = 100_000,
        send_timeout: float = 30.0,
        context: zmq.Context | None = None,
        curve_dir: str | os.PathLike[str] | None = None,
        state_provider: Callable[[], Any] | None = None,
        state_consumer: Callable[[Any], None] | None = None,
        state_timeout: float = STATE_TIMEOUT,
        release_after: float | None = None,
        message_listener: Callable[[ReceivedMessage], Any] | None = None,
        session_listener: SessionMessageListener | None = None,
        sent_listener: Callable[[SentMessage], Any] | None = None,
        acknowledged_delivery: bool = False,
    ) -> None:
        check_routing(routing)
        #: per-client keys (:mod:`groupcomm.transport.curve`): encrypted, authenticated connection
        #: to the server, and relayed messages checked against the sender it attests
        self._curve = client_keys(curve_dir, routing, name)
        if not name or not session or not application:
            raise ValueError("name, session and application must be non-empty")
        check_client_name(name)
        resolved = key if key is not None else resolve_key(key_file)
        if resolved is None:
            raise JoinError(
                "no session key: give key_file, or set GROUPCOMM_KEY_FILE or GROUPCOMM_KEY"
            )
        self.name = name
        self.session = session
        self.application = application
        self.routing = routing
        self.server_address = server = endpoint(server, "server address")
        self.heartbeat_interval = heartbeat_interval
        self.codec = FrameCodec(resolved, max_frame=max_frame)
        self.rejects = RejectLog(f"communicator {name}")
        self.stats: Counter[str] = Counter()
        #: when a list, the I/O thread appends ``("in", ns)`` as it takes up each message
        #: frame and ``("send", ns)``, ``("sent", ns)`` around each frame it sends
        #: (``time.perf_counter_ns``): the timeline ``groupcomm bench --critical-path``
        #: reads. None (the default) records nothing.
        self.frame_timeline: list[tuple[str, int]] | None = None
        # a context of our own (unless given one), so that close() can wait for frames
        # still queued in ZeroMQ to leave (context.term() honours the sockets' linger)
        self._own_context = context is None
        self._context = context or zmq.Context()
        #: linger (ms) for peer sockets when the I/O thread closes them: 0 unless closing
        #: gracefully, when frames already handed to ZeroMQ get time to leave
        self._push_linger_ms = 0

        self._filter_stacks = filter_stacks(
            causality, send_filters, receive_filters, extra_send, extra_receive
        )
        #: a tracer given by the caller serves every incarnation; otherwise each member id
        #: gets its own file (carol.jsonl, then carol~2.jsonl), opened at its first line
        self._given_tracer = tracer
        self._trace_dir = trace_dir
        self.tracer = tracer or tracer_for(name, trace_dir)
        #: the application's session listeners (they move to a new node, see _new_node)
        self._session_listeners: list[SessionMessageListener] = []
        self.node = self._make_node(name)
        # listeners given here hear everything from the join on (one added after the
        # constructor returns may miss a member that joined in between)
        if session_listener is not None:
            self._session_listeners.append(session_listener)
            self.node.add_session_listener(session_listener)
        if message_listener is not None:
            self.node.message_listeners.append(message_listener)
        #: called on the I/O thread as each application message leaves for the network
        #: (a sender-side module may hold one back for a while: the IM shows it pending)
        self.node.sent_listener = sent_listener
        self._init_outbox(max_frame)
        #: the largest payload a send may carry (room left for ids, clock and headers)
        self._payload_limit = self._frame_limit - min(PAYLOAD_HEADROOM, self._frame_limit // 4)
        #: str payloads may take up to 4 bytes a character: shorter ones always fit
        self._check_size_from = self._payload_limit // 4
        self._init_session_link()
        self._init_state_link(state_provider, state_consumer, state_timeout)
        if release_after is not None and release_after < 0:
            raise ValueError("release_after must be >= 0 seconds (or None: hold)")
        #: what to do with messages held on a member that left: None holds them (shown by
        #: held() and waiting_for(), released by release_waiting_on()); a number of
        #: seconds releases them that long after the departure
        self.release_after = release_after
        #: with acknowledged delivery, a message handed to the application (a listener
        #: called, receive() returned it) is applied only when acknowledge() says so: the
        #: application clock and what a snapshot reflects wait until then
        self.acknowledged_delivery = acknowledged_delivery
        self._ack_lock = threading.Lock()
        #: handed over, not acknowledged yet, oldest first
        self._unacknowledged: deque[ReceivedMessage] = deque()
        self._handed = 0
        self._acknowledged = 0
        self._joined = threading.Event()
        self._join_error: str | None = None
        self._left = threading.Event()
        self._inbox: queue.Queue[ReceivedMessage] = queue.Queue()
        self._calls: deque[Callable[[], None]] = deque()
        #: tagged application sends waiting for the I/O thread (bounded by max_pending)
        self._outgoing: deque[SentMessage] = deque()
        #: application messages the I/O thread has put into the node so far (it alone
        #: counts them); compared with the node's ids, it tells whether a sending thread
        #: has tagged a message it has not queued yet (see StateLink._state_newcomer)
        self._taken = 0
        self._wakeup = WakeSignal()
        self.max_pending = max_pending
        self.max_inbox = max_inbox
        self.send_timeout = send_timeout
        self._room = threading.Condition()
        self._stop = False
        self._closed = False
        self._bind_host = bind_host
        self._advertise_host = advertise_host or bind_host
        self.direct_address = ""
        self._io_thread = threading.Thread(
            target=self._run, name=f"groupcomm-io-{name}", daemon=True
        )
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        #: the I/O thread's id (set by the thread itself, first thing): compared with
        #: threading.get_ident() on every send, which is cheaper than current_thread()
        self._io_ident: int | None = None
        self._io_thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise JoinError(f"cannot start communicator {name!r}: {self._start_error}")
        self._await_join(join_timeout)

    def _make_node(self, member: str) -> ProtocolNode:
        """A protocol node for this client as ``member`` (its member id), tracing to
        :attr:`tracer`."""
        send_filters, receive_filters = self._filter_stacks
        node = ProtocolNode(
            member,
            application=self.application,
            session=self.session,
            transmit=self._transmit,
            clock=time.time,
            send_creators=send_filters,
            receive_creators=receive_filters,
            tracer=self.tracer,
            deliver=self._deliverable,
        )
        node.system_listener = self._on_system
        return node

    # -- application API ---------------------------------------------------------------------
    def to_others(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every other member of the session."""
        return self._send(obj, [m for m in self.node.members if m != self.node.name])

    def to_all(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every member, this client included."""
        return self._send(obj, list(self.node.members))

    def to_user(self, name: str, obj: Any) -> SentMessage:
        """Send ``obj`` to one member (``UnknownPeerError`` if not a member)."""
        # the common send, spelled out (see _send_all): no lists, two calls less
        if self._closed:
            self._check_open()
        if type(obj) in SIZED_PAYLOADS and len(obj) > self._check_size_from:
            self._check_size(obj)
        message = self.node.tag_unicast(obj, self.membership.resolve(name))
        self.stats["app_sends"] += 1
        if threading.get_ident() == self._io_ident:
            self._taken += 1
            self.node.submit(message)
        else:
            if len(self._outgoing) >= self.max_pending:
                self._wait_for_room()
            outgoing = self._outgoing
            outgoing.append(message)
            if not self._wakeup.pending:
                self._wakeup.wake()
            elif not len(outgoing) % HANDOFF_EVERY:
                time.sleep(0)  # hand the GIL to the I/O thread (see HANDOFF_EVERY)
        return message

    def to_users(self, names: Iterable[str], obj: Any) -> SentMessage:
        """Send ``obj`` to the named members."""
        return self._send(obj, [self.membership.resolve(n) for n in names])

    def send(self, destinations: Iterable[str], obj: Any) -> list[SentMessage]:
        """Send ``obj`` to ``destinations``; returns every message the send became (one,
        or one unicast per destination with ``mfss`` / ``cykas``)."""
        return self._send_all(obj, [self.membership.resolve(n) for n in destinations])

    def _send(self, obj: Any, dests: list[str]) -> SentMessage:
        # mfss and cykas split a multicast into unicasts (see ProtocolNode.tag_sends)
        return self._send_all(obj, dests)[0]

    def _send_all(self, obj: Any, dests: list[str]) -> list[SentMessage]:
        if self._closed:
            self._check_open()
        if type(obj) in SIZED_PAYLOADS and len(obj) > self._check_size_from:
            self._check_size(obj)
        messages = self.node.tag_sends(obj, dests)
        self.stats["app_sends"] += len(messages)
        if threading.get_ident() == self._io_ident:
            self._taken += len(messages)
            self.node.submit_many(messages)
        else:
            outgoing = self._outgoing
            if len(outgoing) >= self.max_pending:
                self._wait_for_room()
            outgoing.extend(messages)
            if not self._wakeup.pending:
                self._wakeup.wake()
            elif len(outgoing) % HANDOFF_EVERY < len(messages):
                time.sleep(0)  # hand the GIL to the I/O thread (see HANDOFF_EVERY)
        return messages

    def _check_size(self, obj: str | bytes | bytearray) -> None:
        """Refuse, at the call, a payload that cannot fit in a frame (one that passes but
        still does not fit once packed goes as a stand-in: see Outbox._unencodable)."""
        size = len(obj.encode("utf-8", "surrogatepass")) if type(obj) is str else len(obj)
        limit = self._payload_limit
        if size > limit:
            raise MessageTooLarge(
                f"{self.name}: a payload of {size:,} bytes does not fit in a frame (at most "
                f"{limit:,} bytes of payload with max_frame={self.codec.max_frame:,}): "
                "nothing was sent; split it, or raise max_frame on every member")

    def _wait_for_room(self) -> None:
        """Block the sending thread while the I/O thread is behind (bounded queue)."""
        deadline = time.monotonic() + self.send_timeout
        with self._room:
            while len(self._outgoing) >= self.max_pending:
                self._wakeup.wake()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    raise SendQueueFull(
                        f"{self.name}: {len(self._outgoing)} sends are waiting for the network "
                        f"(limit max_pending={self.max_pending}) and none left for "
                        f"{self.send_timeout:g}s: a peer or the server is too slow"
                    )
                self._room.wait(min(remaining, 0.05))

    # -- delivery and session information -----------------------------------------------------
    def add_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Deliver messages by calling ``callback(message)`` on the I/O thread.

        With at least one listener the communicator is in the callback model. Messages
        delivered before the first listener was added (waiting for :meth:`receive`: for
        example those that arrived between the join and this call) are handed to it first,
        in order, so nothing is left behind in the pull model's inbox.
        """
        def add() -> None:
            listeners = self.node.message_listeners
            listeners.append(callback)
            if len(listeners) == 1:
                while True:
                    try:
                        message = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    self._hand_over_from_inbox(message, listeners)

        self._call(add)

    def remove_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Stop calling ``callback``."""
        self.node.message_listeners.remove(callback)

    def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        """Pull model: the next delivered message, or ``None`` after ``timeout`` seconds.

        The application's clock advances here, when the message is handed over. Raises
        :class:`CommunicatorError` at once when message listeners are registered and
        nothing is waiting: messages then go to the listeners (callback model), so
        ``receive()`` would only ever time out.
        """
        try:
            message = self._inbox.get_nowait()
        except queue.Empty:
            if self.node.message_listeners:
                raise CommunicatorError(
                    "receive() gets nothing while message listeners are registered: "
                    "messages go to the listeners (callback model); remove them with "
                    "remove_message_listener() to pull with receive()"
                ) from None
            try:
                message = self._inbox.get(timeout=timeout)
            except queue.Empty:
                return None
        self._hand_over_from_inbox(message)
        return message

    def _hand_over_from_inbox(self, message: ReceivedMessage,
                              listeners: Sequence[Callable[[ReceivedMessage], Any]] = ()) -> None:
        """The application has a message that waited in the inbox now: a snapshot taken
        from here on reflects it (StateLink), and the application clock advances (with
        acknowledged delivery, both wait for :meth:`acknowledge`)."""
        if self.acknowledged_delivery:
            self._hand_unacknowledged(message, listeners)
            return
        if self._recent_ids is not None:
            self._recent_ids.append(message.app_message_id)
        self.node.application_delivered(message, listeners)

    def _hand_unacknowledged(self, message: ReceivedMessage,
                             listeners: Sequence[Callable[[ReceivedMessage], Any]]) -> None:
        """Acknowledged delivery: count ``message`` as handed (before any listener runs,
        so a listener may acknowledge it at once) and call the listeners; the clock
        waits for :meth:`acknowledge`."""
        with self._ack_lock:
            self._unacknowledged.append(message)
            self._handed += 1
        for listener in ((listeners[0],) if len(listeners) == 1 else tuple(listeners)):
            try:
                listener(message)
            except Exception:
                log.exception("%s: message listener raised on %s", self.name,
                              message.message_id)

    def acknowledge(self, count: int) -> None:
        """Acknowledged delivery: the application has applied the first ``count``
        messages it was handed (cumulative: a count at or below an earlier one changes
        nothing). Those messages now advance the application clock, so a later send is
        tagged after them, and a snapshot given to a newcomer reflects them. Thread-safe.

        :class:`ValueError` for a count beyond what was handed, or not a non-negative
        int; :class:`CommunicatorError` without ``acknowledged_delivery=True``."""
        if not self.acknowledged_delivery:
            raise CommunicatorError(
                f"{self.name}: acknowledge() needs acknowledged_delivery=True (without it "
                "a message is applied as it is handed over)")
        if type(count) is not int or count < 0:
            raise ValueError(f"acknowledge() takes a count of messages (an int >= 0), "
                             f"not {count!r}")
        with self._ack_lock:
            if count > self._handed:
                raise ValueError(
                    f"{self.name}: cannot acknowledge {count} message(s): only "
                    f"{self._handed} were handed to the application so far "
                    f"({self._acknowledged} acknowledged)")
            recent = self._recent_ids
            # applied in order under the lock, so a concurrent acknowledge() cannot
            # apply a later message before an earlier one
            while self._acknowledged < count:
                message = self._unacknowledged.popleft()
                self._acknowledged += 1
                if recent is not None:
                    recent.append(message.app_message_id)
                self.node.application_delivered(message)

    @property
    def handed_over(self) -> int:
        """Messages handed to the application so far (acknowledged delivery counts them
        from 1, the numbering :meth:`acknowledge` takes)."""
        return self._handed

    def add_session_message_listener(self, listener: SessionMessageListener) -> None:
        """Be told of joins and leaves (on the I/O thread). Members are named by member
        id: ``carol``, then ``carol~2`` for the same name back after it left (see
        :mod:`groupcomm.core.membership`)."""
        def add() -> None:
            self._session_listeners.append(listener)
            self.node.add_session_listener(listener)

        self._call(add)

    def set_minimum_delay_to_peer(self, name: str, ms: float) -> None:
        """Frames to ``name`` wait at least ``ms`` ms before they leave (testing).

        :class:`ValueError` when ``name`` is this client or ``ms`` is not a finite
        number from 0 to :data:`~groupcomm.transport.delays.MAX_DELAY_MS`."""
        if name in (self.name, self.member_id):
            raise ValueError(self_delay_error(name))
        self.delays.set_minimum_delay(name, ms)

    def set_delay_variation(self, ms: float, keep_fifo: bool = True) -> None:
        """Every frame waits a random extra 0..``ms`` ms; ``keep_fifo`` keeps per-peer order.
        :class:`ValueError` unless ``ms`` is a finite number from 0 to
        :data:`~groupcomm.transport.delays.MAX_DELAY_MS`."""
        self.delays.set_jitter(ms, keep_fifo)

    @property
    def others(self) -> list[str]:
        """Every member but this client, in join order."""
        return [m for m in self.node.members if m != self.node.name]

    @property
    def members(self) -> list[str]:
        """Current members of the session in join order, by member id."""
        return list(self.node.members)

    @property
    def member_id(self) -> str:
        """This client's member id: its name, or ``name~N`` when the session had seen
        the name before (a restart, or a return after being declared gone)."""
        return self.node.name

    @property
    def payload_limit(self) -> int:
        """The largest payload (bytes of a ``str``'s UTF-8 text, or of ``bytes``) a send
        takes: a larger one is refused with :class:`MessageTooLarge` (set by
        ``max_frame``)."""
        return self._payload_limit

    @property
    def members_at_join(self) -> list[str]:
        """The members when this client (its current incarnation) joined, itself
        included: more than itself means it joined late (and got state, if it asked)."""
        return list(self._members_at_join)

    def undeliverable(self) -> list[str]:
        """Ids of messages this client accepted for sending but could not send: it was
        declared gone while stalled and came back as a new member, so what its old
        incarnation still held cannot be sent as the new one's), or a destination left
        before they were sent (``mfss``, ``cykas``) or, with the ``reliable`` layer,
        before it acknowledged them (they may not have reached it). Newest last."""
        return [*self._undeliverable, *self.node.undeliverable]

    def held(self) -> list[Any]:
        """Messages the causality module still holds (buffered or unsent)."""
        return self._call(lambda: [m for m in self.node.held()])

    def waiting_for(self) -> dict[str, list[str]]:
        """Held message id -> the members it waits on."""
        return self._call(self.node.waiting_for)

    def release_waiting_on(self, name: str) -> list[str]:
        """Stop waiting for what ``name`` (gone) never sent; returns the released ids.
        See :meth:`groupcomm.core.causality.CausalityManager.release_waiting_on`."""
        return self._call(lambda: self.node.release_waiting_on(name))

    def counters(self) -> dict[str, int]:
        """Send/receive counts and rejected frames by reason; ``frames_sent`` and
        ``frame_bytes_sent`` count the message frames this client put on the wire (to
        the server or to peers) and their bytes."""
        result = {"frames_sent": 0, "frame_bytes_sent": 0}
        result.update(self.stats)
        result.update(self.membership.stats)
        for reason, count in self.rejects.counts.items():
            result[f"rejected_{reason}"] = count
        return result

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every send has left this client: nothing queued for the I/O thread,
        nothing the causality module still holds back (``mfss`` / ``cykas`` output
        buffers), no frame waiting for a slow socket or an injected delay. Returns False
        when ``timeout`` passed first. Received messages held for delivery do not count:
        they wait on other members, not on this one."""
        deadline = time.monotonic() + timeout
        while True:
            if not self._outgoing and not self._io_thread.is_alive():
                return True
            try:
                busy = self._call(lambda: bool(
                    self._outgoing or not self.node.idle or self.node.holds_sends()
                    or self._backlog_frames or self._outbox or len(self.delays)
                ), timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # the I/O thread stopped or did not answer in time
                return not self._outgoing
            if not busy:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def close(self, timeout: float = 2.0) -> None:
        """Leave the session, stop the I/O thread and release the sockets.

        Sends still on their way out get up to ``timeout`` seconds first (see
        :meth:`flush`); what is left after that is not sent.
        """
        if self._closed:
            return
        if self._io_thread.is_alive() and self._joined.is_set() and self._join_error is None:
            if not self.flush(timeout):
                log.warning("%s: closing with sends still queued or held back", self.name)
        self._closed = True
        if self._io_thread.is_alive():
            if self._joined.is_set() and self._join_error is None:
                self._call_soon(self._send_leave)
                self._left.wait(timeout)
            self._push_linger_ms = int(timeout * 1000)
            self._stop = True
            self._wakeup.wake()
            self._io_thread.join(timeout)
        # the trace's last line says this process left (an analysis tells a trace that
        # stops without it: killed, crashed or declared gone)
        self.node.trace("leave", client=self.node.name)
        if self._own_context and not self._io_thread.is_alive():
            # returns once frames still queued for peers have left (or linger passed)
            self._context.term()
        self._wakeup.close()
        self.tracer.close()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise CommunicatorError(f"communicator {self.name!r} is closed")

    def _hand_over(self, message: ReceivedMessage) -> None:
        self.stats["delivered"] += 1
        listeners = self.node.message_listeners
        if listeners and self.acknowledged_delivery:
            self._hand_unacknowledged(message, listeners)
        elif listeners:  # callback model (the clock advances as the listeners are called)
            if self._recent_ids is not None:  # what a snapshot taken now reflects
                self._recent_ids.append(message.app_message_id)
            self.node.application_delivered(message, listeners)
        else:
            self._inbox.put(message)
