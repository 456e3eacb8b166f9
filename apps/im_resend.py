"""What ``groupcomm im`` remembers of this person's messages (:class:`OwnMessages`): to say
which ones the communicator reported not sent, each copy once, and to send again, once,
those an incarnation the session took for gone had not sent (they reached no one; see
docs/commands.md). The chat screen (:class:`~groupcomm.apps.im.ChatScreen`) calls it under
its lock."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Protocol

from groupcomm.core.causality import CausalityError
from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import SentMessage
from groupcomm.core.node import UnknownPeerError
from groupcomm.transport.communicator import Communicator, CommunicatorError

__all__ = ["QUOTE", "REMEMBERED", "OwnMessages", "Screen", "quoted"]

#: own messages (and ids shown) remembered, to tell the person which were lost and to
#: show nothing twice when the conversation so far is handed over again
REMEMBERED = 10_000
#: a quoted message is cut to this many characters in a notice about it
QUOTE = 60


def quoted(text: str) -> str:
    """``text`` as a notice about it quotes it (cut to :data:`QUOTE` characters)."""
    return text if len(text) <= QUOTE else text[:QUOTE - 1] + "…"


class Screen(Protocol):
    """What resending uses of its chat screen."""

    #: (who, text, application-level id, said at, count) of the latest messages to everyone
    history: deque[tuple[str, str, str, float, int]]
    communicator: Communicator | None
    #: identities (``ann·3``) of lines typed while the server did not answer
    waiting: list[str]
    #: own messages the module has not sent: application id -> [identity, ...]
    unsent: dict[str, list]

    def line(self, text: str) -> None: ...

    def remember_shown(self, app_id: str) -> None: ...


class OwnMessages:
    """This person's messages, by copy and by send, and what became of them lost.
    ``text_of`` gives a payload's text."""

    def __init__(self, screen: Screen, text_of: Callable[[object], str]) -> None:
        self._screen = screen
        self._text_of = text_of
        #: this person's messages by copy id: (application id, text, destination)
        self.copies: OrderedDict[str, tuple[str, str, str]] = OrderedDict()
        #: own messages by application id: (identity, payload, destinations by name,
        #: to everyone), to send them again when they reached no one
        self.sends: OrderedDict[str, tuple[str, object, tuple[str, ...], bool]] = (
            OrderedDict())
        #: own messages lost with an incarnation the session took for gone, to send
        #: again once back: application id -> the copies lost
        self.to_resend: dict[str, set[str]] = {}
        #: application id -> the names an own message was sent again to
        self.resent_to: dict[str, set[str]] = {}
        #: copies of own messages reported lost, and those the communicator said lost
        self.reported: set[str] = set()
        self.dropped: set[str] = set()

    def record(self, messages: Sequence[SentMessage], text: str, number: str,
               names: tuple[str, ...], to_everyone: bool, me: tuple[str, ...]) -> None:
        """This person sent ``messages`` (the copies of one send), shown as line
        ``number`` (its identity, ``ann·3``); ``names``: its destinations by name, ``me``: this person's names."""
        message = messages[0]
        for copy in messages:
            dest = ", ".join(d for d in copy.destinations if d not in me) or "yourself"
            self.copies[copy.message_id] = (message.app_message_id, text, dest)
        while len(self.copies) > REMEMBERED:
            self.copies.popitem(last=False)
        self.sends[message.app_message_id] = (number, message.user_message, names,
                                              to_everyone)
        while len(self.sends) > REMEMBERED:
            self.sends.popitem(last=False)

    def copies_of(self, app_id: str) -> list[str]:
        """The copy ids of the own message ``app_id`` (one per unicast of a split send)."""
        return [c for c, own in self.copies.items() if own[0] == app_id]

    def gone_with_incarnation(self, ids: Sequence[str]) -> None:
        """The copies ``ids`` were lost with an incarnation the session took for gone:
        they reached no one, and go again once back (:meth:`resend`)."""
        for copy in ids:
            own = self.copies.get(copy)
            if own is not None:
                self.to_resend.setdefault(own[0], set()).add(copy)

    def resend(self, member: str) -> None:
        """Back as ``member`` after the session took this client for gone: send again,
        once, the own messages its old incarnation had not sent."""
        screen = self._screen
        comm = screen.communicator
        lost, self.to_resend = self.to_resend, {}
        for app_id, copies in lost.items():
            entry = self.sends.get(app_id)
            if comm is None or entry is None:
                continue
            number, payload, names, to_everyone = entry
            others = comm.others
            every = self.copies_of(app_id)
            # copies said lost otherwise meanwhile (to a member the old incarnation
            # saw leave) go again too, if their member is here
            copies |= {c for c in every if c in self.dropped}
            if not copies.issuperset(every):
                # a send split into unicasts (mfss, cykas): only the copies lost
                to_everyone = False
                names = tuple(display_name(self.copies[c][2]) for c in copies)
            present = {display_name(m): m for m in others}
            dests = others if to_everyone else [present[n] for n in names if n in present]
            self.resent_to.setdefault(app_id, set()).update(display_name(d) for d in dests)
            text = self._text_of(payload)
            if not dests:
                screen.line(f"* your message {number} '{quoted(text)}' was not sent: "
                            f"{', '.join(names) or 'nobody'} left meanwhile")
                continue
            try:
                messages = comm.send(dests, payload)
            except (UnknownPeerError, CausalityError, CommunicatorError) as error:
                screen.line(f"* your message {number} '{quoted(text)}' was not sent: "
                            f"{error}")
                continue
            new_id = messages[0].app_message_id
            screen.remember_shown(new_id)
            self.sends[new_id] = (number, payload, names, to_everyone)
            for copy in messages:
                dest = ", ".join(d for d in copy.destinations if d != member)
                self.copies[copy.message_id] = (new_id, text, dest)
            if to_everyone:
                screen.history = deque(
                    ((member, item[1], new_id, *item[3:]) if item[2] == app_id else item
                     for item in screen.history), maxlen=screen.history.maxlen)
            if number in screen.waiting:
                screen.waiting.remove(number)
            screen.line(f"* {number} sent again (it had not left before the "
                        "session took you for gone)")

    def report(self) -> None:
        """Say which of this person's messages the communicator reported not sent, each
        copy once."""
        by_message: dict[str, list[str]] = {}
        new = self.dropped - self.reported
        for copy in [c for c in self.copies if c in new]:  # in the order they were sent
            self.reported.add(copy)
            app_id, _, dest = self.copies[copy]
            resent = self.resent_to.get(app_id, set())
            if resent and {display_name(d.strip()) for d in dest.split(",")} <= resent:
                continue  # sent again by the new member
            by_message.setdefault(app_id, []).append(copy)
        for app_id, copies in by_message.items():
            every = self.copies_of(app_id)
            # the copies of a send split into unicasts may be lost one by one
            to = ("" if len(copies) == len(every) else
                  f" to {', '.join(sorted(self.copies[c][2] for c in copies))}")
            self._screen.unsent.pop(app_id, None)
            self._screen.line(f"* your message '{quoted(self.copies[copies[0]][1])}' was "
                              f"not sent{to}")
