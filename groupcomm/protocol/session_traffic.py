"""Messages a client's node delivers that are the session's, not the application's:
join markers (state transfer's cut), clock acknowledgements (causal stability) and
stand-ins for payloads that could not travel. :func:`take_session_message` takes them
before the application would."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from groupcomm.core.messages import ReceivedMessage, Withdrawn
from groupcomm.core.session_messages import ClockAck, JoinMarker
from groupcomm.protocol import session_events as events

__all__ = ["SESSION_KINDS", "take_session_message"]

#: the types taken here (a cheap test before the call, on every delivery)
SESSION_KINDS = frozenset({JoinMarker, ClockAck, Withdrawn})

log = logging.getLogger(__name__)


def take_session_message(message: ReceivedMessage, *, me: str, transfer: Any,
                         stats: Counter[str],
                         emit: Callable[[events.SessionEvent], None]) -> bool:
    """Whether ``message`` was the session's (and is taken here), for member ``me``."""
    user = message.user_message
    kind = type(user)
    if kind is JoinMarker:
        transfer.marker(user, message.sender)
        return True
    if kind is ClockAck:  # delivered after all its sender sent before: causal order
        stats["clock_acks_received"] += 1
        clock = tuple(sorted(message.app_tag.clock.items()))
        emit(events.ClockAcknowledged(member=me, peer=message.sender, clock=clock))
        return True
    if kind is Withdrawn:  # its payload could not travel
        stats["withdrawn"] += 1
        log.warning("%s: message %s from %s never reaches the application: its sender "
                    "could not send it (%s)", me, message.message_id, message.sender,
                    user.reason)
        return True
    return False
