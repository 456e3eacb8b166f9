"""What the gateway keeps of a tab's application state, for newcomers.

The tab is the application: it applies deliveries and makes its own operations. A
newcomer, though, asks a *member* for a snapshot (state transfer), and the member runs
here, in the gateway. So each tab member has a mirror: the same state as the tab's, kept
by applying the same operations in the same order at the same points — a delivered
message when the tab acknowledges having applied it, an own operation when the tab
sends it. The mirror's snapshot has the format of the terminal app's, so browsers and
terminals hand state to each other.

:class:`ChatMirror` keeps the conversation (``groupcomm im``'s), :class:`TextMirror` the
shared text and cursors (``groupcomm edit``'s). Each also converts its state into the
JSON the page starts from (:meth:`for_tab`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any

from groupcomm.apps import shared_text
from groupcomm.apps.im import HISTORY, Private
from groupcomm.core.messages import ReceivedMessage, SentMessage, Tag
from groupcomm.core.state_transfer import REFLECTED_IDS, Snapshot
from groupcomm.replicated import Stability, TextSequence

log = logging.getLogger(__name__)

#: collect causally stable tombstones after this many applied operations (as the
#: terminal editor does)
COLLECT_EVERY = shared_text.COLLECT_EVERY


def presence_payload(anchor: str | None) -> Any:
    """The presence message the terminal editor sends for a cursor at ``anchor``."""
    make = getattr(shared_text, "presence", None)
    return make(anchor) if make is not None else shared_text.Presence(anchor)


def presence_anchor(payload: Any) -> tuple[bool, str | None]:
    """(True, anchor) when ``payload`` is a presence message, else (False, None)."""
    check = getattr(shared_text, "is_presence", None)
    if check is not None:
        return (True, payload[1]) if check(payload) else (False, None)
    cls = getattr(shared_text, "Presence", None)
    if cls is not None and isinstance(payload, cls):
        return True, payload.anchor
    return False, None


def clock_of(tag: Tag | tuple | None) -> dict[str, int] | None:
    if tag is None:
        return None
    return tag.clock if isinstance(tag, Tag) else dict(tag)


class ChatMirror:
    """The conversation so far, as ``groupcomm im`` keeps it: (sender, text, id) of the
    latest :data:`~groupcomm.apps.im.HISTORY` messages to everyone."""

    kind = "im"

    def __init__(self, me: str) -> None:
        self.me = me
        self.history: deque[tuple[str, str, str]] = deque(maxlen=HISTORY)

    def delivered(self, message: ReceivedMessage) -> None:
        payload = message.user_message
        if isinstance(payload, Private):
            return
        text = payload if isinstance(payload, str) else repr(payload)
        self.history.append((message.sender, text, message.app_message_id))

    def sent(self, first: SentMessage, payload: Any) -> None:
        if isinstance(payload, str):
            self.history.append((first.sender, payload, first.app_message_id))

    def snapshot(self) -> Snapshot:
        own = tuple(mid for who, _, mid in self.history if who == self.me)
        return Snapshot(list(self.history), reflects=own)

    def install(self, state: Any) -> None:
        try:
            entries = [(str(w), str(t), str(i)) for w, t, i in state]
        except (TypeError, ValueError) as error:
            log.warning("the conversation received from the session is unusable (%s)", error)
            return
        self.history.extend(entries)

    def for_tab(self) -> dict[str, Any]:
        return {"history": [list(entry) for entry in self.history]}

    def member_joined(self, member: str) -> None:
        """Nothing to do: the conversation does not depend on who is here."""

    def member_left(self, member: str) -> None:
        """Nothing to do."""


def text_for_tab(text: TextSequence) -> list[list[Any]]:
    """The one adapter from the Python type's state to the page's: a list of
    ``[id, [sum, id], char, delete clock or null, insert clock or null]`` in document
    order, tombstones included (the Python type's :meth:`TextSequence.items` with tags
    as plain clocks; its run-length :meth:`~TextSequence.state` is for other replicas)."""
    rows = []
    for item in text.items():
        ident, stamp, char, deleted, inserted = item[:5]
        rows.append([ident, [stamp[0], stamp[1]], char, clock_of(deleted),
                     clock_of(inserted)])
    return rows


class TextMirror:
    """The shared text and the cursors, as ``groupcomm edit`` keeps them (its snapshot
    format: ``{"items": TextSequence.state(), "cursors": {member: anchor}}``)."""

    kind = "edit"

    def __init__(self, me: str, members: Sequence[str] = ()) -> None:
        self.me = me
        self.text = TextSequence()
        self.stability = Stability(me, [me, *members])
        self.cursor: str | None = None
        self.cursors: dict[str, str | None] = {}
        self.own_ids: deque[str] = deque(maxlen=REFLECTED_IDS)
        self.applied = 0
        self.failures = 0

    def delivered(self, message: ReceivedMessage) -> None:
        payload = message.user_message
        if message.sender == self.me:
            return  # an own operation sent to oneself: applied when it was made
        is_presence, anchor = presence_anchor(payload)
        if is_presence:
            if not message.headers.get("superseded"):
                self.cursors[message.sender] = anchor
            return
        try:
            self.text.effect(payload, message.app_tag, message.app_message_id)
        except ValueError as error:
            self.failures += 1
            log.warning("mirror of %s: could not apply %s: %s", self.me,
                        message.app_message_id, error)
            return
        self.cursors[message.sender] = self._follow(payload, message.app_message_id)
        self._applied(message.sender, message.app_tag)

    def sent(self, first: SentMessage, payload: Any) -> None:
        is_presence, anchor = presence_anchor(payload)
        if is_presence:
            self.cursor = anchor
            return
        tag = Tag(first.vc)
        self.text.effect(payload, tag, first.message_id)
        self.own_ids.append(first.message_id)
        self.cursor = self._follow(payload, first.message_id)
        self._applied(self.me, tag)

    def _follow(self, op: tuple, op_id: str) -> str | None:
        """Where an edit leaves its maker's cursor (as the terminal editor moves it):
        after an insert's last character, at a delete's place."""
        if op[0] == "insert":
            return op_id if len(op[2]) == 1 else f"{op_id}+{len(op[2]) - 1}"
        first = op[1] if isinstance(op[1], str) else op[1][0]
        return self.text.anchor(max(0, (self.text.position(first) or 0)))

    def _applied(self, sender: str, tag: Tag) -> None:
        self.stability.delivered(sender, tag)
        self.applied += 1
        if self.applied % COLLECT_EVERY == 0:
            for member, anchor in self.cursors.items():
                self.cursors[member] = self._keep(anchor)
            self.cursor = self._keep(self.cursor)
            self.text.collect(self.stability)

    def _keep(self, anchor: str | None) -> str | None:
        """An anchor moved off a tombstone (collection may drop it)."""
        found = self.text.position(anchor)
        return self.text.anchor(found or 0)

    def snapshot(self) -> Snapshot:
        return shared_text.text_snapshot(self.text, self.cursors, self.me, self.cursor,
                                         self.own_ids)

    def install(self, state: Any) -> None:
        read = shared_text.read_text_snapshot(state)
        if read is None:
            return
        text, cursors = read
        self.text = text
        self.cursors.update(cursors)
        self.cursors.pop(self.me, None)

    def for_tab(self) -> dict[str, Any]:
        return {"items": text_for_tab(self.text), "cursors": dict(self.cursors)}

    def member_joined(self, member: str) -> None:
        self.stability.member_joined(member)

    def member_left(self, member: str) -> None:
        self.stability.member_left(member)
        self.cursors.pop(member, None)
