"""A chat tab's mirror at the gateway: the conversation so far as ``groupcomm im`` keeps
it, handed to newcomers as the tab's state, and the lasting ids of the tab lines
delivered, so that a line sent again reaches the tab once (docs/web.md, "Kept until the
session has it")."""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.im import HISTORY, Private
from groupcomm.apps.im_lines import ChatLine, Entry, count_of, entry, person, said_of, text_of
from groupcomm.core.messages import Tag
from groupcomm.core.session_messages import Snapshot

log = logging.getLogger(__name__)

#: lasting ids of tab lines remembered per chat tab (a line sent again comes within seconds)
LINES_KEPT = 10_000


class ChatMirror:
    """The conversation so far, as ``groupcomm im`` keeps it: (sender, text, id, said
    at, count)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.history: deque[Entry] = deque(maxlen=HISTORY)
        self.deliveries = 0
        #: the highest count of this tab's person's lines seen (the next own line is
        #: counted after it: ``ann·n`` names one line of the person's)
        self.counted = 0
        #: person -> the count of their latest line to everyone (an own line's ``seen``)
        self.latest: dict[str, int] = {}
        #: "person/line" of the tab lines delivered, by their lasting ids (the newest
        #: LINES_KEPT): a tab sends a line again when it cannot know it arrived
        self.lines: OrderedDict[str, None] = OrderedDict()

    def repeated(self, sender: str, payload: Any) -> bool:
        """Whether ``payload`` is a tab's line delivered here before under its lasting
        id (else it is noted)."""
        line = getattr(payload, "line", "")
        if not isinstance(line, str) or not line:
            return False
        key = f"{person(sender)}/{line}"
        if key in self.lines:
            return True
        self.lines[key] = None
        if len(self.lines) > LINES_KEPT:
            self.lines.popitem(last=False)
        return False

    def joined(self, me: str, members: Sequence[str]) -> None:
        self.me = me

    def delivered(self, sender: str, payload: Any, tag: Tag, message_id: str,
                  superseded: bool = False) -> None:
        self.deliveries += 1
        self._count(sender, count_of(payload), not isinstance(payload, Private))
        if not isinstance(payload, Private):
            self.history.append((sender, text_of(payload), message_id, said_of(payload),
                                 count_of(payload)))

    def sent(self, payload: Any, op_id: str, tag: Tag) -> None:
        self._count(self.me, count_of(payload))
        if isinstance(payload, (str, ChatLine)) and not self.repeated(self.me, payload):
            self.history.append((self.me, text_of(payload), op_id, said_of(payload),
                                 count_of(payload)))

    def _count(self, sender: str, n: int, public: bool = False) -> None:
        if person(sender) == person(self.me):
            self.counted = max(self.counted, n)
        if public and n:
            self.latest[person(sender)] = max(self.latest.get(person(sender), 0), n)

    def seen(self) -> tuple[tuple[str, int], ...]:
        """The latest line to everyone of each other person, as an own line carries it."""
        return tuple(sorted((p, n) for p, n in self.latest.items() if p != person(self.me)))

    def snapshot(self) -> Snapshot:
        own = tuple(item[2] for item in self.history if item[0] == self.me)
        return Snapshot(list(self.history), reflects=own)

    def install(self, state: Any) -> None:
        try:
            entries = [entry(raw) for raw in state]
        except (TypeError, ValueError) as error:
            log.warning("the conversation received from the session is unusable (%s)", error)
            return
        self.history.extend(entries)
        for item in entries:
            self._count(item[0], item[4], True)

    def for_tab(self) -> dict[str, Any]:
        return {"history": [list(entry) for entry in self.history]}

    def member_joined(self, member: str, members: Sequence[str]) -> None:
        """The conversation does not depend on who is here."""

    def member_left(self, member: str) -> None:
        pass
