"""The shared text behind ``groupcomm edit``: one replica, its cursors and its members.

What the screen shows and what the keys do go through :class:`SharedText`; it owns a
:class:`~groupcomm.replicated.TextSequence` and talks to the communicator. Local edits
are applied at once with the tag of their send and broadcast; delivered edits are
applied with their tag (see :mod:`groupcomm.replicated`). Cursors are anchors (the id
of the character a cursor follows), so they stay put while others edit around them.
Another member's cursor moves with its edits and, when it only moves, through
:class:`Presence` messages, which travel through the latest-value jitter buffer
(:mod:`groupcomm.filters.latest_value`). Thread-safe: keys arrive on the screen's
thread, deliveries on the communicator's.
"""

from __future__ import annotations

import logging
import threading
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


@dataclass(frozen=True)
class Presence:
    """Where a member's cursor is, when it moved without editing (``None``: the start)."""

    anchor: str | None


def presence_slot(payload: Any) -> str | None:
    """The latest-value filter's slot function: cursors are volatile, edits are not."""
    return "cursor" if isinstance(payload, Presence) else None


class SharedText:
    """One member's replica of the text, its cursor, the others' cursors and members."""

    def __init__(self, me: str, *, collect: bool = True,
                 on_change: Callable[[], None] | None = None) -> None:
        self.me = me
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
        self.on_change()

    # -- local edits (screen thread) ----------------------------------------------------
    @property
    def position(self) -> int:
        with self.lock:
            return self._position(self.cursor)

    def _position(self, anchor: str | None) -> int:
        found = self.text.position(anchor)
        return 0 if found is None else found

    def insert(self, text: str) -> None:
        """Type or paste ``text`` at the cursor."""
        for start in range(0, len(text), RUN_LIMIT):
            run = text[start:start + RUN_LIMIT]
            with self.lock:
                op = self.text.prepare_insert(self._position(self.cursor), run)
                op_id = self._apply_own(op)
                self.cursor = op_id if len(run) == 1 else f"{op_id}+{len(run) - 1}"
        self.on_change()

    def backspace(self) -> None:
        with self.lock:
            at = self._position(self.cursor)
            if at == 0:
                return
            before = self.text.anchor(at - 1)
            self._apply_own(self.text.prepare_delete(at - 1))
            self.cursor = before
        self.on_change()

    def delete(self) -> None:
        with self.lock:
            at = self._position(self.cursor)
            if at >= self.text.visible_length():
                return
            self._apply_own(self.text.prepare_delete(at))
        self.on_change()

    def move_to(self, position: int, announce: bool = True) -> None:
        """Put the cursor at ``position`` (clamped to the text) and tell the others
        (unless not ``announce``: an edit right after shows them where it is)."""
        with self.lock:
            position = max(0, min(position, self.text.visible_length()))
            anchor = self.text.anchor(position)
            if anchor == self.cursor:
                return
            self.cursor = anchor
            if announce:
                self._broadcast(Presence(anchor))
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
        payload = message.user_message
        with self.lock:
            if message.sender == self.me:
                return  # an own operation sent to oneself: applied when it was made
            if isinstance(payload, Presence):
                if not message.headers.get("superseded"):
                    self.cursors[message.sender] = payload.anchor
            else:
                try:
                    self.text.effect(payload, message.app_tag, message.app_message_id)
                except ValueError as error:
                    self.failures += 1
                    self.last_failure = f"{message.app_message_id} from {message.sender}: {error}"
                    log.warning("could not apply %s", self.last_failure)
                else:
                    self._follow(message.sender, payload, message.app_message_id)
                    self._applied(message.sender, message.app_tag)
        self.on_change()

    def _follow(self, sender: str, op: tuple, op_id: str) -> None:
        """Move ``sender``'s cursor to where its edit left it."""
        if op[0] == "insert":
            self.cursors[sender] = op_id if len(op[2]) == 1 else f"{op_id}+{len(op[2]) - 1}"
        else:
            first = op[1] if isinstance(op[1], str) else op[1][0]
            self.cursors[sender] = self.text.anchor(max(0, self._position(first)))

    def _applied(self, sender: str, tag: Tag) -> None:
        self.stability.delivered(sender, tag)
        self.applied += 1
        if self.collect and self.applied % COLLECT_EVERY == 0:
            # anchors on tombstones move to the visible character before them first
            self.cursor = self.text.anchor(self._position(self.cursor))
            for member, anchor in self.cursors.items():
                self.cursors[member] = self.text.anchor(self._position(anchor))
            self.collected += self.text.collect(self.stability)

    # -- state transfer -------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self.lock:
            return Snapshot({"items": self.text.state(),
                             "cursors": {**self.cursors, self.me: self.cursor}},
                            reflects=tuple(self.own_ids))

    def install(self, state: Any) -> None:
        """Continue from another member's snapshot (this member is the newcomer)."""
        try:
            text = TextSequence.from_state(state["items"])
            cursors = dict(state["cursors"])
        except (TypeError, KeyError, ValueError) as error:
            log.warning("the text received from the session is unusable (%s); starting "
                        "from an empty text", error)
            return
        with self.lock:
            self.text = text
            self.cursors.update(cursors)
            self.cursors.pop(self.me, None)
        self.on_change()

    # -- session listener ---------------------------------------------------------------
    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self.lock:
            self.members = list(all_users)
            self.stability.member_joined(client_name)
        self.on_change()

    def client_left(self, client_name: str, application_name: str) -> None:
        with self.lock:
            self.members = [m for m in self.members if m != client_name]
            self.cursors.pop(client_name, None)
            self.stability.member_left(client_name)
        self.on_change()

    # -- reading --------------------------------------------------------------------------
    def view(self) -> tuple[str, int, dict[str, int]]:
        """The text, the cursor's position and each other member's cursor position."""
        with self.lock:
            others = {}
            for member, anchor in self.cursors.items():
                found = self.text.position(anchor)
                if found is not None and member in self.members:
                    others[member] = found
            return self.text.value, self._position(self.cursor), others

    def save(self, path: str) -> int:
        """Write the text to ``path``; returns the number of characters written."""
        with self.lock:
            value = self.text.value
        with open(path, "w", encoding="utf-8") as out:
            out.write(value)
        return len(value)
