"""When a member acknowledges its application clock, without I/O: when it has sent
nothing for a heartbeat period but its application took in something new, the member
tells the others what it has delivered, so that causal stability advances with members
that never send (docs/replicated.md, "Members that never send").

The acknowledgement is a :class:`~groupcomm.core.session_messages.ClockAck`, tagged like
an application send (its tag is the clock) and delivered in causal order, so that it
reaches a member after everything its sender sent before it: a message concurrent with
what the clock covers cannot still be on its way. It is consumed by the session layer
and moves no receiver's application clock, so taking one in never calls for another.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from groupcomm.core.messages import SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.session_messages import ClockAck, JoinMarker

__all__ = ["Clock", "ClockAcks"]

log = logging.getLogger(__name__)

#: an application clock as sorted ``(member, count)`` pairs
Clock = tuple[tuple[str, int], ...]


class ClockAcks:
    """When to acknowledge. :attr:`announced` is the clock the others last learnt from
    this member (the tag of its last send or acknowledgement); None after a member
    joined (the newcomer has learnt nothing from it yet)."""

    def __init__(self) -> None:
        self.announced: Clock | None = ()
        #: an application send since the last heartbeat
        self.sent_recently = False
        #: acknowledgements sent
        self.count = 0

    def own_send(self, clock: Clock) -> None:
        """The application sent a message tagged ``clock`` (its tag tells the others)."""
        self.announced = clock
        self.sent_recently = True

    def acknowledged(self, clock: Clock) -> None:
        """An acknowledgement went out tagged ``clock``."""
        self.announced = clock
        self.count += 1

    def sent(self, batch: Sequence[SentMessage], application: bool) -> None:
        """What the others learn of this member's clock from ``batch`` (``application``:
        it holds application sends): the tag of its last send or acknowledgement (a
        join marker reaches no application)."""
        for message in reversed(batch):
            kind = type(message.user_message)
            if kind is ClockAck:
                self.acknowledged(tuple(sorted(message.vc)))
            elif kind is not JoinMarker:
                self.own_send(tuple(sorted(message.vc)))
            else:
                continue
            break
        if application:
            self.sent_recently = True

    def heartbeat(self, node: ProtocolNode) -> list[SentMessage]:
        """A heartbeat of a joined member with no sends queued: the acknowledgement
        tagged on ``node`` when one is due (behind what is queued, like a join marker),
        else nothing. A module that cannot carry it leaves it to the next beat."""
        others = [m for m in node.members if m != node.name]
        if not others or not self.due(tuple(sorted(node.application_clock.items()))):
            return []
        try:
            return node.tag_sends(ClockAck(), others)
        except Exception as error:  # noqa: BLE001 - any module error: the next beat
            log.debug("%s: no clock acknowledgement this heartbeat (%s)", node.name, error)
            return []

    def peer_joined(self) -> None:
        self.announced = None

    def due(self, clock: Clock) -> bool:
        """A heartbeat, with the application clock now (sorted pairs): whether to
        acknowledge (not when a send since the last beat says it soon enough, nothing
        new was delivered since the last send or acknowledgement, or nothing at all)."""
        recently, self.sent_recently = self.sent_recently, False
        return not recently and bool(clock) and clock != self.announced
