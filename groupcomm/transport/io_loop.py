"""The communicator's I/O thread: the poll loop and what it reads.

One thread per communicator owns the sockets (see :mod:`groupcomm.transport.communicator`).
Each turn it waits on the wake-up pipe and the sockets until the next deadline (heartbeat,
filter timers, injected delays, a backlog retry), reads input for at most
:data:`READ_BUDGET` seconds, runs the sends and calls other threads handed over, flushes
the outbox and runs the timers. Back-pressure: it stops reading while the application's
inbox holds ``max_inbox`` messages, and takes no new sends while
:data:`MAX_BACKLOG_FRAMES` frames wait for slow sockets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import zmq

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.tracing import JsonlTracer
from groupcomm.wire.frames import MESSAGE

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")

#: How often filters with timers (the reliable layer) are ticked, in seconds.
TICK_INTERVAL = 0.02
#: Frames waiting for slow sockets before the communicator stops taking new sends.
MAX_BACKLOG_FRAMES = 10_000
#: How often, in seconds, a full socket or a paused inbox is looked at again.
BACKLOG_RETRY = 0.01
#: plain ints: the flag enums' ``&`` runs in Python, three enum calls per frame read
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
#: longest stretch (s) the I/O thread reads input before it turns to heartbeats, timers
#: and sends: a flood of arrivals on a loaded machine must not make this client look dead
READ_BUDGET = 0.05


class IOLoop:
    """The I/O thread's loop, a part of :class:`~groupcomm.transport.communicator.Communicator`
    (it runs on the communicator's state; see the communicator for the attributes)."""

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
        self._apply(self.membership.start(self.direct_address))
        next_heartbeat = time.monotonic() + self.heartbeat_interval
        next_tick = time.monotonic() + TICK_INTERVAL
        try:
            while not self._stop:
                # backpressure: stop reading while the application's inbox is full (the
                # length of its deque: qsize() takes the queue's lock on every turn, and
                # a length read under the GIL is as good for a threshold)
                want_read = len(self._inbox.queue) < self.max_inbox
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
                    if (self._backlog_frames < MAX_BACKLOG_FRAMES
                            and self._outbox_count < MAX_BACKLOG_FRAMES):
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
                self._session_tick(now)
                if self.node.tickers and now >= next_tick:
                    self.node.tick()
                    next_tick = now + TICK_INTERVAL
                    if self._outbox:
                        self._flush_outbox()
                if now >= next_heartbeat:
                    self._heartbeat(now)
                    next_heartbeat = now + self.heartbeat_interval
                    if isinstance(self.tracer, JsonlTracer):
                        # trace lines reach the file at least once a heartbeat, so a
                        # process killed outright leaves its trace up to then
                        self.tracer.flush()
        except Exception:
            log.exception("%s: I/O thread failed", self.name)
        finally:
            self._io_ident = None  # a later thread may be given the same id
            self._dealer.close(linger=0)
            if self._pull is not None:
                self._pull.close(linger=0)
            for push in self._pushes.values():
                push.close(linger=self._push_linger_ms)
            if isinstance(self.tracer, JsonlTracer):
                self.tracer.flush()

    def _take_outgoing(self) -> None:
        """Queue the application's tagged sends in the node, in order (a send the I/O
        thread makes itself, such as a join marker, must not overtake them)."""
        outgoing = self._outgoing
        if not outgoing:
            return
        waking = len(outgoing) >= self.max_pending  # a sender may be waiting for room
        batch = [outgoing.popleft() for _ in range(len(outgoing))]
        self._taken += len(batch)
        name = self.node.name
        if batch[0].sender != name or batch[-1].sender != name:
            # tagged by the node of an incarnation that is gone (see _new_node)
            self._report_undeliverable([m.message_id for m in batch if m.sender != name],
                                       f"came back as {name} before they left")
            batch = [m for m in batch if m.sender == name]
        self.node.queue_sends(batch)
        if waking:
            with self._room:
                self._room.notify_all()

    def _run_calls(self) -> None:
        self._wakeup.clear()
        if self._outgoing:
            self._take_outgoing()
            self._drain_node()
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
            # asking whether more waits is cheaper than the exception of a recv that
            # finds nothing, which every frame of a request/response exchange would pay
            more = socket.get(_EVENTS) & _POLLIN
            if from_server and len(parts) <= 2 and parts[0] != MESSAGE:
                # a notice, or an error with the relayed frame the server returned
                self._handle_session_frame(parts[0], parts[1] if len(parts) == 2 else None)
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
            if not more:
                return

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
