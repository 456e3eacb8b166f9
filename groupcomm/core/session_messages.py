"""The session layer's own messages (state transfer's, see
:mod:`groupcomm.protocol.state_transfer`): neither the application's nor a causality
module's, so the node does not trace them and members consume them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from groupcomm.core.messages import SystemMessage

__all__ = ["REFLECTED_IDS", "SESSION_TRAFFIC", "ClockAck", "JoinMarker", "Snapshot", "StatePart",
           "StateReply", "StateRequest"]

#: ids of the most recent deliveries a snapshot carries (see
#: :mod:`groupcomm.protocol.state_transfer`)
REFLECTED_IDS = 10_000


@dataclass(frozen=True)
class JoinMarker:
    """Sent by a member, to every member, once it has seen ``newcomer`` join: what it
    sent before comes before this (see the module docstring, the cut)."""

    newcomer: str

@dataclass(frozen=True)
class ClockAck:
    """Sent by a member, to every other member, when it delivered something new and sent
    nothing for a heartbeat period: its tag is the member's application clock, what it
    has delivered (:mod:`groupcomm.protocol.clock_acks`). Tagged and delivered in causal
    order like an application message, so that it reaches a member after every message
    its sender sent before it; consumed by the session layer, which hands the clock to
    the application as a ``ClockAcknowledged`` event."""

@dataclass(frozen=True)
class Snapshot:
    """What a provider may return instead of the bare state: the state, and the
    application-level ids of this member's own sends that it holds (the messages it was
    handed are known to the communicator already)."""

    state: Any
    reflects: tuple[str, ...] = ()

@dataclass(frozen=True, slots=True)
class StateRequest(SystemMessage):
    """A newcomer asks for the application state."""

    travels_pickled: ClassVar[bool] = True
    kind: str = "state_request"

@dataclass(frozen=True, slots=True)
class StateReply(SystemMessage):
    """A member's snapshot (``available`` False: it has none to give)."""

    travels_pickled: ClassVar[bool] = True
    available: bool
    state: Any = None
    reflected: tuple[str, ...] = ()
    #: the provider's application clock at the snapshot: the newcomer merges it, so its
    #: tags say that its sends happened after everything the snapshot holds
    clock: tuple[tuple[str, int], ...] = ()
    #: a state larger than a frame follows in ``parts`` :class:`StatePart` messages:
    #: ``size`` bytes of payload format ``fmt`` with BLAKE2b ``digest`` (``state`` None)
    parts: int = 0
    fmt: int = 0
    size: int = 0
    digest: bytes = b""
    kind: str = "state_reply"


@dataclass(frozen=True, slots=True)
class StatePart(SystemMessage):
    """Part ``index`` of the serialized state a :class:`StateReply` announced."""

    travels_pickled: ClassVar[bool] = True
    index: int
    data: bytes
    kind: str = "state_part"


#: the payload types of the session layer's own messages, which are neither the
#: application's nor the protocol's and are not traced (see ProtocolNode.trace)
SESSION_TRAFFIC: frozenset[type] = frozenset({JoinMarker, ClockAck, StateRequest, StateReply,
                                              StatePart})
