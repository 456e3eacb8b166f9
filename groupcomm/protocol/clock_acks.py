"""A member's acknowledgements of its application clock, without I/O: when it has sent
nothing for a heartbeat period but its application took in something new, the member
tells the others what it has delivered, so that causal stability advances with members
that never send (docs/replicated.md, "Causal stability").

An acknowledgement is a :class:`~groupcomm.core.messages.ControlMessage` of the session
layer (``protocol`` :data:`PROTOCOL`, ``kind`` :data:`KIND`) carrying the clock in the
:data:`HEADER` header as ``(names, counts)``: it passes every causality module untouched,
is never handed to the application as a message and does not advance anyone's
application clock, so taking one in never calls for another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupcomm.core.messages import ControlMessage, HeaderValue, SentMessage
from groupcomm.core.node import ProtocolNode

__all__ = ["HEADER", "KIND", "PROTOCOL", "ClockAcks", "ack_header", "ack_message",
           "is_clock_ack", "read_ack"]

#: the owner of the acknowledgements: the session layer, not a causality module
PROTOCOL = "session"
KIND = "clock_ack"
HEADER = "clock"

Clock = tuple[tuple[str, int], ...]


class ClockAcks:
    """When to acknowledge. :attr:`announced` is the clock the others last learnt from
    this member (the tag of its last send, or its last acknowledgement); None after a
    member joined (the newcomer has learnt nothing from it yet)."""

    def __init__(self) -> None:
        self.announced: Clock | None = ()
        #: an own send since the last heartbeat
        self.sent_recently = False
        #: acknowledgements decided so far
        self.count = 0

    def own_send(self, clock: Clock) -> None:
        """The application sent a message tagged ``clock`` (its tag tells the others)."""
        self.announced = clock
        self.sent_recently = True

    def peer_joined(self) -> None:
        self.announced = None

    def beat(self, clock: Clock) -> Clock | None:
        """A heartbeat, with the application clock now (sorted pairs): the clock to
        acknowledge, or None (a send since the last beat says it soon enough; nothing
        new was delivered since the last send or acknowledgement; nothing delivered
        at all)."""
        recently, self.sent_recently = self.sent_recently, False
        if recently or not clock or clock == self.announced:
            return None
        self.announced = clock
        self.count += 1
        return clock


def ack_header(clock: Clock) -> dict[str, HeaderValue]:
    """The header that carries ``clock`` (non-empty, sorted pairs)."""
    names, counts = zip(*clock, strict=True)
    return {HEADER: (names, counts)}


def ack_message(node: ProtocolNode, destinations: tuple[str, ...], clock: Clock,
                number: int) -> SentMessage:
    """``node``'s ``number``-th acknowledgement of ``clock``, to ``destinations``."""
    return SentMessage(application_name=node.application, session_name=node.session,
                       user_message=ControlMessage(PROTOCOL, KIND),
                       message_id=f"{node.name}~{KIND}{number}", sender=node.name,
                       destinations=destinations, headers=ack_header(clock))


def is_clock_ack(user: Any) -> bool:
    return type(user) is ControlMessage and user.protocol == PROTOCOL and user.kind == KIND


def read_ack(headers: Mapping[str, Any]) -> Clock:
    """The clock an acknowledgement's headers carry; ``ValueError`` naming what is wrong
    (a peer's bad input)."""
    value = headers.get(HEADER)
    if not (type(value) is tuple and len(value) == 2 and type(value[0]) is tuple
            and type(value[1]) is tuple and len(value[0]) == len(value[1])):
        raise ValueError(f"a clock acknowledgement needs a {HEADER!r} header of "
                         f"(names, counts), not {value!r:.80}")
    names, counts = value
    for name, count in zip(names, counts, strict=True):
        if type(name) is not str or not name or type(count) is not int or count < 0:
            raise ValueError(f"a clock acknowledgement's entry ({name!r:.40}, {count!r:.20}) "
                             "is not a member name with a count >= 0")
    if len(set(names)) != len(names):
        raise ValueError("a clock acknowledgement names a member twice")
    return tuple(sorted(zip(names, counts, strict=True)))
