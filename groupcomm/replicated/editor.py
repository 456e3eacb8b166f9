"""One member's editor of the shared text, with no I/O; who keeps one and what it does:
docs/replicated.md, "The editor"."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.core.session_messages import REFLECTED_IDS, Snapshot
from groupcomm.replicated.reapply import OwnOperation, Rebased, rebase
from groupcomm.replicated.stability import Stability
from groupcomm.replicated.text import TextSequence

log = logging.getLogger(__name__)

#: collect causally stable tombstones after this many applied operations
COLLECT_EVERY = 64
#: the most characters one insert carries (a longer paste is sent as several, within the
#: communicator's payload limit)
RUN_LIMIT = 16_384
#: a presence message is ``("cursor", anchor)``, or ``("cursor", anchor, other)`` for a
#: selection (``other``: the id before its other end): a plain tuple, so that it travels
#: in the compact payload encoding, not as a pickled class
PRESENCE = "cursor"

#: the host's send: the payload in, the message id and the tag of the send out (raises
#: when it could not send)
Send = Callable[[Any], tuple[str, Tag]]


def presence(anchor: str | None, other: str | None = None,
             selection: bool = False) -> tuple[str | None, ...]:
    """A cursor after ``anchor``; with ``selection``, a selection from there to after
    ``other``."""
    return (PRESENCE, anchor, other) if selection else (PRESENCE, anchor)


def is_presence(payload: Any) -> bool:
    return (type(payload) is tuple and len(payload) in (2, 3) and payload[0] == PRESENCE
            and all(p is None or type(p) is str for p in payload[1:]))


def presence_slot(payload: Any) -> str | None:
    """The latest-value filter's slot function: cursors are volatile, edits are not."""
    return "cursor" if is_presence(payload) else None


def touches(op: Any, anchor: str | None) -> bool:
    """Whether a text operation inserts after ``anchor`` or deletes it."""
    if op[0] == "insert":
        return op[1] == anchor
    return anchor is not None and (op[1] == anchor or (type(op[1]) is tuple and anchor in op[1]))


@dataclass
class PendingRun:
    """Characters typed but not sent yet: they go right after ``after`` (an anchor)."""

    after: str | None
    text: str


class EditorReplica:
    """One member's text, its cursor, the others' cursors and the members. Not
    thread-safe: a host with several threads holds a lock around it."""

    def __init__(self, me: str, send: Send | None = None, *, members: Iterable[str] = (),
                 coalesce: bool = False, collect: bool = True) -> None:
        """``send``: how own messages go out (``None``: a replica that only takes
        messages sent elsewhere, such as the gateway's mirror of a tab);
        ``coalesce``: hold typed characters in a pending run; ``collect``: collect
        causally stable tombstones (off when the module does not carry the text)."""
        self.send = send
        self.coalesce = coalesce
        self.collect = collect
        self.text = TextSequence()
        self.pending: PendingRun | None = None
        self.cursor: str | None = None
        #: member -> anchor of its cursor
        self.cursors: dict[str, str | None] = {}
        #: ids of own operations (a snapshot says it reflects them)
        self.own_ids: deque[str] = deque(maxlen=REFLECTED_IDS)
        #: every message :meth:`delivered` took: what a host with acknowledged delivery
        #: acknowledges
        self.deliveries = 0
        #: text operations applied, own ones included
        self.applied = 0
        self.collected = 0
        #: delivered operations that could not be applied (a module without causal order)
        self.failures = 0
        self.last_failure = ""
        #: bumped whenever what :meth:`view` returns may have changed (screens cache on it)
        self.version = 0
        #: own text operations not known to be held by every member, in the order they
        #: were made: what a return as a new member carries onto the text it receives
        self.unconfirmed: dict[str, OwnOperation] = {}
        #: per member, the most of its operations applied here (the text holds them)
        self.seen: dict[str, int] = {}
        #: True while own edits cannot go out (back as a new member, the text not in
        #: yet): they apply here under provisional ids and go once it is installed
        self.offline = False
        self._provisional = 0
        #: what the last :meth:`install` carries again, until :meth:`resend` sent it
        self.rebased: Rebased | None = None
        self._resent: list[str] = []
        self._cursor_before: str | None = None
        #: the last re-apply once sent (what the screen says)
        self.last_reapply: Rebased | None = None
        self._value: str | None = None
        self.joined(me, members)

    def joined(self, me: str, members: Iterable[str]) -> None:
        """This member is ``me`` (an incarnation's id, ``ann~2``, may differ from the
        name it was made with) in a session of ``members``."""
        self.me = me
        self.members = list(dict.fromkeys([*members] or [me]))
        self.stability = Stability(me, self.members)
        self._changed(text=False)

    @property
    def position(self) -> int:
        """The cursor's position in what :meth:`view` shows."""
        pending = self.pending
        if pending is not None:
            return self.place(pending.after) + len(pending.text)
        return self.place(self.cursor)

    def place(self, anchor: str | None) -> int:
        """Where ``anchor`` is in the text (0 for an anchor not here)."""
        found = self.text.position(anchor)
        return 0 if found is None else found

    def insert(self, text: str) -> bool:
        """Type or paste ``text`` at the cursor: one character but a newline is held in
        the pending run when typing is coalesced (True when this starts the run: the
        host flushes it once its window has passed); anything else is sent now."""
        if not text:
            return False
        if self.coalesce and len(text) == 1 and text != "\n":
            pending = self.pending
            if pending is None:
                self.pending = PendingRun(self.cursor, text)
                self._changed(text=False)
                return True
            pending.text += text
            self._changed(text=False)
            if len(pending.text) >= RUN_LIMIT:
                self.flush()
            return False
        self.flush()
        for start in range(0, len(text), RUN_LIMIT):
            run = text[start:start + RUN_LIMIT]
            self._own(self.text.prepare_insert(self.place(self.cursor), run))
        return False

    def flush(self) -> None:
        """Send what :meth:`install` carries again, then the pending run (if any) as one
        insert. When it cannot be sent it stays pending and the error goes on: what was
        typed is not lost."""
        if self.rebased is not None:
            self.resend()
        pending, self.pending = self.pending, None
        if pending is None:
            return
        # after the visible character before its place: the one it was typed after may
        # be a tombstone another member has collected
        after = self.text.anchor(self.place(pending.after))
        try:
            self._own(("insert", after, pending.text))
        except Exception:
            self.pending = pending
            raise

    def backspace(self) -> None:
        pending = self.pending
        if pending is not None:
            # the last typed character was never sent: take it back, no operation
            pending.text = pending.text[:-1]
            if not pending.text:
                self.pending = None
            self._changed(text=False)
            return
        at = self.place(self.cursor)
        if at:
            self._own(self.text.prepare_delete(at - 1))

    def delete(self) -> None:
        """Delete the character after the cursor."""
        self.flush()
        at = self.place(self.cursor)
        if at < self.text.visible_length():
            self._own(self.text.prepare_delete(at))

    def move_to(self, position: int, announce: bool = True) -> None:
        """Put the cursor at ``position`` (clamped) and tell the others, unless not
        ``announce`` (an edit right after shows them where it is)."""
        self.flush()
        position = max(0, min(position, self.text.visible_length()))
        anchor = self.text.anchor(position)
        if anchor == self.cursor:
            return
        if announce:
            self._own(presence(anchor))
        else:
            self.cursor = anchor
            self._changed(text=False)

    def _own(self, payload: Any) -> str:
        if self.offline:
            return self._provisional_op(payload)
        if self.send is None:
            raise RuntimeError(f"{self.me}'s replica sends nothing of its own (it was made "
                               "without a send function)")
        op_id, tag = self.send(payload)
        self.sent(payload, op_id, tag)
        return op_id

    def _provisional_op(self, payload: Any) -> str:
        """An own edit while cut off: applied here under a provisional id, with a tag
        after everything applied, kept to go once the text is back (:meth:`install`)."""
        self._provisional += 1
        op_id = f"{self.me}@{self._provisional}"
        if is_presence(payload):
            self.cursor = payload[1]
            self._changed(text=False)
            return op_id
        # counted by an entry of its own: provisional edits are a sender of their own
        self.text.effect(payload, Tag({**self.seen, f"{self.me}@": self._provisional}),
                         op_id, f"{self.me}@")
        self.unconfirmed[op_id] = OwnOperation(op_id, payload, self.me, None)
        self.cursor = self._follow(payload, op_id)
        self._changed()
        return op_id

    def resend(self) -> Rebased | None:
        """Send, as new operations, what the last :meth:`install` carries again (see
        :func:`~groupcomm.replicated.reapply.rebase`), then put the cursor and the
        pending run back at their places by character id; returns what was carried once
        all of it is sent (a send that raises keeps the rest for the next call)."""
        rebased = self.rebased
        if rebased is None:
            return None
        moved = rebased.moved(self._resent)
        for op in rebased.ops[len(self._resent):]:
            op_id = self._own(rebased.resolve(op, moved))
            self._resent.append(op_id)
            moved = rebased.moved(self._resent)
        self.cursor = rebased.place(self._cursor_before, moved)
        if self.pending is not None:
            self.pending.after = rebased.place(self.pending.after, moved)
        self.rebased, self._resent = None, []
        self.last_reapply = rebased
        self._changed(text=False)
        return rebased

    def sent(self, payload: Any, op_id: str, tag: Tag) -> None:
        """An own message went out as ``op_id`` with ``tag``: apply it (``ValueError``
        if it names a character not here)."""
        if is_presence(payload):
            self.cursor = payload[1]
            self._changed(text=False)
            return
        # the member that sent it, from its id (``ann~2#7``): a send racing a return as
        # a new member is the new one's
        maker = op_id.rpartition("#")[0] or self.me
        self.text.effect(payload, tag, op_id, maker)
        self.own_ids.append(op_id)
        self.unconfirmed[op_id] = OwnOperation(op_id, payload, maker, tag)
        self.cursor = self._follow(payload, op_id)
        self._applied(self.me, tag)
        self._changed()

    def check_own(self, op: Any, seen: Mapping[str, int] | None = None) -> None:
        """``ValueError`` unless ``op`` is a text operation naming only characters that
        are here (so that a bad one made elsewhere is refused, not sent and failed).
        With ``seen``, the clock of what its maker had applied, also unless every named
        character's insert is in it and a delete names no character whose delete is in
        it: anything else is concurrent with what it names (it fails at a replica that
        has not delivered the insert) or names what its maker could not see (a
        tombstone that replicas may have forgotten)."""
        if not isinstance(op, tuple) or len(op) < 2 or op[0] not in ("insert", "delete"):
            raise ValueError(f"not a text operation: {op!r:.80}")
        if op[0] == "insert":
            named = () if op[1] is None else (op[1],)
        else:
            named = (op[1],) if isinstance(op[1], str) else op[1]
        for ident in named:
            tags = self.text.tags_of(ident)
            if tags is None:
                raise ValueError(f"the operation names {ident!r:.60}, which is not in "
                                 f"{self.me}'s text")
            if seen is None:
                continue
            inserted, deleted = tags
            if inserted is not None and not _covers(seen, inserted.clock):
                raise ValueError(f"the operation names {ident!r:.60}, whose insert the "
                                 "sender had not applied when it made the operation")
            if op[0] == "delete" and deleted is not None and _covers(seen, deleted.clock):
                raise ValueError(f"the delete names {ident!r:.60}, which the sender had "
                                 "already seen deleted")

    def delivered(self, sender: str, payload: Any, tag: Tag, message_id: str,
                  superseded: bool = False) -> bool:
        """Take a delivered message (``superseded``: a presence the latest-value filter
        replaced). True when it edits where the pending run is typed: the host flushes
        the run soon."""
        self.deliveries += 1
        if sender == self.me and (is_presence(payload) or message_id in self.own_ids):
            return False  # an own operation sent to oneself: applied when it was made
        # (by id, not by sender: a new process under a name the session had, alice~2
        # before it learns its id, is handed alice's operations by the store's replay)
        if is_presence(payload):
            # its tag says what its sender had delivered, as an edit's does: a member
            # that only moves its cursor does not hold collection back
            self.stability.delivered(sender, tag)
            if not superseded:
                self.cursors[sender] = payload[1]
                self._changed(text=False)
            return False
        try:
            self.text.effect(payload, tag, message_id, sender)
        except ValueError as error:
            self.failures += 1
            self.last_failure = f"{message_id} from {sender}: {error}"
            log.warning("%s could not apply %s", self.me, self.last_failure)
            self._changed(text=False)
            return False
        self.cursors[sender] = self._follow(payload, message_id)
        self._applied(sender, tag)
        self._changed()
        return self.pending is not None and touches(payload, self.pending.after)

    def _follow(self, op: tuple, op_id: str) -> str | None:
        """Where an edit leaves its maker's cursor."""
        if op[0] == "insert":
            length = len(op[2])
            return op_id if length == 1 else f"{op_id}+{length - 1}"
        first = op[1] if isinstance(op[1], str) else op[1][0]
        return self.text.anchor(self.place(first))

    def _applied(self, sender: str, tag: Tag) -> None:
        self.stability.delivered(sender, tag)
        seen = self.seen
        for member, count in tag.clock.items():
            if seen.get(member, 0) < count:
                seen[member] = count
        self.applied += 1
        if self.applied % COLLECT_EVERY == 0:
            self._confirm()
            if self.collect:
                self._collect()

    def _confirm(self) -> None:
        """Forget the own operations every member holds (they become stable in the
        order they were made); an earlier incarnation's wait for the next install."""
        unconfirmed = self.unconfirmed
        while unconfirmed:
            first = next(iter(unconfirmed.values()))
            if (first.maker != self.me or first.tag is None
                    or not self.stability.is_stable(first.tag)):
                return
            del unconfirmed[first.op_id]

    def acknowledged(self, member: str, clock: Mapping[str, int]) -> None:
        """``member``, which may send nothing, acknowledged what it has delivered (a
        ``ClockAcknowledged`` event): stability learns it, and what it settles is
        collected now, not at the next edit (there may be none)."""
        if self.stability.acknowledged(member, clock) and self.collect:
            self._collect()

    def _collect(self) -> None:
        """Collect, anchors on tombstones moved first to the visible character before."""
        self.cursor = self.text.anchor(self.place(self.cursor))
        if self.pending is not None:
            self.pending.after = self.text.anchor(self.place(self.pending.after))
        for member, anchor in self.cursors.items():
            self.cursors[member] = self.text.anchor(self.place(anchor))
        self.collected += self.text.collect(self.stability)

    def member_joined(self, member: str, members: Sequence[str] | None = None) -> None:
        """``member`` joined (``members``: everyone now, if the host knows)."""
        if members is not None:
            self.members = list(members)
        elif member not in self.members:
            self.members.append(member)
        self.stability.member_joined(member)
        self._changed(text=False)

    def member_left(self, member: str) -> None:
        self.members = [m for m in self.members if m != member]
        self.cursors.pop(member, None)
        self.stability.member_left(member)
        self._changed(text=False)

    def snapshot(self) -> Snapshot:
        """The text, every cursor and the own operations it reflects, for a newcomer."""
        return Snapshot({"items": self.text.state(),
                         "cursors": {**self.cursors, self.me: self.cursor},
                         "seen": dict(self.seen)},
                        reflects=tuple(self.own_ids))

    def install(self, state: Any) -> bool:
        """Continue from a :meth:`snapshot` state (another member's, or this member's
        own kept elsewhere: its cursor comes back too); False, logged, when unusable.
        Own operations the state may not hold (:attr:`unconfirmed`: an earlier
        incarnation's, or made while :attr:`offline`) are carried onto it
        (:attr:`rebased`), to go as new operations at the next :meth:`resend` or
        :meth:`flush`; the cursor stays by the character before it."""
        try:
            text = TextSequence.from_state(state["items"])
            cursors = dict(state["cursors"])
            seen = _clock(state.get("seen"))
        except (TypeError, KeyError, ValueError, AttributeError) as error:
            log.warning("%s: the text received from the session is unusable (%s); "
                        "starting from an empty text", self.me, error)
            return False
        old, own = self.text, list(self.unconfirmed.values())
        self.text = text
        self.offline = False
        if seen is not None:
            for member, count in seen.items():
                if self.seen.get(member, 0) < count:
                    self.seen[member] = count
        self.cursors.update(cursors)
        mine = self.cursors.pop(self.me, self.cursor)
        if own:
            # the pending run keeps its old anchor until resend() places it
            self.rebased = rebase(old, text, own, seen)
            self._resent = []
            self._cursor_before = self.cursor
            self.unconfirmed = {}
            self.cursor = self.rebased.place(self.cursor, {})
        else:
            self.cursor = mine
        self._changed()
        return True

    def view(self) -> tuple[str, int, dict[str, int]]:
        """The text with the pending run in place, the cursor's position and the other
        members' cursor positions."""
        if self._value is None:
            self._value = self.text.value
        value = self._value
        pending = self.pending
        at = self.place(pending.after if pending is not None else self.cursor)
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

    def _changed(self, text: bool = True) -> None:
        self.version += 1
        if text:
            self._value = None


def _clock(value: Any) -> dict[str, int] | None:
    """A state's ``seen`` clock (absent in states made before it was kept: ``None``)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in value.items()):
        raise ValueError(f"the state's seen clock is not member -> count: {value!r:.80}")
    return dict(value)


def _covers(clock: Mapping[str, int], other: Mapping[str, int]) -> bool:
    """Whether vector clock ``clock`` is at or after ``other`` in every entry."""
    return all(clock.get(member, 0) >= count for member, count in other.items())
