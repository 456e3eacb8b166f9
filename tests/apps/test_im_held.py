"""The chat's held-line watch: told of each held message by the communicator's
``MessageHeld`` event, it shows those still held after ``show_after``, each once, and
runs no thread while nothing is held."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from groupcomm.apps.im_held import HeldWatch
from groupcomm.protocol.session_events import MessageHeld, PeerLeft
from tests.helpers import wait_until


@dataclass
class _Message:
    message_id: str
    sender: str = "alice"


class _Communicator:
    """What the watch asks of a communicator: its events, what is held, what waits."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []
        self.holding: list[_Message] = []

    def add_event_listener(self, callback: Any) -> None:
        self.listeners.append(callback)

    def held(self) -> list[_Message]:
        return list(self.holding)

    def waiting_for(self) -> dict[str, list[str]]:
        return {m.message_id: ["carol"] for m in self.holding}

    def hold(self, message: _Message) -> None:
        self.holding.append(message)
        for listener in self.listeners:
            listener(MessageHeld(member="bob", message=message, waiting_on=("carol",)))


def _watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "held-watch"]


def test_a_line_still_held_is_shown_once_and_one_released_soon_is_not() -> None:
    comm = _Communicator()
    shown: list[tuple[str, list[str]]] = []
    watch = HeldWatch(comm, lambda m, waits: shown.append((m.message_id, waits)),  # type: ignore[arg-type]
                      show_after=0.05)
    watch.start()
    try:
        assert _watch_threads() == []  # nothing held: nothing runs
        for listener in comm.listeners:
            listener(PeerLeft(member="bob", peer="dan"))  # other events: nothing
        assert _watch_threads() == []
        long_held, brief = _Message("alice#2"), _Message("alice#3")
        comm.hold(long_held)
        comm.hold(brief)
        comm.holding.remove(brief)  # delivered before the watch looked
        wait_until(lambda: shown, what="the held line shown")
        wait_until(lambda: not _watch_threads(), what="the timer ended")
        assert shown == [("alice#2", ["carol"])]
        comm.hold(long_held)  # told again (a module tracing it twice): shown once
        comm.hold(_Message("alice#4"))
        wait_until(lambda: len(shown) == 2, what="the second held line")
        wait_until(lambda: not _watch_threads(), what="the timer ended")
        assert shown[1] == ("alice#4", ["carol"])
    finally:
        watch.stop()


def test_a_stopped_watch_shows_nothing() -> None:
    comm = _Communicator()
    shown: list[str] = []
    watch = HeldWatch(comm, lambda m, waits: shown.append(m.message_id),  # type: ignore[arg-type]
                      show_after=0.01)
    watch.start()
    comm.hold(_Message("alice#2"))
    watch.stop()
    comm.hold(_Message("alice#3"))
    wait_until(lambda: not _watch_threads(), what="the cancelled timer ended")
    assert shown == []
