"""A browser tab as a member of the session, with a mirror of the tab's state
(docs/web.md, "How a tab takes part").

Deliveries come on the poll thread and go to the tab through ``push`` (thread-safe); the
tab's acknowledgements and sends come from the gateway's event loop. The member's lock
orders what is pushed: a delivery that depends on an own edit goes after the answer
saying which id and tag that edit got."""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from groupcomm.apps.im import Private
from groupcomm.apps.im_held import HeldWatch
from groupcomm.apps.im_lines import (
    ChatLine,
    identity,
    said_of,
    text_of,
)
from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import ReceivedMessage, SentMessage, Tag
from groupcomm.filters.latest_value import LatestValueCreator
from groupcomm.protocol.session_events import (
    ClockAcknowledged,
    MessagesAcknowledged,
    SessionEvent,
    StateUnavailable,
    StoreGenerationChanged,
)
from groupcomm.replicated import EditorReplica, TextSequence
from groupcomm.replicated.editor import is_presence, presence, presence_slot
from groupcomm.replicated.stability import Stability
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Delivery, Listeners, Pipelines, StateTransfer
from groupcomm.web.chat_mirror import ChatMirror
from groupcomm.web.live import tap_tracer
from groupcomm.web.receipts import Receipts

log = logging.getLogger(__name__)

#: the pages, each the application name of the terminal app it stands for
PAGES = ("im", "edit")

Push = Callable[[dict[str, Any]], None]
#: provisional ids remembered per tab (only edits made before the tab learns the real
#: id, a few milliseconds, name one)
RENAMED_KEPT = 10_000
#: marks a provisional id, ``{member}#~L{n}``: the tab's name for its edit's characters
#: until it learns which message id the edit was sent as
PROVISIONAL = "#~"
#: separates a person from the number of one of their tabs in a tab's member name
#: (``ann:2``; the first tab is plain ``ann``): not a character of user names, nor of
#: the ids built from member names (``~`` incarnations, ``#`` message ids, ``+`` offsets)
TAB_SEPARATOR = ":"


def tab_member_name(user: str, slot: int) -> str:
    """The member name of ``user``'s tab number ``slot`` (1: ``ann``, 2: ``ann:2``)."""
    return user if slot <= 1 else f"{user}{TAB_SEPARATOR}{slot}"


def person_of(member: str) -> str:
    """The person a member id stands for (``ann:2~3`` -> ``ann``)."""
    return display_name(member).split(TAB_SEPARATOR, 1)[0]


class TabStability(Stability):
    """Causal stability as the tab knows it: the mirror takes each delivery before the
    tab applies it, but the tab's own entry covers only what the tab had applied (its
    acknowledgements, the tags of its edits). Counting the mirror's deliveries as the
    tab's would take an insert for stable (its stamp the smallest) while an edit the
    tab made without it is on its way, which the mirror then places before it and
    every other replica after: a newcomer's text would differ."""

    def delivered(self, sender: str, tag: Tag) -> None:
        if sender == self.me:
            super().delivered(sender, tag)  # the tab had applied what its edit's tag says
            return
        self.merge(sender, tag.clock)

    def tab_applied(self, clock: dict[str, int]) -> None:
        """The tab has applied the deliveries that make up ``clock``."""
        self.merge(self.me, clock)


class TextMirror(EditorReplica):
    """The tab's editor replica, without a send of its own."""

    def joined(self, me: str, members: Iterable[str]) -> None:
        super().joined(me, members)
        self.stability = TabStability(me, self.members)

    def tab_applied(self, clock: dict[str, int]) -> None:
        assert isinstance(self.stability, TabStability)
        self.stability.tab_applied(clock)

    def for_tab(self) -> dict[str, Any]:
        return self.snapshot().state  # the page reads the same format


@dataclass(frozen=True)
class TabPrivate(Private):
    """A private line from a browser tab, with the tab's lasting id for it: a line on its
    way when the gateway died is sent again (nothing tells whether it arrived), and a
    receiving tab shows a line of an id it has shown once only. A terminal sees a
    :class:`Private`."""

    line: str = ""


class BadEdit(ValueError):
    """An edit from a tab that cannot be applied everywhere: it was sent to no one."""


class TabClosed(Exception):
    """The tab's member cannot go on (its communicator is closed or it was replaced)."""


def payload_for_tab(kind: str, payload: Any, sender: str = "",
                    message_id: str = "") -> dict[str, Any]:
    if kind == "im":
        # the line's identity (the same at every viewer) and when its sender said it
        said = {"ident": identity(sender, payload, message_id), "said": said_of(payload)}
        if isinstance(payload, TabPrivate) and payload.line:
            return {"text": payload.text, "private": True, "line": payload.line, **said}
        if isinstance(payload, ChatLine) and payload.line:
            return {"text": payload.text, "line": payload.line, **said}
        if isinstance(payload, Private):
            return {"text": payload.text, "private": True, **said}
        return {"text": text_of(payload), **said}
    if is_presence(payload):
        # a selection's other end too
        return {"cursor": payload[1], **({"other": payload[2]} if len(payload) == 3 else {})}
    if isinstance(payload, tuple):
        return {"op": payload}  # JSON arrays, nested tuples too
    return {"other": repr(payload)[:200]}


class TabMember:
    """One tab's member of the session (``kind`` ``im`` or ``edit``)."""

    def __init__(self, kind: str, user: str, session: str, push: Push, *,
                 communicator_kwargs: dict[str, Any], presence_hold: float = 0.1,
                 inject_delays: Callable[[Communicator], None] | None = None,
                 host: Any = None, name: str | None = None,
                 tap: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``tap``: called with each trace record the live session view reads (the
        trace files are written as without it)."""
        if kind not in PAGES:
            raise ValueError(f"no page {kind!r} (im or edit)")
        self.kind = kind
        self.user = user
        #: the member's name in the session: the person's, or with a tab number
        #: (:func:`tab_member_name`)
        self.name = name or user
        self.push = push
        #: guards the mirror and sends, and orders what is pushed (see the module doc)
        self.lock = threading.RLock()
        #: provisional id the tab gave an own edit -> the message id it was sent as
        self.renamed: OrderedDict[str, str] = OrderedDict()
        self.mirror: ChatMirror | TextMirror = (
            ChatMirror(self.name) if kind == "im" else TextMirror(self.name))
        self.closed = False
        #: set while the session's store is another one and the fresh state has not come
        #: (StoreGenerationChanged): the generations and the own edits to carry onto it
        self._replaced: dict[str, Any] | None = None
        #: the member's id in the session (None until the join is done)
        self.member_id: str | None = None
        #: own lines and edits not yet received by every destination: the tab keeps
        #: them until a ``stable`` event names them (receipts.py)
        self.receipts = Receipts(self.name)
        kwargs = dict(communicator_kwargs)
        if kwargs.get("trace_dir"):  # the pages' members share names: a folder each
            kwargs["trace_dir"] = os.path.join(kwargs["trace_dir"], kind)
        if tap is not None:
            kwargs["tracer"] = tap_tracer(tap, kwargs.pop("trace_dir", None))
        if kind == "edit":
            pipelines = kwargs.get("pipelines", Pipelines())
            # above the reliable layer (which is nearest the network on receive), so the
            # values it holds come once each and in their sender's order
            kwargs["pipelines"] = replace(pipelines, extra_receive=[
                *pipelines.extra_receive, LatestValueCreator(presence_slot, presence_hold)])
        kwargs["application"] = kind
        make = host.join if host is not None else Communicator
        #: copies of own messages that left before their send returned, and the copies
        #: each own message still has to send
        self._copies_lock = threading.Lock()
        self._left_early: deque[str] = deque(maxlen=1024)
        self._unsent: dict[str, set[str]] = {}
        self.communicator = make(
            self.name, session, **kwargs,
            # the tab that only reads acknowledges what it applied (the text's collection)
            delivery=Delivery(acknowledged=True, clock_acks=kind == "edit"),
            state=StateTransfer(provider=self._snapshot, consumer=self._install),
            listeners=Listeners(session=self, message=self._on_message,
                                sent=self._on_transmitted if kind == "im" else None,
                                event=self._on_event),
        )
        #: a line the module holds is shown waiting in the tab (``holding``)
        self._held_watch = HeldWatch(self.communicator, self._on_held) if kind == "im" else None
        try:
            if inject_delays is not None:
                inject_delays(self.communicator)
            self.communicator.wait_for_state()
            self.member_id = self.communicator.member_id
            with self.lock:
                self.receipts.me = self.member_id
                self.mirror.joined(self.member_id, self.communicator.members)
        except BaseException:
            self.communicator.close()
            raise
        if self._held_watch is not None:
            self._held_watch.start()

    def welcome(self) -> dict[str, Any]:
        """The first event of the tab: who it is, who is here, its :meth:`state`."""
        with self.lock:
            return {"type": "welcome", "kind": self.kind, "user": self.user,
                    "member": self.member_id,
                    "members_at_join": self.communicator.members_at_join, **self.state()}

    def state(self) -> dict[str, Any]:
        """What the tab starts from: the mirror's state, the deliveries it holds
        (``handed``, acknowledged here: the tab skips those), the members, the clock."""
        with self.lock:
            comm = self.communicator
            handed = self.mirror.deliveries
            comm.acknowledge(handed)
            if isinstance(self.mirror, TextMirror):
                self.mirror.tab_applied(dict(comm.application_clock))
            return {"members": comm.members, "clock": comm.application_clock,
                    "handed": handed, "state": self.mirror.for_tab()}

    def resync(self) -> None:
        """Push a ``state`` event: the tab starts again from the mirror's state."""
        with self.lock:
            self.push({"type": "state", **self.state()})

    def _on_message(self, message: ReceivedMessage) -> None:
        superseded = bool(message.headers.get("superseded"))
        tag = message.app_tag  # a property that builds a Tag: once
        with self.lock:
            mirror = self.mirror
            if isinstance(mirror, ChatMirror) and mirror.repeated(message.sender,
                                                                   message.user_message):
                # a line sent again (its sender's gateway died before saying it was
                # sent): counted, for the tab to acknowledge, and shown no more
                mirror.deliveries += 1
                self.push({"type": "deliver", "n": mirror.deliveries, "repeat": True,
                           "id": message.app_message_id, "sender": message.sender})
                return
            self.mirror.delivered(message.sender, message.user_message, tag,
                                  message.app_message_id, superseded)
            self.push({"type": "deliver", "n": self.mirror.deliveries,
                       "id": message.app_message_id, "sender": message.sender,
                       "vc": tag.clock, "superseded": superseded,
                       **payload_for_tab(self.kind, message.user_message, message.sender,
                                         message.app_message_id)})

    def _on_event(self, event: SessionEvent) -> None:
        """Another member acknowledged its clock: the mirror's stability and the tab's
        learn it. The store was replaced: the tab is told, and gets the fresh state."""
        if isinstance(event, StoreGenerationChanged):
            self._store_replaced(event)
            return
        if isinstance(event, MessagesAcknowledged):
            with self.lock:
                self._stable(self.receipts.acknowledged(event.peer, event.ids))
            return
        if isinstance(event, StateUnavailable):
            with self.lock:
                if self._replaced is not None:  # nobody had the fresh state: it is empty
                    self._install({"items": TextSequence().state(), "cursors": {}, "seen": {}}
                                  if self.kind == "edit" else [])
            return
        if not isinstance(event, ClockAcknowledged) or self.kind != "edit":
            return
        with self.lock:
            assert isinstance(self.mirror, TextMirror)
            self.mirror.acknowledged(event.peer, dict(event.clock))
            self.push({"type": "acknowledged", "member": event.peer,
                       "vc": dict(event.clock)})

    def _store_replaced(self, event: StoreGenerationChanged) -> None:
        """The member came back to a session whose store is another one: its state is
        not merged, a fresh one follows. The tab is told at once; the editor's own edits
        not known to be held by every member (the old store may have been all that held
        them) go to the tab with the fresh state (id, operation, maker, the maker's
        entry of its tag), for it to put them on that state by reapply.py's rule, with
        its own unsent ones; edits the tab sends meanwhile are not sent (they name
        characters of the old text) and stay in the tab's outbox."""
        with self.lock:
            carried = []
            if isinstance(self.mirror, TextMirror):
                carried = [[own.op_id, list(own.op), own.maker,
                            own.tag.clock.get(own.maker, 0) if own.tag is not None else 0]
                           for own in self.mirror.unconfirmed.values()
                           if own.op[0] in ("insert", "delete")]
            self._replaced = {"previous": event.previous, "generation": event.generation,
                              "carried": carried}
            self.push({"type": "generation", "previous": event.previous,
                       "generation": event.generation})

    def _on_transmitted(self, message: SentMessage) -> None:
        """A copy of an own message left (a module such as mfss holds some back): the
        tab shows a message pending until every copy has left."""
        with self._copies_lock:
            copies = self._unsent.get(message.app_message_id)
            if copies is None:
                self._left_early.append(message.message_id)
                return
            copies.discard(message.message_id)
            if copies:
                return
            del self._unsent[message.app_message_id]
        self.push({"type": "transmitted", "id": message.app_message_id})

    def _snapshot(self) -> Any:
        """The mirror's state: what the tab holds once it applied all it was handed
        (the communicator asks only then)."""
        with self.lock:
            return self.mirror.snapshot()

    @property
    def snapshot_waits(self) -> bool:
        return self.communicator.state_answers_waiting > 0

    def _install(self, state: Any) -> None:
        with self.lock:
            replaced = self._replaced
            if replaced is not None and isinstance(self.mirror, ChatMirror):
                self.mirror.history.clear()  # the old store's conversation is not merged
            if replaced is not None and isinstance(self.mirror, TextMirror):
                self.mirror.seen = {}  # what the old text held says nothing of the new one
            self.mirror.install(state)
            if replaced is None:
                return
            self._replaced = None
            if isinstance(self.mirror, TextMirror):
                self.mirror.rebased = None  # the tab makes them again, through edit()
            self.push({"type": "state", "replaced": replaced, **self.state()})

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self.lock:
            self.mirror.member_joined(client_name, list(all_users))
        mine = self.member_id
        if mine not in (None, client_name) and display_name(client_name) == self.name:
            # taken for gone, it came back as a new member: start again, as on reconnecting
            self.push({"type": "fatal", "error": "the session took this tab for gone "
                       "(no contact for too long); reconnecting"})
            return
        self.push({"type": "joined", "member": client_name, "members": list(all_users)})

    def _stable(self, names: list[str]) -> None:
        """Every destination of these own messages has them: the tab lets them go."""
        if names:
            self.push({"type": "stable", "ids": names})

    def client_left(self, client_name: str, application_name: str) -> None:
        with self.lock:
            self.mirror.member_left(client_name)
            self._stable(self.receipts.left(client_name))
        comm = getattr(self, "communicator", None)
        if comm is None:
            # while joining (the member this tab's reload or reconnect replaces leaves
            # then): the welcome lists the members as they are after the join
            return
        waiting = sum(client_name in on for on in comm.waiting_for().values())
        self.push({"type": "left", "member": client_name, "members": comm.members,
                   "waiting": waiting})

    def applied(self, count: int) -> None:
        """The tab has applied the first ``count`` deliveries (cumulative)."""
        comm = self.communicator
        handed = comm.handed_over
        if count > handed:
            raise ValueError(f"applied {count}, but only {handed} deliveries were sent to "
                             "this tab")
        comm.acknowledge(count)
        if isinstance(self.mirror, TextMirror):
            with self.lock:
                self.mirror.tab_applied(dict(comm.application_clock))

    def send(self, applied: int, destinations: Sequence[str] | None, payload: Any,
             kept: bool = False) -> SentMessage:
        """Send ``payload`` (to everyone else when ``destinations`` is None) tagged
        with the first ``applied`` deliveries; the mirror takes it too. ``kept``: the tab
        keeps it until a ``stable`` event names it (its ``sent`` answer's ``id``)."""
        if self.closed:
            raise TabClosed("this tab's member has left the session")
        with self.lock:
            self.applied(applied)
            comm = self.communicator
            if destinations is None:
                destinations = comm.others or [comm.member_id]
            copies = comm.send(list(destinations), payload)
            first = copies[0]
            if self.kind == "im":
                with self._copies_lock:
                    waiting = {c.message_id for c in copies} - set(self._left_early)
                    if waiting:
                        self._unsent[first.app_message_id] = waiting
            self.mirror.sent(payload, first.message_id, Tag(first.vc))
            if kept:
                name = first.app_message_id if self.kind == "im" else first.message_id
                if self.receipts.sent(name, [(c.message_id, c.destinations) for c in copies]):
                    self._stable([name])
            return first

    def say(self, applied: int, destinations: Sequence[str] | None, text: str,
            private: bool, line: str | None, said: float) -> tuple[SentMessage, Any]:
        """Send the chat line ``text`` (``said``: when the tab's clock says it was said),
        counted after every line of this person seen; the payload sent comes back too."""
        with self.lock:
            assert isinstance(self.mirror, ChatMirror)
            n, seen = self.mirror.counted + 1, self.mirror.seen()
            payload: Any = (TabPrivate(text, said, n, seen, line or "") if private and line
                            else Private(text, said, n, seen) if private
                            else ChatLine(text, said, n, line or "", seen))
            first = self.send(applied, destinations, payload, kept=True)
            return first, payload

    def transmitted(self, app_id: str) -> bool:
        """Whether every copy of ``app_id`` has left (else a ``transmitted`` event
        says when)."""
        with self._copies_lock:
            return app_id not in self._unsent

    def edit(self, applied: int, op: tuple, local: str) -> SentMessage | None:
        """An own edit of the text (its provisional ids translated here); :class:`BadEdit`,
        nothing sent, if it cannot be applied everywhere (``check_own``). A ``sent`` event
        tells the tab the id and tag it got."""
        with self.lock:
            if self._replaced is not None:
                # it names the old text's characters: the tab keeps it and makes it again
                # on the fresh text (no answer: it stays in the tab's outbox)
                log.info("%s: an edit while the store's fresh state is awaited is not sent",
                         self.member_id)
                return None
            real = self._real
            assert isinstance(self.mirror, TextMirror)
            try:
                if op[0] == "insert":
                    op = ("insert", real(op[1]), op[2])
                else:
                    op = ("delete", real(op[1]) if isinstance(op[1], str)
                          else tuple(map(real, op[1])))
                # against what the tab had applied: the mirror may hold deliveries the
                # tab has not applied yet, and an edit naming one of their characters
                # would be concurrent with its insert and fail at other replicas
                self.applied(applied)
                self.mirror.check_own(op, seen=self.communicator.application_clock)
            except ValueError as error:
                raise BadEdit(str(error)) from None
            first = self.send(applied, None, op, kept=True)
            self.renamed[local] = first.message_id
            if len(self.renamed) > RENAMED_KEPT:
                self.renamed.popitem(last=False)
            self.push({"type": "sent", "local": local, "id": first.message_id,
                       "vc": dict(first.vc)})
            return first

    def move_cursor(self, applied: int, anchor: str | None, other: str | None = None,
                    selection: bool = False) -> SentMessage | None:
        """The tab's cursor is after ``anchor`` (with ``selection``: it selects from
        there to after ``other``)."""
        with self.lock:
            if self._replaced is not None:
                return None  # the fresh text comes, with the tab's cursor put back on it
            return self.send(applied, None, presence(self._real(anchor), self._real(other),
                                                     selection))

    def _real(self, ident: str | None) -> str | None:
        """A provisional id (``ann#~L3``, ``ann#~L3+2``) as the message id it became."""
        if ident is None or PROVISIONAL not in ident:
            return ident
        base, plus, offset = ident.rpartition("+")
        if not plus:
            base = ident
        real = self.renamed.get(base[base.index(PROVISIONAL) + 1:])
        if real is None:
            raise ValueError(f"unknown provisional id {ident!r}")
        return f"{real}+{offset}" if plus else real

    def held(self) -> list[dict[str, Any]]:
        """What the causality module holds, with whom each message waits on."""
        comm = self.communicator
        waiting = comm.waiting_for()
        rows = []
        for message in comm.held():
            payload = message.user_message
            to = list(message.destinations) if isinstance(message, SentMessage) else None
            rows.append({"id": message.message_id, "from": message.sender, "to": to,
                         "ident": identity(message.sender, payload, message.app_message_id),
                         "text": text_of(payload)[:200],
                         "waits": waiting.get(message.message_id, [])})
        return rows

    def _on_held(self, message: Any, waits_on: list[str]) -> None:
        """The module holds a received line: the tab shows it waiting, for the lines its
        sender had seen that the tab has not shown (``seen``), else for ``waits``."""
        payload = message.user_message
        seen = getattr(payload, "seen", ())
        self.push({"type": "holding", "id": message.app_message_id, "sender": message.sender,
                   "waits": waits_on,
                   "seen": [[p, n] for p, n in seen] if isinstance(seen, tuple) else [],
                   **payload_for_tab("im", payload, message.sender, message.app_message_id)})

    def close(self) -> None:
        self.closed = True
        if self._held_watch is not None:
            self._held_watch.stop()
        self.communicator.close()
