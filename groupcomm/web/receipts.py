"""Which of a tab's own messages every destination's process has received (docs/web.md,
"Kept until the session has it").

The gateway answers a tab's line or edit as sent once the tab's member has taken it;
the frame leaves the gateway process a moment later. A gateway killed in between takes
the message with it, and the reliable layer cannot send it again: its sender died. So
the tab keeps what it was answered until the gateway says the message is ``stable``:
every destination's reliable layer acknowledged it (a
:class:`~groupcomm.protocol.session_events.MessagesAcknowledged` for each), or the
destinations that did not have left the session. Without the reliable layer no
acknowledgement comes, and the tab keeps the message until it is a member again (it then
checks the state it gets) or its cap drops it.

No I/O and no locking here: the tab's member calls it under its lock."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

#: own messages followed per tab, as many as a page keeps (im.js, outbox.js): the oldest
#: beyond this is forgotten (counted). It bounds the memory a tab's member spends on
#: them when no acknowledgement comes (``--no-reliable``)
RECEIPTS_KEPT = 500


class Receipts:
    """Own messages, by the name the tab knows them by, not yet received by every
    destination: for each, its copies (message ids) and the peers each still lacks."""

    def __init__(self, me: str, limit: int = RECEIPTS_KEPT) -> None:
        self.me = me
        self.limit = limit
        #: tab's name of the message -> copy id -> destinations that have not acknowledged
        self._waiting: OrderedDict[str, dict[str, set[str]]] = OrderedDict()
        #: copy id -> the tab's name of its message
        self._name_of: dict[str, str] = {}
        #: messages forgotten past ``limit`` before they were stable
        self.forgotten = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def sent(self, name: str, copies: Iterable[tuple[str, Sequence[str]]]) -> bool:
        """The message ``name`` went out as ``copies`` (message id, destinations). True
        when no other member is to receive it (nothing to wait for: it is stable)."""
        waiting = {copy: set(dests) - {self.me} for copy, dests in copies}
        waiting = {copy: dests for copy, dests in waiting.items() if dests}
        if not waiting:
            return True
        self._waiting[name] = waiting
        for copy in waiting:
            self._name_of[copy] = name
        while len(self._waiting) > self.limit:
            _, old = self._waiting.popitem(last=False)
            for copy in old:
                self._name_of.pop(copy, None)
            self.forgotten += 1
        return False

    def acknowledged(self, peer: str, copies: Iterable[str]) -> list[str]:
        """``peer``'s process received ``copies``: the messages now stable, in order."""
        stable = []
        for copy in copies:
            name = self._name_of.get(copy)
            if name is None:
                continue
            lacking = self._waiting[name][copy]
            lacking.discard(peer)
            if not lacking:
                self._settle(name, copy, stable)
        return stable

    def left(self, peer: str) -> list[str]:
        """``peer`` left: it is waited for no more (a next incarnation of it gets the
        state from the others). The messages now stable."""
        stable: list[str] = []
        for name, waiting in list(self._waiting.items()):
            for copy, lacking in list(waiting.items()):
                lacking.discard(peer)
                if not lacking:
                    self._settle(name, copy, stable)
        return stable

    def _settle(self, name: str, copy: str, stable: list[str]) -> None:
        waiting = self._waiting[name]
        del waiting[copy]
        del self._name_of[copy]
        if not waiting:
            del self._waiting[name]
            stable.append(name)
