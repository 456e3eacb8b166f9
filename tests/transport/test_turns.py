"""Which members a wake-up of the poll loop looks at: the deadline heap
(:class:`TurnTimers`), and a real :class:`PollLoop` driving fake links (counting their
turns and prepares) over real inproc sockets. A member that is neither due, ready,
called for, signalled nor owed a turn is not looked at; every one of those gets its turn."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq

from groupcomm.transport.loop import PollLoop
from groupcomm.transport.timers import SLACK, TurnTimers
from tests.helpers import wait_until

_names = itertools.count()


# -- the heap ------------------------------------------------------------------------------------
def test_timers_hand_out_due_members_earliest_first_and_once() -> None:
    timers = TurnTimers()
    timers.set("a", 3.0)
    timers.set("b", 1.0)
    timers.set("c", 2.0)
    assert timers.earliest() == 1.0
    assert timers.pop_due(2.5) == ["b", "c"]
    assert timers.pop_due(2.5) == []  # each once, until set again
    assert timers.earliest() == 3.0 and len(timers) == 1


def test_a_changed_deadline_replaces_the_old_one() -> None:
    timers = TurnTimers()
    timers.set("a", 1.0)
    timers.set("a", 5.0)  # later: the entry at 1.0 is stale
    assert timers.earliest() == 5.0
    assert timers.pop_due(2.0) == []
    timers.set("a", 0.5)  # earlier again
    timers.set("a", 5.0)
    timers.set("a", 0.5)  # back to a deadline it had: still one turn
    assert timers.pop_due(10.0) == ["a"]


def test_a_cancelled_member_is_never_due() -> None:
    timers = TurnTimers()
    timers.set("a", 1.0)
    timers.set("b", 2.0)
    timers.cancel("a")
    assert timers.earliest() == 2.0
    assert timers.pop_due(3.0) == ["b"]
    assert timers.earliest() is None


def test_stale_entries_do_not_pile_up() -> None:
    timers = TurnTimers()
    for step in range(10_000):  # a member whose deadline moves at each of its turns
        timers.set("busy", 100.0 + step)
        timers.set("idle", 50.0)
    assert len(timers._heap) <= 2 * len(timers) + SLACK + 1
    assert timers.pop_due(60.0) == ["idle"]
    assert timers.deadline("busy") == 100.0 + 9_999


# -- the loop, with fake links -------------------------------------------------------------------
class FakeLink:
    """What PollLoop uses of a MemberLink: a PULL socket, a deadline, an inbox that can be
    full, work waiting; it counts its turns and prepares (read from the test thread)."""

    def __init__(self) -> None:
        self.name = f"fake{next(_names)}"
        self.address = f"inproc://{self.name}"
        self.stats: Counter[str] = Counter()
        self.closed = threading.Event()
        self.joined = threading.Event()
        self.turn_owed: Callable[[Any], None] = lambda link: None
        self.in_turn = False
        self.signalled = False
        self.want_read = True
        self.reading = False
        self.socket: zmq.Socket | None = None
        #: when its next turn is due; ``on_step`` may change it
        self.deadline = math.inf
        self.inbox_full = False
        self.work = False
        #: frames a socket could not take (MemberLink's): retried without any event
        self.backlog_frames = 0
        self.steps = 0
        self.prepares = 0
        self.got: list[bytes] = []
        self.on_step: Callable[[FakeLink], None] | None = None

    def open(self, context: zmq.Context, now: float) -> None:
        self.socket = context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(self.address)

    @property
    def sockets(self) -> list[zmq.Socket]:
        return [] if self.socket is None else [self.socket]

    def close_sockets(self) -> None:
        for socket in self.sockets:
            socket.close(linger=0)
        self.closed.set()

    def prepare(self) -> float:
        self.prepares += 1
        self.want_read = not self.inbox_full
        return self.deadline

    def has_work(self) -> bool:
        return self.work or bool(self.backlog_frames)

    def owe_turn(self) -> None:
        if not self.in_turn:
            self.turn_owed(self)

    def step(self, ready: Any) -> None:
        self.steps += 1
        if self.reading and self.socket in ready:
            while True:
                try:
                    self.got.append(self.socket.recv(zmq.NOBLOCK))
                except zmq.Again:
                    break
        if self.on_step is not None:
            self.on_step(self)


@pytest.fixture
def loop() -> Iterator[PollLoop]:
    started = PollLoop(name="turns")
    try:
        yield started
    finally:
        started.close()


def added(loop: PollLoop, count: int) -> list[FakeLink]:
    """``count`` fake links on ``loop``, each past its first turn and its prepare."""
    links = [FakeLink() for _ in range(count)]
    for link in links:
        loop.add(link)  # type: ignore[arg-type]
    wait_until(lambda: all(link.steps == 1 and link.prepares == 1 for link in links),
               what="each link's first turn and prepare")
    return links


def pusher(loop: PollLoop, link: FakeLink) -> zmq.Socket:
    socket = loop.context.socket(zmq.PUSH)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(link.address)
    return socket


def test_a_due_link_gets_turns_with_nothing_else_happening_and_the_others_none(
        loop: PollLoop) -> None:
    due, idle = added(loop, 2)

    def again(link: FakeLink) -> None:  # due again soon, for 20 turns
        link.deadline = time.monotonic() + 0.005 if link.steps < 21 else math.inf

    due.on_step = again
    loop.call_soon(lambda: None, due)  # its turn sets the first deadline
    wait_until(lambda: due.steps == 21 and due.prepares == 21,
               what="20 turns at its deadlines, each prepared after")
    # not due, not ready, called for by no one: never stepped, never prepared again
    assert (idle.steps, idle.prepares) == (1, 1)


def test_a_call_from_another_thread_gives_its_link_a_turn_after_it(loop: PollLoop) -> None:
    link, other = added(loop, 2)
    seen: list[int] = []
    loop.call_soon(lambda: seen.append(link.steps), link)
    wait_until(lambda: link.steps == 2, what="the turn after the call")
    assert seen == [1]  # the call ran before that turn
    assert loop.call(lambda: link.steps, link=link) == 2
    wait_until(lambda: link.steps == 3, what="the turn after a call for it")
    assert other.steps == 1
    loop.call(lambda: None)  # a call for no member in particular: every member's turn
    wait_until(lambda: other.steps == 2 and link.steps == 4, what="everyone's turn")


def test_a_signalled_link_gets_a_turn(loop: PollLoop) -> None:
    link, other = added(loop, 2)
    loop.signal(link)  # type: ignore[arg-type]
    loop.wakeup.wake()
    wait_until(lambda: link.steps == 2, what="the signalled link's turn")
    assert not link.signalled  # lowered before that turn
    assert other.steps == 1


def test_a_ready_socket_gives_a_turn_to_its_link_only(loop: PollLoop) -> None:
    link, other = added(loop, 2)
    socket = pusher(loop, link)
    try:
        socket.send(b"frame")
        wait_until(lambda: link.got == [b"frame"], what="the frame read in its link's turn")
        assert (other.steps, other.prepares) == (1, 1)
    finally:
        socket.close(linger=0)


def test_work_queued_for_a_link_during_another_ones_turn_gives_it_a_turn(
        loop: PollLoop) -> None:
    sender, receiver, idle = added(loop, 3)
    sender.on_step = lambda link: receiver.owe_turn()  # a listener sending through it
    loop.call_soon(lambda: None, sender)
    wait_until(lambda: receiver.steps == 2, what="the owed turn")
    # a call made on the loop thread during a turn, for another link
    sender.on_step = lambda link: loop.call_soon(lambda: None, idle)  # type: ignore[arg-type]
    loop.call_soon(lambda: None, sender)
    wait_until(lambda: idle.steps == 2, what="the turn after an on-thread call")
    # a call run at once on the loop thread (a listener asking another member)
    sender.on_step = lambda link: loop.call(lambda: None, link=idle)  # type: ignore[arg-type]
    loop.call_soon(lambda: None, sender)
    wait_until(lambda: idle.steps == 3, what="the turn after a call run on the loop thread")


def test_a_link_with_work_waiting_gets_a_turn_at_every_wake_up(loop: PollLoop) -> None:
    busy, other = added(loop, 2)
    busy.work = True  # e.g. sends not taken yet
    loop.call_soon(lambda: None, busy)  # its turn, then its prepare sees the work
    wait_until(lambda: busy in loop._watched, what="busy watched after its turn")
    steps = busy.steps
    loop.call_soon(lambda: None, other)  # any wake-up
    wait_until(lambda: busy.steps > steps, what="a turn at another link's wake-up")
    busy.work = False
    loop.call_soon(lambda: None, busy)
    wait_until(lambda: busy not in loop._watched,
               what="busy no longer watched once its work is done")


def test_frames_waiting_for_a_socket_are_retried_with_nothing_else_happening(
        loop: PollLoop) -> None:
    link, other = added(loop, 2)

    def drain(link: FakeLink) -> None:  # the socket takes a frame per turn
        link.backlog_frames = max(0, link.backlog_frames - 1)

    link.on_step = drain
    link.backlog_frames = 5
    loop.call_soon(lambda: None, link)
    wait_until(lambda: link.backlog_frames == 0 and link not in loop._watched,
               what="the backlog retried until empty")
    assert link.steps == 6
    assert other.steps == 1


def test_a_full_inbox_pauses_reading_and_reading_resumes_once_it_drains(
        loop: PollLoop) -> None:
    link, other = added(loop, 2)
    socket = pusher(loop, link)
    try:
        link.inbox_full = True
        loop.call_soon(lambda: None, link)  # its prepare after this turn sees it
        wait_until(lambda: not link.reading, what="reading paused")
        assert link.stats["inbox_full_pauses"] == 1
        assert loop.call(lambda: link.socket not in loop._owners, link=link)
        socket.send(b"waits")
        link.inbox_full = False  # the application took messages (its own thread)
        # nothing else happens: the paused link is looked at again on its own
        wait_until(lambda: link.got == [b"waits"], what="the frame read once reading resumed")
        assert link.reading
        assert other.steps == 1
    finally:
        socket.close(linger=0)


def test_a_removed_link_gets_no_more_turns(loop: PollLoop) -> None:
    link, other = added(loop, 2)

    def once(link: FakeLink) -> None:  # its protocol's timer ran: none due any more
        if time.monotonic() >= link.deadline:
            link.deadline = math.inf

    link.on_step = other.on_step = once
    link.deadline = time.monotonic() + 1.0
    loop.call(lambda: None, link=link)  # its prepare puts the deadline in the heap
    wait_until(lambda: link.prepares == 2, what="the deadline set")
    loop.remove(link)  # type: ignore[arg-type]
    assert link.closed.is_set()
    other.deadline = link.deadline + 0.05  # its turn comes after the removed one's deadline
    loop.call(lambda: None, link=other)
    wait_until(lambda: other.deadline == math.inf, what="the other link's turn at its deadline")
    assert link.steps == 2


def test_the_poll_waits_for_a_deadline_rather_than_spinning_up_to_it(loop: PollLoop) -> None:
    link, = added(loop, 1)
    wakeups = [0]
    prepare = loop._prepare

    def counted(now: float) -> float:
        wakeups[0] += 1
        return prepare(now)

    def once(link: FakeLink) -> None:
        if time.monotonic() >= link.deadline:
            link.deadline = math.inf

    link.on_step = once
    loop.call(lambda: setattr(loop, "_prepare", counted), link=link)
    # 10.5 ms ahead: a poll of 10 ms (pyzmq truncates) would return 0.5 ms early and
    # then spin with a timeout of 0 until the deadline
    link.deadline = time.monotonic() + 0.0105
    loop.call_soon(lambda: None, link)
    wait_until(lambda: link.deadline == math.inf, what="the turn at the deadline")
    assert wakeups[0] <= 5
