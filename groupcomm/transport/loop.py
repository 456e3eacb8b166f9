"""The poll loop: one thread that owns the ZeroMQ sockets of any number of members
(:class:`~groupcomm.transport.link.MemberLink`), waits until the earliest member's
deadline, runs the calls other threads hand over and gives every member its turn."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import zmq

from groupcomm.core.causality import ProtocolViolation
from groupcomm.transport.link import MemberLink
from groupcomm.transport.wakeup import WakeSignal
from groupcomm.wire.shared_batches import SharedBatches
from groupcomm.wire.streams import SharedStreams

log = logging.getLogger(__name__)

#: the longest the loop sleeps with nothing due (a member added meanwhile wakes it)
IDLE_POLL = 1.0


class PollLoop:
    """One poll thread for the members added to it."""

    def __init__(self, *, context: zmq.Context | None = None, name: str = "host") -> None:
        # a context of our own, so that close() can wait for queued frames (term())
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.wakeup = WakeSignal()
        #: the frame streams the members on this thread inflate once for all (a Host's)
        self.shared_streams: SharedStreams | None = None
        self.shared_batches: SharedBatches | None = None
        self._links: list[MemberLink] = []
        #: calls to run on the thread, each with the member it is for (None: any)
        self._calls: deque[tuple[Callable[[], None], MemberLink | None]] = deque()
        #: a call for no member in particular ran: every member gets a turn
        self._sweep = False
        #: run on the thread after each round of turns (e.g. hand what the members'
        #: listeners produced to another thread in one go)
        self.after_turns: list[Callable[[], None]] = []
        self._poller = zmq.Poller()
        self._poller.register(self.wakeup.fileno, zmq.POLLIN)
        self._stop = False
        self._closed = False
        #: the loop thread's id, compared with threading.get_ident() on every send
        self.ident: int | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"groupcomm-io-{name}",
                                        daemon=True)
        self._thread.start()
        self._started.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- members ---------------------------------------------------------------------------------
    def add(self, link: MemberLink, timeout: float = 10.0) -> None:
        """Open ``link``'s sockets on the loop thread and start driving it; its join is
        on its way when this returns. Raises what opening raised."""
        def add() -> None:
            link.open(self.context, time.monotonic())
            self._links.append(link)

        try:
            self.call(add, timeout)
        except BaseException:
            self.call(lambda: self._drop(link), timeout)
            raise

    def remove(self, link: MemberLink, timeout: float = 10.0) -> None:
        """Stop driving ``link`` and close its sockets (waits for the loop thread)."""
        if link.closed.is_set():
            return
        try:
            self.call(lambda: self._drop(link), timeout)
        except Exception:  # the loop did not answer: it is stopping or stopped
            log.warning("%s: the I/O loop did not close the sockets in time", link.name)

    def _drop(self, link: MemberLink) -> None:
        if link in self._links:
            self._links.remove(link)
        if link.reading:
            for socket in link.sockets:
                self._poller.unregister(socket)
            link.reading = False
        link.close_sockets()

    # -- handing work to the loop thread -------------------------------------------------------
    def on_thread(self) -> bool:
        return threading.get_ident() == self.ident

    def call_soon(self, function: Callable[[], None], link: MemberLink | None = None) -> None:
        """Run ``function`` on the loop thread (now, when called there); ``link``: the
        member it is for, whose turn comes after it (None: every member's)."""
        if self.on_thread():
            function()
            self._touched(link)
            return
        self._calls.append((function, link))
        self.wakeup.wake()

    def _touched(self, link: MemberLink | None) -> None:
        if link is None:
            self._sweep = True
        else:
            link.poked = True

    def call(self, function: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``function`` on the loop thread and return its result (or raise its
        exception); runs it here when the loop thread is this one or gone."""
        if self.on_thread() or not self._thread.is_alive():
            return function()
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # handed back to the caller
                future.set_exception(error)

        self._calls.append((run, None))
        self.wakeup.wake()
        return future.result(timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread (closing what members are left) and, with its own context, wait
        up to the sockets' linger for queued frames to leave."""
        if self._closed:
            return
        self._closed = True
        self._stop = True
        self.wakeup.wake()
        self._thread.join(timeout)
        if self._own_context and not self._thread.is_alive():
            self.context.term()
        self.wakeup.close()

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        self.ident = threading.get_ident()
        self._started.set()
        poller = self._poller
        wake_fd = self.wakeup.fileno
        links = self._links
        try:
            while not self._stop:
                now = time.monotonic()
                deadline = now + IDLE_POLL
                for link in links:
                    due = link.prepare(now)
                    if due < deadline:
                        deadline = due
                    if link.want_read != link.reading:
                        self._set_reading(link, link.want_read)
                ready = dict(poller.poll(max(0.0, (deadline - now) * 1000)))
                if wake_fd in ready:
                    self.wakeup.clear()  # before taking the work it announced
                if self._calls:
                    self._run_calls()
                now = time.monotonic()
                sweep, self._sweep = self._sweep, False
                for link in (links if len(links) == 1 else list(links)):
                    if not sweep and not link.wants_turn(ready, now):
                        continue
                    try:
                        link.step(ready)
                    except Exception as error:
                        self._failed(link, error)
                for function in self.after_turns:
                    try:
                        function()
                    except Exception:
                        log.exception("error after the members' turns")
        except Exception:
            log.exception("I/O loop failed")
        finally:
            self.ident = None  # a later thread may be given the same id
            for link in list(links):
                self._drop(link)

    def _set_reading(self, link: MemberLink, reading: bool) -> None:
        """Poll ``link``'s sockets, or stop (back-pressure: its inbox is full)."""
        for socket in link.sockets:
            if reading:
                self._poller.register(socket, zmq.POLLIN)
            else:
                self._poller.unregister(socket)
        link.reading = reading
        if not reading:
            link.stats["inbox_full_pauses"] += 1

    def _failed(self, link: MemberLink, error: Exception) -> None:
        """A member's turn raised: a protocol error is counted and logged; anything else
        closes that member, and the others go on."""
        if isinstance(error, ProtocolViolation):
            link.stats["protocol_errors"] += 1
            log.error("%s: protocol error: %s", link.name, error)
            return
        log.error("%s: I/O failed; this member stops", link.name, exc_info=error)
        self._drop(link)
        if not link.joined.is_set():
            link.join_settled("the I/O loop failed while joining (see the log)")

    def _run_calls(self) -> None:
        calls = self._calls
        while calls:
            function, link = calls.popleft()
            self._touched(link)
            try:
                function()
            except ProtocolViolation as error:
                log.error("protocol error: %s", error)
            except Exception:
                log.exception("error while running a handed-over call")
