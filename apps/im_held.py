"""Held lines shown as waiting (docs/commands.md, "groupcomm im"): the receiver's causality
module holds a line that overtook its cause; :class:`HeldWatch` finds it among what the
module holds, and :func:`causes` names what it waits for, by identity (``ann·2``): the
lines its sender had seen (the ``seen`` a :class:`~groupcomm.apps.im_lines.ChatLine`
carries) that this viewer has not shown yet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from groupcomm.apps.im_lines import IDENTITY_SEPARATOR, person
from groupcomm.core.messages import SentMessage
from groupcomm.transport.communicator import Communicator, CommunicatorError

__all__ = ["HOLD_CHECK", "HeldWatch", "causes"]

log = logging.getLogger(__name__)

#: seconds between two looks at what the causality module holds
HOLD_CHECK = 0.25

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
    """Looks at what the module holds every :data:`HOLD_CHECK` seconds, on a thread of
    its own; ``on_held`` gets each received message once, when it is first seen held."""

    def __init__(self, communicator: Communicator, on_held: OnHeld) -> None:
        self._comm = communicator
        self._on_held = on_held
        self._announced: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="held-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(HOLD_CHECK):
            try:
                self.check()
            except CommunicatorError:
                return  # closed
            except Exception:  # noqa: BLE001 - a display aid must not end the chat
                if not self._stop.is_set():  # (a look cut short by the close is not news)
                    log.exception("looking at the held messages failed")
                return

    def check(self) -> None:
        """Tell ``on_held`` of the received messages held now and not told yet."""
        held = [m for m in self._comm.held() if not isinstance(m, SentMessage)]
        if not held:
            self._announced.clear()
            return
        waiting = self._comm.waiting_for()
        ids = {m.message_id for m in held}  # type: ignore[attr-defined]
        self._announced &= ids
        for message in held:
            message_id = message.message_id  # type: ignore[attr-defined]
            if message_id not in self._announced:
                self._announced.add(message_id)
                self._on_held(message, list(waiting.get(message_id, [])))
