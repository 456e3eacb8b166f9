"""What the gateway keeps of a tab's application state, for newcomers and for the tab.

The tab is the application: it applies deliveries and makes its own operations. A
newcomer, though, asks a *member* for a snapshot (state transfer), and the member runs
here, in the gateway. So each tab member has a mirror of the tab's state, which takes
the same messages: each delivered message as the member hands it to the tab, each own
message as the member sends it. The tab applies a delivery a little later, when its
WebSocket brings it; but the communicator asks for a newcomer's snapshot only once the
tab has said it applied everything it was handed (acknowledged delivery), and then the
mirror and the tab hold the same messages. The mirror's snapshot has the format of the
terminal app's, so browsers and terminals hand state to each other, and it is also what
the tab starts from (:meth:`for_tab`, with :attr:`deliveries`: the deliveries it holds).

:class:`ChatMirror` keeps the conversation (``groupcomm im``'s), :class:`TextMirror` the
shared text and cursors (``groupcomm edit``'s editor replica).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.im import HISTORY, Private
from groupcomm.core.messages import ReceivedMessage, SentMessage, Tag
from groupcomm.core.state_transfer import Snapshot
from groupcomm.replicated import EditorReplica

log = logging.getLogger(__name__)


class ChatMirror:
    """The conversation so far, as ``groupcomm im`` keeps it: (sender, text, id) of the
    latest :data:`~groupcomm.apps.im.HISTORY` messages to everyone."""

    kind = "im"

    def __init__(self, me: str) -> None:
        self.me = me
        self.history: deque[tuple[str, str, str]] = deque(maxlen=HISTORY)
        #: messages taken by :meth:`delivered`
        self.deliveries = 0

    def joined(self, me: str, members: Sequence[str]) -> None:
        self.me = me

    def delivered(self, message: ReceivedMessage) -> None:
        self.deliveries += 1
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

    def member_joined(self, member: str, members: Sequence[str]) -> None:
        """Nothing to do: the conversation does not depend on who is here."""

    def member_left(self, member: str) -> None:
        """Nothing to do."""


class TextMirror:
    """The shared text and the cursors: the tab's editor replica (:class:`~groupcomm.
    replicated.EditorReplica`), taking the tab's operations as sent and the deliveries
    as handed over."""

    kind = "edit"

    def __init__(self, me: str) -> None:
        self.replica = EditorReplica(me)

    @property
    def deliveries(self) -> int:
        return self.replica.deliveries

    def joined(self, me: str, members: Sequence[str]) -> None:
        self.replica.joined(me, members)

    def delivered(self, message: ReceivedMessage) -> None:
        self.replica.delivered(message.sender, message.user_message, message.app_tag,
                               message.app_message_id,
                               bool(message.headers.get("superseded")))

    def check(self, op: Any) -> None:
        """``ValueError`` unless the tab's operation ``op`` names only characters of
        the text (checked before it is sent)."""
        self.replica.check_own(op)

    def sent(self, first: SentMessage, payload: Any) -> None:
        self.replica.sent(payload, first.message_id, Tag(first.vc))

    def snapshot(self) -> Snapshot:
        return self.replica.snapshot()

    def install(self, state: Any) -> None:
        self.replica.install(state)

    def for_tab(self) -> dict[str, Any]:
        """The snapshot's state: the page reads the same format (plain JSON data)."""
        return self.replica.snapshot().state

    def member_joined(self, member: str, members: Sequence[str]) -> None:
        self.replica.member_joined(member, members)

    def member_left(self, member: str) -> None:
        self.replica.member_left(member)
