"""Held lines shown as waiting (docs/commands.md, "groupcomm im"): the receiver's causality
module holds a line that overtook its cause; :class:`HeldWatch` hears of it from the
communicator (a :class:`~groupcomm.protocol.session_events.MessageHeld` event) and shows
it once it has waited :data:`SHOW_AFTER`, and :func:`causes` names what it waits for, by
identity (``ann·2``): the lines its sender had seen (the ``seen`` a
:class:`~groupcomm.apps.im_lines.ChatLine` carries) that this viewer has not shown yet."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from groupcomm.apps.im_lines import IDENTITY_SEPARATOR, person
from groupcomm.core.messages import SentMessage
from groupcomm.protocol.session_events import MessageHeld, SessionEvent
from groupcomm.transport.communicator import Communicator, CommunicatorError

__all__ = ["SHOW_AFTER", "HeldWatch", "causes"]

log = logging.getLogger(__name__)

#: seconds a line is held before it is shown as waiting: one that overtook its cause by
#: a few milliseconds (common, and released at once) would only add a line to the screen
SHOW_AFTER = 0.2
#: ids of lines shown as held, remembered so that each is shown once
ANNOUNCED_KEPT = 4096

#: a held received message and the members it waits on
OnHeld = Callable[[object, list[str]], None]


def causes(payload: object, shown: Callable[[str], bool], waits_on: Iterable[str]) -> list[str]:
    """What a held line waits for: the identities among the lines its sender had seen
    that are not shown here (``shown(identity)``); else (an older peer's line) a line
    of each member it waits on."""
    seen = getattr(payload, "seen", ())
    missing: list[str] = []
    try:
        for who, n in seen:
            ident = f"{who}{IDENTITY_SEPARATOR}{n}"
            if isinstance(who, str) and isinstance(n, int) and not shown(ident):
                missing.append(ident)
    except (TypeError, ValueError):
        missing = []
    return missing or [f"a line of {person(member)}'s" for member in waits_on]


class HeldWatch:
    """Shows held lines: ``on_held`` gets each received message the module still holds
    :data:`SHOW_AFTER` seconds after it held it, once. No thread runs while nothing is
    held; a timer looks once for a batch of held messages."""

    def __init__(self, communicator: Communicator, on_held: OnHeld,
                 show_after: float = SHOW_AFTER) -> None:
        self._comm = communicator
        self._on_held = on_held
        self._show_after = show_after
        self._lock = threading.Lock()
        #: held, not shown yet: id -> message (in the order they were held)
        self._pending: dict[str, Any] = {}
        self._announced: OrderedDict[str, None] = OrderedDict()
        self._timer: threading.Timer | None = None
        self._stopped = False

    def start(self) -> None:
        self._comm.add_event_listener(self._on_event)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _on_event(self, event: SessionEvent) -> None:
        """On the communicator's thread: note the held message, look after a while."""
        if not isinstance(event, MessageHeld):
            return
        with self._lock:
            if self._stopped:
                return
            self._pending[event.message.message_id] = event.message
            if self._timer is None:
                self._timer = threading.Timer(self._show_after, self._look)
                self._timer.daemon = True
                self._timer.name = "held-watch"
                self._timer.start()

    def _look(self) -> None:
        with self._lock:
            self._timer = None
            if self._stopped:
                return
            pending, self._pending = self._pending, {}
        try:
            self.show(pending)
        except CommunicatorError:
            return  # closed
        except Exception:  # noqa: BLE001 - a display aid must not end the chat
            if not self._stopped:  # (a look cut short by the close is not news)
                log.exception("looking at the held messages failed")

    def show(self, pending: dict[str, Any]) -> None:
        """Tell ``on_held`` of those of ``pending`` the module still holds."""
        held = {m.message_id for m in self._comm.held() if not isinstance(m, SentMessage)}
        still = [(i, m) for i, m in pending.items() if i in held and i not in self._announced]
        if not still:
            return
        waiting = self._comm.waiting_for()
        for message_id, message in still:
            self._announced[message_id] = None
            if len(self._announced) > ANNOUNCED_KEPT:
                self._announced.popitem(last=False)
            self._on_held(message, list(waiting.get(message_id, [])))
