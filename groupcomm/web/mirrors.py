"""What the gateway keeps of a tab's application state: each tab member's mirror takes
the messages the tab takes (each delivery as it is handed to the tab, each own message
as it is sent), so that it answers newcomers' state requests with what the tab holds
and is what the tab starts from (docs/web.md, "State transfer"). Both mirrors take
messages as :class:`~groupcomm.replicated.EditorReplica` does, and their snapshots have
the format of the terminal apps', so browsers and terminals hand state to each other."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.im import HISTORY, Private
from groupcomm.core.messages import Tag
from groupcomm.core.state_transfer import Snapshot
from groupcomm.replicated import EditorReplica

log = logging.getLogger(__name__)


class ChatMirror:
    """The conversation so far, as ``groupcomm im`` keeps it: (sender, text, id) of the
    latest :data:`~groupcomm.apps.im.HISTORY` messages to everyone."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.history: deque[tuple[str, str, str]] = deque(maxlen=HISTORY)
        #: messages taken by :meth:`delivered`
        self.deliveries = 0

    def joined(self, me: str, members: Sequence[str]) -> None:
        self.me = me

    def delivered(self, sender: str, payload: Any, tag: Tag, message_id: str,
                  superseded: bool = False) -> None:
        self.deliveries += 1
        if not isinstance(payload, Private):
            text = payload if isinstance(payload, str) else repr(payload)
            self.history.append((sender, text, message_id))

    def sent(self, payload: Any, op_id: str, tag: Tag) -> None:
        if isinstance(payload, str):
            self.history.append((self.me, payload, op_id))

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

    def member_joined(self, member: str, members: Sequence[str]) -> None:
        """Nothing to do: the conversation does not depend on who is here."""

    def member_left(self, member: str) -> None:
        """Nothing to do."""


class TextMirror(EditorReplica):
    """The tab's editor replica, without a send of its own: it takes the tab's
    operations as they are sent."""

    def for_tab(self) -> dict[str, Any]:
        """The snapshot's state: the page reads the same format (plain JSON data)."""
        return self.snapshot().state
