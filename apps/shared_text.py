"""The shared text behind ``groupcomm edit``: one replica, its cursors and its members.

What the screen shows and what the keys do go through :class:`SharedText`; it owns a
:class:`~groupcomm.replicated.TextSequence` and talks to the communicator. Local edits
are applied at once with the tag of their send and broadcast; delivered edits are
applied with their tag (see :mod:`groupcomm.replicated`). Cursors are anchors (the id
of the character a cursor follows), so they stay put while others edit around them.

Typing is coalesced into runs (``window`` seconds, 0: off): consecutive keystrokes that
each insert right after the previous one wait in a :class:`PendingRun`, drawn at once by
:meth:`SharedText.view` as an overlay on the replica, and become one insert operation
when the run is flushed: when the window since its first keystroke has passed, or early
on anything that is not a continuation (a move, a delete, a newline or a paste, a
delivered edit at the same place, leaving). Only then is the run applied to the replica,
with the tag of its send and the ids it gets from that send (a run's characters are
``id``, ``id+1``, ...). A Backspace right after typing takes the last character back
from the run: it never reaches the wire. Cursor moves (presence) are never held.

Another member's cursor moves with its edits and, when it only moves, through
:class:`Presence` messages, which travel through the latest-value jitter buffer
(:mod:`groupcomm.filters.latest_value`). Thread-safe: keys arrive on the screen's
thread, deliveries on the communicator's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import CausalityError
from groupcomm.core.messages import ReceivedMessage, SentMessage, Tag
from groupcomm.core.state_transfer import REFLECTED_IDS, Snapshot
from groupcomm.replicated import Stability, TextSequence

log = logging.getLogger(__name__)

#: collect causally stable tombstones after this many applied operations
COLLECT_EVERY = 64
#: the largest run of characters one operation inserts (a longer paste or seed file is
#: sent as several, within the communicator's payload limit)
RUN_LIMIT = 16_384
#: seconds before a run that could not be sent is tried again
RETRY = 1.0
#: the default coalescing window for typing, in seconds: long enough that a person typing
#: 8 keys a second (125 ms apart on average) sends runs of about two keys (half the bytes
#: per keystroke; ``groupcomm text-wire``), short enough that the others see the typing
#: within a tenth of a second. A 30 ms window would coalesce only bursts faster than that
DEFAULT_WINDOW = 0.1


@dataclass
class PendingRun:
    """Characters typed but not sent yet: they go right after ``after`` (an anchor)."""

    after: str | None
    text: str


def visible_slice(text: TextSequence, start: int, stop: int) -> str:
    """Visible characters ``start``..``stop`` of ``text``: its ``slice`` where the type
    has one (without building the whole value), else a slice of its value."""
    slicer = getattr(text, "slice", None)
    if slicer is not None:
        return slicer(start, stop)
    return text.value[start:stop]


#: the first element of a presence message, ``("cursor", anchor)``: where a member's
#: cursor is when it moved without editing (``None``: the start). A plain tuple, so that
#: it travels in the compact payload encoding, not as a pickled class
PRESENCE = "cursor"


def presence(anchor: str | None) -> tuple[str, str | None]:
    """The presence message for a cursor at ``anchor``."""
    return (PRESENCE, anchor)


def is_presence(payload: Any) -> bool:
    return (type(payload) is tuple and len(payload) == 2 and payload[0] == PRESENCE
            and (payload[1] is None or type(payload[1]) is str))


def presence_slot(payload: Any) -> str | None:
    """The latest-value filter's slot function: cursors are volatile, edits are not."""
    return "cursor" if is_presence(payload) else None


def text_snapshot(text: TextSequence, cursors: dict[str, str | None], me: str,
                  cursor: str | None, own_ids: Sequence[str]) -> Snapshot:
    """The state a newcomer gets: the text, every cursor, and which own edits it holds
    (one format for the terminal editor and the web gateway's mirrors)."""
    return Snapshot({"items": text.state(), "cursors": {**cursors, me: cursor}},
                    reflects=tuple(own_ids))


def read_text_snapshot(state: Any) -> tuple[TextSequence, dict[str, str | None]] | None:
    """The text and cursors of a :func:`text_snapshot`'s state; ``None`` (logged) when it
    is unusable."""
    try:
        return TextSequence.from_state(state["items"]), dict(state["cursors"])
    except (TypeError, KeyError, ValueError) as error:
        log.warning("the text received from the session is unusable (%s); starting from "
                    "an empty text", error)
        return None


def _last_of(op_id: str, length: int) -> str:
    """The id of the last character of a run of ``length`` inserted by ``op_id``."""
    return op_id if length == 1 else f"{op_id}+{length - 1}"


class SharedText:
    """One member's replica of the text, its cursor, the others' cursors and members."""

    def __init__(self, me: str, *, collect: bool = True,
                 on_change: Callable[[], None] | None = None,
                 window: float = 0.0,
                 flusher: Callable[[SharedText], Any] | None = None) -> None:
        """``window``: seconds typing is coalesced (0: off); ``flusher(shared)`` makes
        what flushes the pending run when due (an object with ``due(delay)`` and
        ``stop()``; default a :class:`RunFlusher` thread, made at the first run)."""
        if window < 0:
            raise ValueError(f"the coalescing window must be >= 0, got {window!r}")
        self.me = me
        #: seconds a run of typing may wait before it is sent (0: each key at once)
        self.window = window
        #: typed characters not sent yet (see the module doc)
        self.pending: PendingRun | None = None
        #: bumped whenever what :meth:`view` returns may have changed (screens cache on it)
        self.version = 0
        self._value: str | None = None
        self._make_flusher = flusher or RunFlusher
        self._flusher: Any = None
        self.collect = collect
        self.on_change = on_change or (lambda: None)
        self.lock = threading.RLock()
        self.text = TextSequence()
        self.stability = Stability(me, [me])
        self.cursor: str | None = None
        #: member -> anchor of its cursor
        self.cursors: dict[str, str | None] = {}
        self.members: list[str] = [me]
        #: application-level ids of own operations (a snapshot says it reflects them)
        self.own_ids: deque[str] = deque(maxlen=REFLECTED_IDS)
        self.applied = 0
        self.collected = 0
        #: messages the communicator handed to :meth:`on_message` so far (with
        #: acknowledged delivery, each is acknowledged once applied, under the lock)
        self.handed = 0
        #: operations that could not be applied (a module without causal order)
        self.failures = 0
        self.last_failure = ""
        self.communicator: Any = None

    # -- wiring ----------------------------------------------------------------------------
    def attach(self, communicator: Any) -> None:
        """Use ``communicator`` (already joined) for local edits."""
        with self.lock:
            self.communicator = communicator
            self.me = communicator.member_id
            self.stability = Stability(self.me, communicator.members)
            self.members = list(communicator.members)
            self._acknowledge()
        self.on_change()

    def _acknowledge(self) -> None:
        """Tell a communicator with acknowledged delivery that every message handed so
        far is applied (under the lock: a local edit, made under it too, is then tagged
        with exactly what this replica holds; without acknowledged delivery the clock
        moves before :meth:`on_message` runs, and an edit made in between would be
        tagged after a delete it has not seen)."""
        communicator = self.communicator
        if communicator is not None and getattr(communicator, "acknowledged_delivery", False):
            communicator.acknowledge(self.handed)

    # -- local edits (screen thread) ----------------------------------------------------
    @property
    def position(self) -> int:
        """The cursor's position in what :meth:`view` shows (the pending run included)."""
        with self.lock:
            pending = self.pending
            if pending is not None:
                return self._position(pending.after) + len(pending.text)
            return self._position(self.cursor)

    def _position(self, anchor: str | None) -> int:
        found = self.text.position(anchor)
        return 0 if found is None else found

    def insert(self, text: str) -> None:
        """Type or paste ``text`` at the cursor: held in the pending run when typing is
        coalesced and ``text`` is one character that is not a newline, else sent now
        (with the run before it)."""
        if not text:
            return
        with self.lock:
            if self.window > 0 and len(text) == 1 and text != "\n":
                self._extend_run(text)
                self._changed(replica=False)
            else:
                self.flush()
                self._send_insert(text)
                self._changed()

    def _extend_run(self, char: str) -> None:
        pending = self.pending
        if pending is None:
            self.pending = PendingRun(self.cursor, char)
            self._flusher_for().due(self.window)
        else:
            pending.text += char
            if len(pending.text) >= RUN_LIMIT:
                self.flush()

    def _send_insert(self, text: str) -> None:
        for start in range(0, len(text), RUN_LIMIT):
            run = text[start:start + RUN_LIMIT]
            op = self.text.prepare_insert(self._position(self.cursor), run)
            op_id = self._apply_own(op)
            self.cursor = _last_of(op_id, len(run))

    def flush(self) -> None:
        """Send the pending run now (if any): it becomes one insert in the replica, with
        the tag and ids of its send. Any thread."""
        with self.lock:
            pending, self.pending = self.pending, None
            if pending is None:
                return
            # the run goes after the visible character before its place: the character
            # it was typed after may have been deleted by an edit applied since, which
            # this send's tag covers, and a member that then collected the tombstone
            # (causally stable: everyone, this member included, has applied the delete)
            # could not place the run
            after = self.text.anchor(self._position(pending.after))
            op = ("insert", after, pending.text)
            try:
                op_id = self._apply_own(op)
            except Exception:
                # not sent (the communicator is closing, the module refused): the run
                # is still on the screen, so keep it rather than lose what was typed
                self.pending = pending
                raise
            self.cursor = _last_of(op_id, len(pending.text))
            self._changed()

    def backspace(self) -> None:
        with self.lock:
            pending = self.pending
            if pending is not None:
                # the last typed character was never sent: take it back, no operation
                pending.text = pending.text[:-1]
                if not pending.text:
                    self.pending = None
                self._changed(replica=False)
                return
            at = self._position(self.cursor)
            if at == 0:
                return
            before = self.text.anchor(at - 1)
            self._apply_own(self.text.prepare_delete(at - 1))
            self.cursor = before
            self._changed()

    def delete(self) -> None:
        with self.lock:
            self.flush()
            at = self._position(self.cursor)
            if at >= self.text.visible_length():
                return
            self._apply_own(self.text.prepare_delete(at))
            self._changed()

    def move_to(self, position: int, announce: bool = True) -> None:
        """Put the cursor at ``position`` (clamped to the text) and tell the others
        (unless not ``announce``: an edit right after shows them where it is)."""
        with self.lock:
            self.flush()
            position = max(0, min(position, self.text.visible_length()))
            anchor = self.text.anchor(position)
            if anchor == self.cursor:
                return
            self.cursor = anchor
            if announce:
                self._broadcast(presence(anchor))
            self._changed(replica=False)

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

    def _changed(self, replica: bool = True) -> None:
        """What :meth:`view` shows changed (``replica``: the replica itself did)."""
        self.version += 1
        if replica:
            self._value = None
        self.on_change()

    def _apply_own(self, op: tuple) -> str:
        first = self._broadcast(op)
        tag = Tag(first.vc)
        self.text.effect(op, tag, first.message_id)
        self.own_ids.append(first.message_id)
        self._applied(self.me, tag)
        return first.message_id

    def _broadcast(self, payload: Any) -> SentMessage:
        comm = self.communicator
        for attempt in (1, 2):
            # alone, the operation still needs an id and a tag: it goes to oneself
            destinations = comm.others or [comm.name]
            try:
                return comm.send(destinations, payload)[0]
            except CausalityError:
                if attempt == 2:  # a member joined between the two lines above, twice
                    raise
        raise AssertionError("unreachable")

    # -- deliveries (communicator thread) ---------------------------------------------------
    def on_message(self, message: ReceivedMessage) -> None:
        with self.lock:
            self.handed += 1
            try:
                self._on_message(message)
            finally:
                self._acknowledge()

    def _on_message(self, message: ReceivedMessage) -> None:
        """Apply one delivered message (the caller holds the lock)."""
        payload = message.user_message
        if message.sender == self.me:
            return  # an own operation sent to oneself: applied when it was made
        if is_presence(payload):
            if not message.headers.get("superseded"):
                self.cursors[message.sender] = payload[1]
                self._changed(replica=False)
            return
        try:
            self.text.effect(payload, message.app_tag, message.app_message_id)
        except ValueError as error:
            self.failures += 1
            self.last_failure = f"{message.app_message_id} from {message.sender}: {error}"
            log.warning("could not apply %s", self.last_failure)
            self._changed(replica=False)
            return
        self._follow(message.sender, payload, message.app_message_id)
        self._applied(message.sender, message.app_tag)
        if self.pending is not None and _touches(payload, self.pending.after):
            # someone edited where this member is typing: send the run now, so that
            # both see each other's text soon (the communicator's thread must not
            # send: the flushing thread does)
            self._flusher_for().due(0.0)
        self._changed()

    def _follow(self, sender: str, op: tuple, op_id: str) -> None:
        """Move ``sender``'s cursor to where its edit left it."""
        if op[0] == "insert":
            self.cursors[sender] = _last_of(op_id, len(op[2]))
        else:
            first = op[1] if isinstance(op[1], str) else op[1][0]
            self.cursors[sender] = self.text.anchor(max(0, self._position(first)))

    def _applied(self, sender: str, tag: Tag) -> None:
        self.stability.delivered(sender, tag)
        self.applied += 1
        if self.collect and self.applied % COLLECT_EVERY == 0:
            # anchors on tombstones move to the visible character before them first
            # (the pending run's too: it is not sent yet, so it may still change place)
            self.cursor = self.text.anchor(self._position(self.cursor))
            if self.pending is not None:
                self.pending.after = self.text.anchor(self._position(self.pending.after))
            for member, anchor in self.cursors.items():
                self.cursors[member] = self.text.anchor(self._position(anchor))
            self.collected += self.text.collect(self.stability)

    # -- state transfer -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            return text_snapshot(self.text, self.cursors, self.me, self.cursor, self.own_ids)

    def install(self, state: Any) -> None:
        """Continue from another member's snapshot (this member is the newcomer)."""
        read = read_text_snapshot(state)
        if read is None:
            return
        text, cursors = read
        with self.lock:
            self.text = text
            self.cursors.update(cursors)
            self.cursors.pop(self.me, None)
            self._changed()

    # -- session listener ---------------------------------------------------------------
    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self.lock:
            self.members = list(all_users)
            self.stability.member_joined(client_name)
            self._changed(replica=False)

    def client_left(self, client_name: str, application_name: str) -> None:
        with self.lock:
            self.members = [m for m in self.members if m != client_name]
            self.cursors.pop(client_name, None)
            self.stability.member_left(client_name)
            self._changed(replica=False)

    # -- reading --------------------------------------------------------------------------
    def view(self) -> tuple[str, int, dict[str, int]]:
        """The text, the cursor's position and each other member's cursor position, the
        pending run shown in place (after its anchor, before anything inserted there)."""
        with self.lock:
            if self._value is None:
                self._value = self.text.value
            value = self._value
            pending = self.pending
            at = self._position(pending.after if pending is not None else self.cursor)
            shift = 0
            if pending is not None:
                shift = len(pending.text)
                value = value[:at] + pending.text + value[at:]
            others = {}
            for member, anchor in self.cursors.items():
                found = self.text.position(anchor)
                if found is not None and member in self.members:
                    others[member] = found + shift if found > at else found
            return value, at + shift, others

    def save(self, path: str) -> int:
        """Write the text to ``path`` (the pending run included); returns the number of
        characters written."""
        with self.lock:
            value = self.view()[0]
        with open(path, "w", encoding="utf-8") as out:
            out.write(value)
        return len(value)


def _touches(op: Any, anchor: str | None) -> bool:
    """Whether a delivered text operation edits at ``anchor``: an insert after it, or a
    delete of it."""
    if op[0] == "insert":
        return op[1] == anchor
    return anchor is not None and (op[1] == anchor or (type(op[1]) is tuple
                                                       and anchor in op[1]))


class RunFlusher:
    """The thread that flushes a :class:`SharedText`'s pending run when it is due."""

    def __init__(self, shared: SharedText) -> None:
        self.shared = shared
        self._cond = threading.Condition()
        self._due: float | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="run-flusher", daemon=True)
        self._thread.start()

    def due(self, delay: float) -> None:
        """Flush ``delay`` seconds from now (or sooner, if already due sooner)."""
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
                while not self._stopped and (self._due is None
                                             or self._due > time.monotonic()):
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
