"""The poll loop: one thread that owns the ZeroMQ sockets of any number of members
(:class:`~groupcomm.transport.link.MemberLink`), waits until the earliest member's
deadline, runs the calls other threads hand over and gives a turn to the members that
have something to do.

A wake-up costs what its work costs, not a look at every member: a ready socket names its
member (:attr:`PollLoop._owners`), deadlines wait in a heap
(:class:`~groupcomm.transport.timers.TurnTimers`), and whatever else can make a member
need a turn names it when it happens: a call handed over for it, sends queued by its
application (:meth:`PollLoop.signal`), work queued for it outside its turn
(:meth:`MemberLink.owe_turn <groupcomm.transport.link.MemberLink.owe_turn>`). Only the
members that had a turn are prepared again (reading or not, next deadline); the few in a
state no event announces (frames waiting for a socket, an inbox full, sends not taken)
are watched at every wake-up, as every member once was."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import zmq

from groupcomm.core.causality import ProtocolViolation
from groupcomm.transport.link import BACKLOG_RETRY, MemberLink
from groupcomm.transport.timers import TurnTimers
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
        #: the members, in the order they were added (a dict: dropped in O(1))
        self._links: dict[MemberLink, None] = {}
        #: calls to run on the thread, each with the member it is for (None: any)
        self._calls: deque[tuple[Callable[[], None], MemberLink | None]] = deque()
        #: a call for no member in particular ran: every member gets a turn
        self._sweep = False
        # -- which members need a turn (see the module docstring)
        #: when each member's next turn is due without input
        self._timers = TurnTimers()
        #: the member each polled socket belongs to
        self._owners: dict[zmq.Socket, MemberLink] = {}
        #: members owed a turn in the next round (loop thread: a call for them ran, or
        #: work was queued for them outside their turn); the poll does not wait for them
        self._owed: dict[MemberLink, None] = {}
        #: members whose application queued sends (appended by other threads)
        self._signalled: deque[MemberLink] = deque()
        #: members to prepare before the next poll: they had a turn, or just came
        self._unprepared: dict[MemberLink, None] = {}
        #: members in a state no event announces, prepared and looked at every wake-up
        #: (MemberLink.has_work, or an inbox full)
        self._watched: dict[MemberLink, None] = {}
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
            link.turn_owed = self._owe
            link.open(self.context, time.monotonic())
            self._links[link] = None
            self._owed[link] = None  # its first turn sends the join

        try:
            self.call(add, timeout, link)
        except BaseException:
            self.call(lambda: self._drop(link), timeout, link)
            raise

    def remove(self, link: MemberLink, timeout: float = 10.0) -> None:
        """Stop driving ``link`` and close its sockets (waits for the loop thread)."""
        if link.closed.is_set():
            return
        try:
            self.call(lambda: self._drop(link), timeout, link)
        except Exception:  # the loop did not answer: it is stopping or stopped
            log.warning("%s: the I/O loop did not close the sockets in time", link.name)

    def _drop(self, link: MemberLink) -> None:
        self._links.pop(link, None)
        if link.reading:
            self._set_reading(link, False, paused=False)
        self._timers.cancel(link)
        for pending in (self._owed, self._unprepared, self._watched):
            pending.pop(link, None)
        link.turn_owed = lambda link: None
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

    def signal(self, link: MemberLink) -> None:
        """``link``'s application queued sends (any thread; the caller then wakes the
        loop). Flag first, then queue; the loop lowers the flag before the turn that
        takes the sends: a send that finds the flag up was queued before that turn."""
        link.signalled = True
        self._signalled.append(link)

    def _owe(self, link: MemberLink) -> None:
        if threading.get_ident() == self.ident:
            self._owed[link] = None
        else:  # Out's calls run on this thread; were one not to, its turn still comes
            self._calls.append((lambda: None, link))
            self.wakeup.wake()

    def _touched(self, link: MemberLink | None) -> None:
        if link is None:
            self._sweep = True
        else:
            self._owed[link] = None

    def call(self, function: Callable[[], Any], timeout: float = 10.0,
             link: MemberLink | None = None) -> Any:
        """Run ``function`` on the loop thread and return its result (or raise its
        exception); runs it here when the loop thread is this one or gone. ``link``:
        the only member whose state it may change, which gets a turn after it (None:
        every member gets one)."""
        if self.on_thread():
            try:
                return function()
            finally:
                if link is not None:  # e.g. a listener releasing what another member holds
                    link.owe_turn()
        if not self._thread.is_alive():
            return function()
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # handed back to the caller
                future.set_exception(error)

        self._calls.append((run, link))
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
        unprepared = self._unprepared
        try:
            while not self._stop:
                now = time.monotonic()
                wait = self._prepare(now) - now
                # whole ms, rounded up: pyzmq truncates, and a poll that returns before
                # the deadline finds nothing due and polls again at once until it comes
                ready = dict(poller.poll(math.ceil(wait * 1000) if wait > 0 else 0))
                if wake_fd in ready:
                    self.wakeup.clear()  # before taking the work it announced
                if self._calls:
                    self._run_calls()
                for link in self._turns(ready, time.monotonic()):
                    if link not in links:
                        continue  # dropped by a call or by an earlier turn that failed
                    link.in_turn = True
                    try:
                        link.step(ready)
                    except Exception as error:
                        self._failed(link, error)
                    finally:
                        link.in_turn = False
                    if link in links:
                        unprepared[link] = None
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

    def _prepare(self, now: float) -> float:
        """Before the poll: read or not, and the next deadline, of the members that had
        a turn and of the watched ones; returns when the poll must return."""
        watched, unprepared, timers = self._watched, self._unprepared, self._timers
        for link in (*unprepared, *watched) if watched else unprepared:
            timers.set(link, link.prepare())
            if link.want_read != link.reading:
                self._set_reading(link, link.want_read)
            if link.has_work() or not link.want_read:
                watched[link] = None
            elif watched:
                watched.pop(link, None)
        unprepared.clear()
        if self._owed or self._sweep:
            return now
        deadline = now + IDLE_POLL
        earliest = timers.earliest()
        if earliest is not None and earliest < deadline:
            deadline = earliest
        # a full socket or a paused inbox is looked at again soon: nothing announces room
        if watched and any(link.backlog_frames or not link.want_read for link in watched):
            deadline = min(deadline, now + BACKLOG_RETRY)
        return deadline

    def _turns(self, ready: dict[Any, int], now: float) -> Iterable[MemberLink]:
        """The members that get a turn this round: every one after a call for none in
        particular; else those owed one, signalled, with a ready socket, due, or watched
        with work waiting."""
        if self._sweep:
            self._sweep = False
            self._owed.clear()
            self._take_signalled()
            return list(self._links)
        turns, self._owed = self._owed, {}  # turns owed during this round: the next one
        self._take_signalled(turns)
        owners = self._owners
        for socket in ready:
            link = owners.get(socket)
            if link is not None:
                turns[link] = None
        for link in self._timers.pop_due(now):
            turns[link] = None
        for link in self._watched:
            if link.has_work():
                turns[link] = None
        return turns

    def _take_signalled(self, turns: dict[MemberLink, None] | None = None) -> None:
        signalled = self._signalled
        while signalled:
            link = signalled.popleft()
            link.signalled = False  # before its turn takes the sends (see signal())
            if turns is not None:
                turns[link] = None

    def _set_reading(self, link: MemberLink, reading: bool, paused: bool = True) -> None:
        """Poll ``link``'s sockets, or stop (back-pressure: its inbox is full; or it
        is dropped)."""
        for socket in link.sockets:
            if reading:
                self._poller.register(socket, zmq.POLLIN)
                self._owners[socket] = link
            else:
                self._poller.unregister(socket)
                self._owners.pop(socket, None)
        link.reading = reading
        if not reading and paused:
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
