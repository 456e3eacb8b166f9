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

__all__ = ["Clock", "ClockAcks"]

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

    def peer_joined(self) -> None:
        self.announced = None

    def due(self, clock: Clock) -> bool:
        """A heartbeat, with the application clock now (sorted pairs): whether to
        acknowledge (not when a send since the last beat says it soon enough, nothing
        new was delivered since the last send or acknowledgement, or nothing at all)."""
        recently, self.sent_recently = self.sent_recently, False
        return not recently and bool(clock) and clock != self.announced
