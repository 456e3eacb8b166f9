"""The shared text behind ``groupcomm edit``: an :class:`~groupcomm.replicated.
EditorReplica` behind a lock (keys come on the screen's thread, deliveries on the
communicator's), each delivery acknowledged once applied, under the lock, so that a
local edit is tagged with exactly what the replica holds; a :class:`RunFlusher` thread
sends a pending run of typing when its window has passed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from groupcomm.core.causality import CausalityError
from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import ReceivedMessage, Tag
from groupcomm.core.session_messages import Snapshot
from groupcomm.protocol.session_events import (
    ClockAcknowledged,
    Rejoined,
    ServerAnswers,
    ServerSilent,
    SessionEvent,
    StateUnavailable,
    StoreGenerationChanged,
)
from groupcomm.replicated import EditorReplica
from groupcomm.replicated.reapply import Rebased

log = logging.getLogger(__name__)

#: seconds before a run that could not be sent is tried again
RETRY = 1.0
#: sends waited room for before a local edit takes the lock: an edit sends a few (a
#: run and a cursor), the flushing thread one run
ROOM = 16
#: the default coalescing window for typing, in seconds: at 8 keys a second, runs of
#: about two keys (half the bytes per keystroke: ``groupcomm text-wire``), and the
#: others see the typing within a tenth of a second
DEFAULT_WINDOW = 0.1


class SharedText:
    def __init__(self, me: str, *, collect: bool = True,
                 on_change: Callable[[], None] | None = None,
                 window: float = 0.0,
                 flusher: Callable[[SharedText], Any] | None = None) -> None:
        """``window``: seconds typing is coalesced (0: off); ``flusher(shared)`` makes
        what flushes the pending run (with ``due(delay)`` and ``stop()``; default a
        :class:`RunFlusher`, made at the first run)."""
        if window < 0:
            raise ValueError(f"the coalescing window must be >= 0, got {window!r}")
        self.window = window
        self.replica = EditorReplica(me, self._send, coalesce=window > 0, collect=collect)
        self.lock = threading.RLock()
        self.on_change = on_change or (lambda: None)
        self._make_flusher = flusher or RunFlusher
        self._flusher: Any = None
        self.communicator: Any = None
        #: what happened to this member's edits across a cut, for the status line
        self.notice = ""

    def attach(self, communicator: Any) -> None:
        """Use ``communicator`` (joined) for local edits."""
        with self.lock:
            self.communicator = communicator
            self.replica.joined(communicator.member_id, communicator.members)
            self._acknowledge()
        self.on_change()

    def _acknowledge(self) -> None:
        communicator = self.communicator
        if communicator is not None and communicator.acknowledged_delivery:
            communicator.acknowledge(self.replica.deliveries)

    def _send(self, payload: Any) -> tuple[str, Tag]:
        comm = self.communicator
        if comm is None:
            raise RuntimeError(f"{self.replica.me}: no communicator attached yet")
        try:
            first = comm.send(comm.others or [comm.name], payload)[0]
        except CausalityError:  # a member joined between reading others and sending
            first = comm.send(comm.others or [comm.name], payload)[0]
        return first.message_id, Tag(first.vc)

    def _room(self) -> None:
        """Wait, before taking the lock, until this edit's sends fit in the
        communicator's queue: a send waiting under the lock would wait for the
        communicator's thread, which waits for the lock to deliver."""
        wait = getattr(self.communicator, "wait_for_room", None)
        if wait is not None:
            wait(ROOM)

    def _do(self, action: Callable[..., Any], *args: Any) -> Any:
        """Run a replica method under the lock; ``on_change`` if the view changed."""
        with self.lock:
            version = self.replica.version
            result = action(*args)
            if self.replica.version != version:
                self.on_change()
            return result

    @property
    def position(self) -> int:
        with self.lock:
            return self.replica.position

    def insert(self, text: str) -> None:
        self._room()
        with self.lock:
            if self._do(self.replica.insert, text):
                self._flusher_for().due(self.window)

    def flush(self) -> None:
        self._room()
        self._do(self.replica.flush)

    def backspace(self) -> None:
        self._room()
        self._do(self.replica.backspace)

    def delete(self) -> None:
        self._room()
        self._do(self.replica.delete)

    def move_to(self, position: int, announce: bool = True) -> None:
        if announce:
            self._room()
        self._do(self.replica.move_to, position, announce)

    def close(self) -> None:
        """Send what is pending and stop the flushing thread (before leaving)."""
        with self.lock:
            flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.stop()
        self.flush()

    def _flusher_for(self) -> Any:
        if self._flusher is None:
            self._flusher = self._make_flusher(self)
        return self._flusher

    def on_message(self, message: ReceivedMessage) -> None:
        with self.lock:
            try:
                at_the_run = self._do(
                    self.replica.delivered, message.sender, message.user_message,
                    message.app_tag, message.app_message_id,
                    bool(message.headers.get("superseded")))
            finally:
                self._acknowledge()
            if at_the_run:
                # someone edited where this member is typing: the run goes now, from the
                # flushing thread (the communicator's thread must not send)
                self._flusher_for().due(0.0)

    def snapshot(self) -> Snapshot:
        with self.lock:
            return self.replica.snapshot()

    def install(self, state: Any) -> None:
        """Install the text; back as a new member, send at once what the text received
        does not hold of this member's edits (the communicator's thread may send: the
        new incarnation is in place)."""
        with self.lock:
            self._do(self.replica.install, state)
            if self.replica.rebased is None:
                return
            try:
                carried = self._do(self.replica.resend)
            except Exception as error:  # noqa: BLE001 - kept; said; the flusher retries
                log.warning("the edits made while cut off are not sent yet (retrying in "
                            "%g s): %s", RETRY, error)
                self._flusher_for().due(RETRY)
                return
        if carried is not None:
            self._say(reapplied(carried))

    def _say(self, notice: str) -> None:
        self.notice = notice
        log.info("%s", notice)
        self.on_change()

    def on_event(self, event: SessionEvent) -> None:
        """The communicator's session events: a silent member's acknowledgement for
        stability; the others said on the status line."""
        if isinstance(event, ClockAcknowledged):
            self._do(self.replica.acknowledged, event.peer, dict(event.clock))
        elif isinstance(event, StoreGenerationChanged):
            # the server's store is another one: a fresh text comes by state transfer;
            # until then edits wait as this member's own, then go again onto it
            with self.lock:
                self.replica.offline = True
            self._say("the session's store was replaced; getting the text again (your "
                      "edits are kept and go again onto it)")
        elif isinstance(event, ServerSilent):
            self._say("no answer from the session server; your edits wait for it")
        elif isinstance(event, ServerAnswers):
            self._say("the session server answers again")
        elif isinstance(event, Rejoined):
            self._say("session server restarted; reconnected"
                      if event.server_restarted else
                      f"the session took you for gone; back as {event.member}, getting "
                      "the text")
        elif isinstance(event, StateUnavailable):
            with self.lock:
                replica = self.replica
                if not replica.offline:
                    return
                replica.offline = False
                kept = len(replica.unconfirmed)
                replica.unconfirmed.clear()
                others = [m for m in replica.members if m != replica.me]
            if others and kept:
                self._say(f"no member could give the text: {kept} edit(s) made while cut "
                          "off stay only here (save with ^S)")

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self.lock:
            replica = self.replica
            comm = self.communicator
            if (comm is not None and client_name != replica.me
                    and display_name(client_name) == display_name(replica.me)
                    and client_name == comm.member_id):
                # back as a new member: edits wait here until the text arrives
                self._do(replica.joined, client_name, list(all_users))
                replica.offline = True
                return
            self._do(replica.member_joined, client_name, list(all_users))

    def client_left(self, client_name: str, application_name: str) -> None:
        self._do(self.replica.member_left, client_name)

    def view(self) -> tuple[str, int, dict[str, int]]:
        with self.lock:
            return self.replica.view()

    def save(self, path: str) -> int:
        """Write the text (the pending run included) to ``path``; returns its length."""
        value = self.view()[0]
        Path(path).write_text(value, encoding="utf-8")
        return len(value)


def reapplied(carried: Rebased) -> str:
    """The status line after a return: how many edits went again, and what could not."""
    parts = [f"back: {len(carried.ops)} edit(s) made while cut off sent again "
             f"({carried.characters} character(s) typed)"]
    if carried.held:
        parts.append(f"{len(carried.held)} had arrived")
    if carried.void:
        parts.append(f"{len(carried.void)} had nothing left to do (erased, or deleted "
                     "by others too)")
    return ", ".join(parts)


class RunFlusher:
    """The thread that flushes a :class:`SharedText`'s pending run when due."""

    def __init__(self, shared: SharedText) -> None:
        self.shared = shared
        self._cond = threading.Condition()
        self._due: float | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="run-flusher", daemon=True)
        self._thread.start()

    def due(self, delay: float) -> None:
        """Flush ``delay`` seconds from now (or sooner if due sooner)."""
        at = time.monotonic() + delay
        with self._cond:
            if self._due is None or at < self._due:
                self._due = at
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (self._due is None or self._due > time.monotonic()):
                    timeout = None if self._due is None else self._due - time.monotonic()
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                self._due = None
            try:
                self.shared.flush()
            except Exception as error:  # noqa: BLE001 - kept pending; said, retried
                log.warning("typing not sent yet (retrying in %g s): %s", RETRY, error)
                self.due(RETRY)
