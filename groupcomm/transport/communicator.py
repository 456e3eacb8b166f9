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
from concurrent.futures import Future
from typing import Any

import zmq

from groupcomm.core.causality import CausalityModule, ProtocolViolation
from groupcomm.core.filtering import MessageFilterCreator, SessionMessageListener
from groupcomm.core.messages import MessageError, ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.tracing import Tracer, tracer_for
from groupcomm.transport.codec import (
    DEFAULT_MAX_FRAME,
    FrameCodec,
    FrameRejected,
    PackedEnvelope,
    decode_batch,
    decode_received,
    pack_envelope,
    pack_envelopes,
    unpack_envelopes,
)
from groupcomm.transport.curve import ClientKeys, CurveKeyError
from groupcomm.transport.delays import DelayPlan
from groupcomm.transport.keys import resolve_key
from groupcomm.transport.server import RejectLog
from groupcomm.transport.wakeup import WakeSignal
from groupcomm.transport.wire import (
    BATCH,
    MESSAGE,
    PACKED,
    SESSION,
    kind_of,
    open_session,
    seal_session,
)

log = logging.getLogger(__name__)

ROUTINGS = ("relayed", "direct")
#: Heartbeats without an answer before the server is reported unreachable.
SERVER_SILENCE_HEARTBEATS = 4
#: Messages from a sender whose join notice has not arrived yet are kept this long ...
EARLY_WAIT = 5.0
#: ... and at most this many of them (then they are rejected as unknown_peer).
MAX_EARLY_MESSAGES = 10_000
#: A member that left gracefully may still have direct frames on their way here (the
#: server's "left" notice can overtake them): it stays a member until they have all
#: arrived, or this many seconds have passed.
DEPART_WAIT = 10.0
#: How often filters with timers (the reliable layer) are ticked, in seconds.
TICK_INTERVAL = 0.02
#: Frames waiting for slow sockets before the communicator stops taking new sends.
MAX_BACKLOG_FRAMES = 10_000
#: How often, in seconds, a full socket or a paused inbox is looked at again.
BACKLOG_RETRY = 0.01
#: A frame carries at most this many bytes of messages (and at most half the maximum
#: frame size, so that receivers never refuse a batch that single messages would pass).
MAX_BATCH_BYTES = 512 * 1024
#: Messages queued for the network are encoded and sent once this many wait (otherwise
#: once per turn of the I/O loop).
MAX_OUTBOX_MESSAGES = 4096
#: A thread sending faster than the I/O thread takes its sends lets the I/O thread run
#: (a zero sleep releases the GIL) each time this many sends wait. Without it the sender
#: keeps the GIL for the interpreter's whole switch interval (5 ms, thousands of sends):
#: the sends wait longer, and live long enough for the garbage collector to promote them
#: and then run full collections — about 1.5 µs of CPU per message in the bench, against
#: 0.4 µs with the hand-off.
HANDOFF_EVERY = 256
#: longest stretch (s) the I/O thread reads input before it turns to heartbeats, timers
#: and sends: a flood of arrivals on a loaded machine must not make this client look dead
READ_BUDGET = 0.05


class CommunicatorError(RuntimeError):
    """The communicator cannot do what was asked (not joined, closed, ...)."""


class SendQueueFull(CommunicatorError):
    """The bounded send queue stayed full for ``send_timeout`` seconds."""


class JoinError(CommunicatorError):
    """Joining the session failed (duplicate name, no server, wrong key, ...)."""


class Communicator:
    """A client of a session: sends through the send pipeline, delivers through the
    receive pipeline.

    ``causality`` names a module (or is a module instance); otherwise the explicitly
    given ``send_filters`` / ``receive_filters`` factories are used; otherwise the
    selectors' current factories. ``extra_send`` / ``extra_receive`` factories are
    added below the causality module (nearer the network) on each side.
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
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")
        #: per-client keys (:mod:`groupcomm.transport.curve`): encrypted, authenticated connection
        #: to the server, and relayed messages checked against the sender it attests
        self._curve: ClientKeys | None = None
        if curve_dir is not None:
            if routing != "relayed":
                raise ValueError("per-client keys (curve_dir) work with relayed routing only: "
                                 "direct connections are not authenticated per client")
            try:
                self._curve = ClientKeys.from_dir(curve_dir, name)
            except CurveKeyError as error:
                raise ValueError(f"per-client keys: {error}") from None
        if not name or not session or not application:
            raise ValueError("name, session and application must be non-empty")
        resolved = key if key is not None else resolve_key(key_file)
        if resolved is None:
            raise JoinError(
                "no session key: give key_file, or set GROUPCOMM_KEY_FILE or GROUPCOMM_KEY"
            )
        self.name = name
        self.session = session
        self.application = application
        self.routing = routing
        self.server_address = server
        self.heartbeat_interval = heartbeat_interval
        self.codec = FrameCodec(resolved, max_frame=max_frame)
        self.delays = DelayPlan()
        self.rejects = RejectLog(f"communicator {name}")
        self.stats: Counter[str] = Counter()
        # a context of our own (unless given one), so that close() can wait for frames
        # still queued in ZeroMQ to leave (context.term() honours the sockets' linger)
        self._own_context = context is None
        self._context = context or zmq.Context()
        #: linger (ms) for peer sockets when the I/O thread closes them: 0 unless closing
        #: gracefully, when frames already handed to ZeroMQ get time to leave
        self._push_linger_ms = 0

        if causality is not None:
            from groupcomm.core.registry import get_module

            module = get_module(causality) if isinstance(causality, str) else causality
            send_filters = [module.send_creator()]
            receive_filters = [module.receive_creator()]
        if send_filters is not None:
            send_filters = [*send_filters, *extra_send]
        elif extra_send:
            from groupcomm.core.filtering import SendMessageFilterSelector

            send_filters = [SendMessageFilterSelector.get_message_filter_creator(), *extra_send]
        if receive_filters is not None:
            receive_filters = [*extra_receive, *receive_filters]
        elif extra_receive:
            from groupcomm.core.filtering import ReceivedMessageFilterSelector

            receive_filters = [
                *extra_receive, ReceivedMessageFilterSelector.get_message_filter_creator()
            ]
        self.tracer = tracer or tracer_for(name, trace_dir)
        self.node = ProtocolNode(
            name,
            application=application,
            session=session,
            transmit=self._transmit,
            clock=time.time,
            send_creators=send_filters,
            receive_creators=receive_filters,
            tracer=self.tracer,
        )
        self.node.on_deliverable = self._deliverable
        self._inbox: queue.Queue[ReceivedMessage] = queue.Queue()
        self._calls: deque[Callable[[], None]] = deque()
        #: tagged application sends waiting for the I/O thread (bounded by max_pending)
        self._outgoing: deque[SentMessage] = deque()
        #: (expiry, message) from senders not yet known to be members (see _hold_early)
        self._early: list[tuple[float, ReceivedMessage]] = []
        self._wakeup = WakeSignal()
        # messages waiting to leave, by destination tuple; flushed once per loop turn so
        # that a burst of sends is encoded in one call and becomes one signed frame per
        # destination set (see _flush_outbox)
        self._outbox: dict[tuple[str, ...], list[SentMessage | PackedEnvelope]] = {}
        self._outbox_count = 0
        self._batch_budget = min(MAX_BATCH_BYTES, max_frame // 2)
        # frames a socket could not take yet (a slow peer), per socket, in order
        self._backlogs: dict[zmq.Socket, deque[list[bytes]]] = {}
        self._backlog_frames = 0
        self.max_pending = max_pending
        self.max_inbox = max_inbox
        self.send_timeout = send_timeout
        self._room = threading.Condition()
        self._addresses: dict[str, str] = {}
        self._pushes: dict[str, zmq.Socket] = {}
        #: frames pushed directly to each peer / received directly from each sender; a
        #: graceful leave carries the former, so receivers know when a leaver's last
        #: direct frame has arrived
        self._direct_sent: Counter[str] = Counter()
        self._direct_received: Counter[str] = Counter()
        #: members that left while some of their direct frames were still on the way:
        #: name -> (frames they sent here, when to stop waiting)
        self._departing: dict[str, tuple[int, float]] = {}
        self._joined = threading.Event()
        self._join_error: str | None = None
        self._left = threading.Event()
        self._stop = False
        self._closed = False
        self._server_seen = time.monotonic()
        self._last_rejoin = 0.0
        #: True while the session server has not answered for a few heartbeats.
        self.server_unreachable = False
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
        if not self._joined.wait(join_timeout):
            self.close()
            raise JoinError(
                f"{name!r} could not join session {session!r} at {server} within "
                f"{join_timeout:g}s (is the server running, and is the session key the same?)"
            )
        if self._join_error is not None:
            error = self._join_error
            self.close()
            raise JoinError(error)

    # -- application API ---------------------------------------------------------------------
    def to_others(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every other member of the session."""
        return self._send(obj, [m for m in self.node.members if m != self.name])

    def to_all(self, obj: Any) -> SentMessage:
        """Send ``obj`` to every member, this client included."""
        return self._send(obj, list(self.node.members))

    def to_user(self, name: str, obj: Any) -> SentMessage:
        """Send ``obj`` to one member (``UnknownPeerError`` if not a member)."""
        # the common send, spelled out (see _send_all): no lists, two calls less
        if self._closed:
            self._check_open()
        message = self.node.tag_unicast(obj, name)
        self.stats["app_sends"] += 1
        if threading.get_ident() == self._io_ident:
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
        return self._send(obj, list(names))

    def send(self, destinations: Iterable[str], obj: Any) -> list[SentMessage]:
        """Send ``obj`` to ``destinations``; returns every message the send became (one,
        or one unicast per destination with ``mfss`` / ``cykas``)."""
        return self._send_all(obj, list(destinations))

    def _send(self, obj: Any, dests: list[str]) -> SentMessage:
        # mfss and cykas split a multicast into unicasts (see ProtocolNode.tag_sends)
        return self._send_all(obj, dests)[0]

    def _send_all(self, obj: Any, dests: list[str]) -> list[SentMessage]:
        if self._closed:
            self._check_open()
        messages = self.node.tag_sends(obj, dests)
        self.stats["app_sends"] += len(messages)
        if threading.get_ident() == self._io_ident:
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

    def add_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Deliver messages by calling ``callback(message)`` on the I/O thread.

        With at least one listener the communicator is in the callback model; messages
        already waiting for :meth:`receive` stay there.
        """
        self.node.message_listeners.append(callback)

    def remove_message_listener(self, callback: Callable[[ReceivedMessage], Any]) -> None:
        """Stop calling ``callback``."""
        self.node.message_listeners.remove(callback)

    def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        """Pull model: the next delivered message, or ``None`` after ``timeout`` seconds.

        The application's clock advances here, when the message is handed over.
        """
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        self.node.application_delivered(message)
        return message

    def add_session_message_listener(self, listener: SessionMessageListener) -> None:
        """Be told of joins and leaves (on the I/O thread)."""
        self._call(lambda: self.node.add_session_listener(listener))

    def set_minimum_delay_to_peer(self, name: str, ms: float) -> None:
        """Frames to ``name`` wait at least ``ms`` ms before they leave (testing)."""
        self.delays.set_minimum_delay(name, ms)

    def set_delay_variation(self, ms: float, keep_fifo: bool = True) -> None:
        """Every frame waits a random extra 0..``ms`` ms; ``keep_fifo`` keeps per-peer order."""
        self.delays.set_jitter(ms, keep_fifo)

    @property
    def others(self) -> list[str]:
        """Every member but this client, in join order."""
        return [m for m in self.node.members if m != self.name]

    @property
    def members(self) -> list[str]:
        """Current members of the session in join order."""
        return list(self.node.members)

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
        """Send/receive counts and rejected frames by reason."""
        result = dict(self.stats)
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
                    self._outgoing or not self.node.idle
                    or any(isinstance(m, SentMessage) for m in self.node.held())
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

    # -- thread hand-over ---------------------------------------------------------------------
    def _on_io_thread(self) -> bool:
        return threading.get_ident() == self._io_ident

    def _call_soon(self, function: Callable[[], None]) -> None:
        if self._on_io_thread():
            function()
            return
        self._calls.append(function)
        self._wakeup.wake()

    def _call(self, function: Callable[[], Any], timeout: float = 10.0) -> Any:
        if self._on_io_thread() or not self._io_thread.is_alive():
            return function()
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # handed back to the caller
                future.set_exception(error)

        self._calls.append(run)
        self._wakeup.wake()
        return future.result(timeout)

    # -- I/O thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        self._io_ident = threading.get_ident()
        try:
            self._dealer = self._context.socket(zmq.DEALER)
            self._dealer.setsockopt(zmq.LINGER, 0)
            # libzmq reconnects by itself, backing off from 100 ms to 2 s
            self._dealer.setsockopt(zmq.RECONNECT_IVL, 100)
            self._dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
            if self._curve is not None:
                self._curve.apply(self._dealer)
            self._dealer.connect(self.server_address)
            self._pull: zmq.Socket | None = None
            if self.routing == "direct":
                self._pull = self._context.socket(zmq.PULL)
                self._pull.setsockopt(zmq.LINGER, 0)
                self._pull.setsockopt(zmq.MAXMSGSIZE, self.codec.max_frame + 64)
                port = self._pull.bind_to_random_port(f"tcp://{self._bind_host}")
                self.direct_address = f"tcp://{self._advertise_host}:{port}"
        except Exception as error:
            self._start_error = error
            self._started.set()
            return
        self._started.set()
        poller = zmq.Poller()
        poller.register(self._wakeup.fileno, zmq.POLLIN)
        inputs = [self._dealer] if self._pull is None else [self._dealer, self._pull]
        reading = False
        self._send_session("join", address=self.direct_address)
        next_heartbeat = time.monotonic() + self.heartbeat_interval
        next_tick = time.monotonic() + TICK_INTERVAL
        try:
            while not self._stop:
                # backpressure: stop reading while the application's inbox is full
                want_read = self._inbox.qsize() < self.max_inbox
                if want_read != reading:
                    for socket in inputs:
                        if want_read:
                            poller.register(socket, zmq.POLLIN)
                        else:
                            poller.unregister(socket)
                    reading = want_read
                    if not want_read:
                        self.stats["inbox_full_pauses"] += 1
                now = time.monotonic()
                deadline = next_heartbeat
                if self.node.tickers:
                    deadline = min(deadline, next_tick)
                due = self.delays.next_due()
                if due is not None:
                    deadline = min(deadline, due)
                if self._backlog_frames or not reading:
                    deadline = min(deadline, now + BACKLOG_RETRY)
                events = dict(poller.poll(max(0.0, (deadline - now) * 1000)))
                if self._backlog_frames:
                    self._flush_backlogs()
                if reading and self._dealer in events:
                    self._drain_socket(self._dealer, from_server=True)
                if reading and self._pull is not None and self._pull in events:
                    self._drain_socket(self._pull, from_server=False)
                # backpressure: take no new sends while a slow peer's frames pile up
                if self._wakeup.fileno in events or self._calls or self._outgoing:
                    if self._backlog_frames < MAX_BACKLOG_FRAMES:
                        self._run_calls()
                    else:
                        self._wakeup.clear()
                if self._outbox:
                    self._flush_outbox()
                now = time.monotonic()
                if due is not None and now >= due:
                    outbox = self._outbox
                    for peer, envelope in self.delays.pop_due(now):
                        outbox.setdefault((peer,), []).append(envelope)
                    self._flush_outbox()
                if self._early:
                    self._release_early(now)
                if self._departing:
                    self._expire_departing(now)
                if self.node.tickers and now >= next_tick:
                    self.node.tick()
                    next_tick = now + TICK_INTERVAL
                    if self._outbox:
                        self._flush_outbox()
                if now >= next_heartbeat:
                    if self._joined.is_set():
                        self._check_server(now)
                        self._send_session("heartbeat")
                    next_heartbeat = now + self.heartbeat_interval
        except Exception:
            log.exception("%s: I/O thread failed", self.name)
        finally:
            self._io_ident = None  # a later thread may be given the same id
            self._dealer.close(linger=0)
            if self._pull is not None:
                self._pull.close(linger=0)
            for push in self._pushes.values():
                push.close(linger=self._push_linger_ms)
            if isinstance(self.tracer, Tracer) and hasattr(self.tracer, "flush"):
                self.tracer.flush()

    def _run_calls(self) -> None:
        self._wakeup.clear()
        outgoing = self._outgoing
        if outgoing:
            waking = len(outgoing) >= self.max_pending  # a sender may be waiting for room
            batch = [outgoing.popleft() for _ in range(len(outgoing))]
            self.node._sends.extend(batch)  # noqa: SLF001 - the node is ours
            self._drain_node()
            if waking:
                with self._room:
                    self._room.notify_all()
        calls = self._calls
        while calls:
            function = calls.popleft()
            try:
                function()
            except ProtocolViolation as error:
                self.stats["protocol_errors"] += 1
                log.error("%s: protocol error: %s", self.name, error)
            except Exception:
                log.exception("%s: error while running a handed-over call", self.name)

    def _drain_socket(self, socket: zmq.Socket, from_server: bool) -> None:
        stop_at = time.monotonic() + READ_BUDGET
        for _ in range(500):
            if time.monotonic() > stop_at:
                return
            try:
                parts = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if from_server and len(parts) == 1:
                self._handle_session_frame(parts[0])
            elif self._curve is not None:
                if from_server and len(parts) == 3 and parts[0] == MESSAGE:
                    self._handle_message_frame(parts[1], attested=parts[2])
                else:
                    self.rejects.reject("malformed", "relayed frame without its attested sender")
            elif from_server and len(parts) == 2 and parts[0] == MESSAGE:
                self._handle_message_frame(parts[-1])
            elif not from_server and len(parts) == 1:
                self._handle_message_frame(parts[0], direct=True)
            else:
                self.rejects.reject("malformed", f"unexpected {len(parts)}-part message")

    def _check_server(self, now: float) -> None:
        """Notice a silent server (it answers every heartbeat) and say so once."""
        silent = now - self._server_seen
        if silent > SERVER_SILENCE_HEARTBEATS * self.heartbeat_interval:
            if not self.server_unreachable:
                self.server_unreachable = True
                self.stats["server_outages"] += 1
                log.warning("%s: no answer from the session server for %.1fs; retrying "
                            "(direct traffic goes on; relayed frames wait)", self.name, silent)

    def _rejoin(self) -> None:
        """The server does not know us (it restarted): join again, at most once a beat."""
        now = time.monotonic()
        if now - self._last_rejoin < self.heartbeat_interval:
            return
        self._last_rejoin = now
        self.stats["rejoins"] += 1
        log.warning("%s: the session server does not know this client (restarted?); "
                    "joining again", self.name)
        self._send_session("join", address=self.direct_address)

    def _handle_session_frame(self, frame: bytes) -> None:
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "expected a session frame from the server")
            notice = open_session(body)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, "server")
            return
        op = notice["op"]
        self._server_seen = time.monotonic()
        if self.server_unreachable:
            self.server_unreachable = False
            log.warning("%s: the session server answers again", self.name)
        if op == "pong":
            return
        if op == "joined":
            self._on_joined(notice)
        elif op == "left":
            self._on_left(notice)
        elif op == "error":
            self._on_error(notice)
        elif op == "welcome":
            log.debug("%s: welcomed by server %s", self.name, notice["server_id"])
        else:
            self.rejects.reject("malformed", f"unexpected session op {op!r}", "server")

    def _hold_early(self, message: ReceivedMessage) -> None:
        """A signed message from a client we have not yet been told joined: with direct
        routing its first frames can overtake the server's join notice. Keep it (bounded,
        briefly) and hand it over when the join arrives; reject it after that."""
        if len(self._early) >= MAX_EARLY_MESSAGES:
            self.rejects.reject("unknown_peer", f"sender {message.sender!r} is not a member "
                                f"(and {len(self._early)} early messages already wait)")
            return
        self._early.append((time.monotonic() + EARLY_WAIT, message))

    def _release_early(self, now: float | None = None) -> None:
        """Hand over early messages whose sender joined; reject the expired ones."""
        if not self._early:
            return
        members = set(self.node.members)
        keep: list[tuple[float, ReceivedMessage]] = []
        for due, message in self._early:
            if message.sender in members:
                self.stats["messages_received"] += 1
                self.node.arrived(message)
            elif now is not None and now >= due:
                self.rejects.reject("unknown_peer", f"sender {message.sender!r} is not a "
                                    f"member (waited {EARLY_WAIT:g}s for its join)")
            else:
                keep.append((due, message))
        self._early = keep
        self._drain_node()

    def _on_joined(self, notice: dict[str, Any]) -> None:
        if notice["client"] in self._departing:  # back under the same name: a new member
            self._complete_leave(notice["client"])
        addresses = notice["addresses"]
        if isinstance(addresses, dict):
            self._addresses.update({str(k): str(v) for k, v in addresses.items()})
        users = [str(u) for u in notice["all_users"]]
        self.node.client_joined(
            notice["client"],
            is_new_session=bool(notice["is_new_session"]),
            is_new_application=bool(notice["is_new_application"]),
            all_users=users,
        )
        if notice["client"] == self.name:
            self._joined.set()
        self._release_early()

    def _on_left(self, notice: dict[str, Any]) -> None:
        client = notice["client"]
        if client == self.name:
            self._left.set()
            return
        expected = notice.get("direct_frames")
        if isinstance(expected, bool) or not isinstance(expected, int):
            expected = 0  # left without saying (gone), or relayed only
        if self._direct_received[client] < expected:
            # its last direct frames are still on the way: keep it a member until they
            # are in, so that nothing it sent before leaving is refused as unknown
            log.debug("%s: %s left; waiting for %d more of its direct frames", self.name,
                      client, expected - self._direct_received[client])
            self._departing[client] = (expected, time.monotonic() + DEPART_WAIT)
            return
        self._complete_leave(client)

    def _expire_departing(self, now: float) -> None:
        for client, (expected, due) in list(self._departing.items()):
            if now >= due:
                missing = expected - self._direct_received[client]
                self.stats["departed_frames_missing"] += missing
                log.warning("%s: %s left; %d of the %d frames it sent here directly never "
                            "arrived (waited %gs)", self.name, client, missing, expected,
                            DEPART_WAIT)
                self._complete_leave(client)

    def _complete_leave(self, client: str) -> None:
        self._departing.pop(client, None)
        self._direct_received.pop(client, None)
        self._direct_sent.pop(client, None)  # a later member of that name counts anew
        self._addresses.pop(client, None)
        push = self._pushes.pop(client, None)
        if push is not None:
            dropped = self._backlogs.pop(push, None)
            if dropped:
                self._backlog_frames -= len(dropped)
            push.close(linger=0)
        self.node.client_left(client)

    def _on_error(self, notice: dict[str, Any]) -> None:
        detail = f"{notice['reason']}: {notice['detail']}"
        if not self._joined.is_set():
            self._join_error = detail
            self._joined.set()
            return
        if notice["reason"] == "not_a_member" and not self._closed:
            self._rejoin()
            return
        log.error("%s: server error: %s", self.name, detail)
        self.stats[f"server_error_{notice['reason']}"] += 1

    def _handle_message_frame(self, frame: bytes, attested: bytes | None = None,
                              direct: bool = False) -> None:
        try:
            body, _, _ = self.codec.open(frame)
            head = kind_of(body)
            if head == PACKED:
                self.stats["frames_received"] += 1
                origin = self._handle_packed(body, attested)
                envelopes: list[bytes] = []
            elif head == MESSAGE:
                envelopes = [body[1:]]
            elif head == BATCH:
                try:
                    envelopes = decode_batch(body)
                except MessageError as error:
                    raise FrameRejected("malformed", str(error)) from None
            else:
                raise FrameRejected("malformed", "expected a message frame")
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return
        if envelopes:
            self.stats["frames_received"] += 1
            sender = attested.decode("utf-8", "replace") if attested is not None else None
            origin = None
            for envelope in envelopes:
                origin = self._handle_envelope(envelope, sender) or origin
        self._drain_node()
        if direct and origin is not None:
            self._direct_received[origin] += 1
            departing = self._departing.get(origin)
            if departing is not None and self._direct_received[origin] >= departing[0]:
                self._complete_leave(origin)

    def _handle_packed(self, body: bytes, attested: bytes | None) -> str | None:
        """Hand on the messages of a verified ``P`` body (the checks every message of
        one sender shares are made once); returns the sender's name once it decoded.
        Raises :class:`FrameRejected` when the body as a whole is malformed."""
        try:
            app, session, sender, messages, errors = unpack_envelopes(body, self.name)
        except MessageError as error:
            raise FrameRejected("malformed", str(error)) from None
        reject = self.rejects.reject
        for detail in errors:  # one count per bad message, as for separate envelopes
            reject("malformed", detail)
        if attested is not None and sender != attested.decode("utf-8", "replace"):
            for _ in messages:
                reject("impersonation",
                       f"{attested.decode('utf-8', 'replace')!r} sent a message signed as "
                       f"from {sender!r}")
            return None
        if session != self.session or app != self.application:
            for _ in messages:
                reject("wrong_session", f"message for {app}/{session}")
            return sender
        if not messages:
            return sender
        if sender not in self.node.members:
            for message in messages:
                self._hold_early(message)
            return sender
        self.stats["messages_received"] += len(messages)
        self.node.arrived_many(messages)
        return sender

    def _drain_node(self) -> None:
        """Run the node's queued work; a peer's bad message is counted and skipped, and
        the work queued behind it still runs."""
        for _ in range(100_000):
            try:
                self.node.drain()
                return
            except ProtocolViolation as error:
                self.stats["protocol_errors"] += 1
                log.error("%s: dropped a message that breaks the protocol: %s", self.name, error)

    def _handle_envelope(self, envelope: bytes, attested: str | None = None) -> str | None:
        """Hand one verified envelope on; returns its sender's name once it decoded."""
        try:
            try:
                message = decode_received(envelope, self.name)
            except MessageError as error:
                raise FrameRejected("malformed", str(error)) from None
            if attested is not None and message.sender != attested:
                raise FrameRejected(
                    "impersonation",
                    f"{attested!r} sent a message signed as from {message.sender!r}",
                )
            if message.session_name != self.session or (
                message.application_name != self.application
            ):
                raise FrameRejected(
                    "wrong_session",
                    f"message for {message.application_name}/{message.session_name}",
                )
            if message.sender not in self.node.members:
                self._hold_early(message)
                return message.sender
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return None
        self.stats["messages_received"] += 1
        self.node.arrived(message)
        return message.sender

    # -- sending ------------------------------------------------------------------------------
    def _send_session(self, op: str, **fields: Any) -> None:
        self._send_parts(self._dealer, [
            seal_session(self.codec, op, client=self.name, application=self.application,
                         session=self.session, **fields)
        ])

    def _send_parts(self, socket: zmq.Socket, parts: list[bytes]) -> None:
        """Send without blocking; what the socket cannot take now waits, in order."""
        backlog = self._backlogs.get(socket)
        if not backlog:
            try:
                socket.send_multipart(parts, zmq.NOBLOCK)
                return
            except zmq.Again:
                backlog = self._backlogs.setdefault(socket, deque())
        backlog.append(parts)
        self._backlog_frames += 1

    def _flush_backlogs(self) -> None:
        for socket, backlog in list(self._backlogs.items()):
            while backlog:
                try:
                    socket.send_multipart(backlog[0], zmq.NOBLOCK)
                except zmq.Again:
                    break
                except zmq.ZMQError:  # the socket was closed (the peer left)
                    self._backlog_frames -= len(backlog)
                    backlog.clear()
                    break
                backlog.popleft()
                self._backlog_frames -= 1
            if not backlog:
                del self._backlogs[socket]

    def _send_leave(self) -> None:
        self._flush_outbox()
        self._send_session("leave", direct_frames=dict(self._direct_sent))

    def _transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        # queued as is: encoding waits for _flush_outbox, which encodes the whole batch
        # in one call (this runs for every message sent)
        self.stats["messages_sent"] += len(dests)
        if self.delays.active:
            self._transmit_delayed(message, dests)
            return
        outbox = self._outbox
        if len(dests) == 1 or self.routing == "relayed":  # one frame carries it
            queued = outbox.get(dests)
            if queued is None:
                outbox[dests] = [message]
            else:
                queued.append(message)
        else:  # direct multicast: one frame per peer, the message serialized once
            try:
                envelope = pack_envelope(message)
            except Exception as error:
                self._unencodable(message, error)
                return
            for dest in dests:
                outbox.setdefault((dest,), []).append(envelope)
        self._outbox_count += 1
        if self._outbox_count >= MAX_OUTBOX_MESSAGES:
            self._flush_outbox()

    def _transmit_delayed(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        """Injected delays (testing): the message is serialized now, as when it leaves
        at once, and waits per peer in the delay plan."""
        try:
            envelope = pack_envelope(message)
        except Exception as error:
            self._unencodable(message, error)
            return
        now = time.monotonic()
        ready = tuple(d for d in dests if not self.delays.schedule(now, d, envelope))
        if not ready:
            return
        outbox = self._outbox
        if self.routing == "relayed":
            outbox.setdefault(ready, []).append(envelope)
        else:
            for dest in ready:
                outbox.setdefault((dest,), []).append(envelope)
        self._outbox_count += 1
        if self._outbox_count >= MAX_OUTBOX_MESSAGES:
            self._flush_outbox()

    def _unencodable(self, message: SentMessage, error: Exception) -> None:
        self.stats["unencodable"] += 1
        log.error("%s: message %s cannot be serialized and is not sent: %r", self.name,
                  message.message_id, error)

    def _flush_outbox(self) -> None:
        """Encode, sign and send what is queued: per destination set, the messages in
        one call (:func:`~groupcomm.transport.codec.pack_envelopes`), one frame per batch."""
        outbox, self._outbox, self._outbox_count = self._outbox, {}, 0
        relayed = self.routing == "relayed"
        seal = self.codec.seal
        for dests, items in outbox.items():
            for body in pack_envelopes(items, self._batch_budget, self._unencodable):
                frame = seal(body)
                self.stats["frames_sent"] += len(dests)
                if relayed:
                    self._relay(frame, list(dests))
                else:
                    for dest in dests:
                        self._push(dest, frame)

    def _relay(self, frame: bytes, dests: list[str]) -> None:
        command = seal_session(self.codec, "relay", client=self.name,
                               application=self.application, session=self.session,
                               dests=dests)
        self._send_parts(self._dealer, [command, frame])

    def _push(self, peer: str, frame: bytes) -> None:
        socket = self._pushes.get(peer)
        if socket is None:
            address = self._addresses.get(peer)
            if not address:
                self.stats["undeliverable"] += 1
                log.error("%s: no direct address for %r; frame dropped", self.name, peer)
                return
            socket = self._context.socket(zmq.PUSH)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(address)
            self._pushes[peer] = socket
        self._direct_sent[peer] += 1
        self._send_parts(socket, [frame])

    def _deliverable(self, message: ReceivedMessage) -> None:
        self.stats["delivered"] += 1
        if self.node.message_listeners:
            self.node.deliver_to_application(message)
        else:
            self._inbox.put(message)
