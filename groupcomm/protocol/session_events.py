"""What a member tells its application about the session, as typed events, on the
member's thread (``Communicator.add_event_listener``). Every event carries ``member``,
this client's member id when it happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ClockAcknowledged", "HeldReleased", "MessageHeld", "MessagesAcknowledged", "MessagesLost",
           "PeerJoined", "PeerLeft", "Rejoined", "Removed", "ServerAnswers",
           "ServerSilent", "SessionEvent", "StateInstalled", "StateRequested",
           "StateUnavailable", "StoreGenerationChanged", "told_by"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent:
    member: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerJoined(SessionEvent):
    """``peer`` joined; ``members`` are the session's members now, in join order."""

    peer: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerLeft(SessionEvent):
    """``peer`` left (gracefully, or the server took it for gone); ``waiting`` are the
    ids of held messages that wait on it (see ``release_waiting_on``)."""

    peer: str
    waiting: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejoined(SessionEvent):
    """A member again after the server lost it: ``previous`` is its member id before (the
    same when the server restarted; another when it was taken for gone)."""

    previous: str

    @property
    def server_restarted(self) -> bool:
        return self.previous == self.member


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSilent(SessionEvent):
    """The session server has not answered for ``silent_for`` seconds."""

    silent_for: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerAnswers(SessionEvent):
    """The session server answers again after a :class:`ServerSilent`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesLost(SessionEvent):
    """Messages accepted for sending that did not go out, and why; ``incarnation_gone``
    when this client was declared gone before they left (they reached no one: sent
    again by the new member, they arrive once)."""

    ids: tuple[str, ...]
    reason: str
    incarnation_gone: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageHeld(SessionEvent):
    """The causality module holds ``message`` (received, an application's), which
    overtook what it waits for: a message of each of ``waiting_on`` (as the module saw
    it when it held it). Its delivery, when it comes, is the release."""

    message: Any
    waiting_on: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldReleased(SessionEvent):
    """Held messages that waited on ``departed`` were delivered without its missing ones."""

    departed: str
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StateRequested(SessionEvent):
    """This newcomer asked ``asked`` for the application state."""

    asked: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StateInstalled(SessionEvent):
    """The snapshot from ``source`` is installed; deliveries go on."""

    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StateUnavailable(SessionEvent):
    """No member could give the application state; deliveries go on without it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreGenerationChanged(SessionEvent):
    """This client came back to a session whose store is of another generation than
    the one its state came from (the store was dropped or replaced meanwhile): its
    state is not merged; a fresh state transfer follows (:class:`StateInstalled` or
    :class:`StateUnavailable`), and what the application had not sent yet is for it to
    apply again as new operations. See docs/storage.md."""

    previous: str
    generation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Removed(SessionEvent):
    """Out of the session for good: ``reason`` is ``left`` or ``replaced``."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockAcknowledged(SessionEvent):
    """``peer``'s application had delivered what ``clock`` (its application clock,
    sorted ``(member, count)`` pairs) covers: an acknowledgement it sends when it has
    delivered something new and sent nothing for a heartbeat period (causal stability
    learns from it as from the tags of ``peer``'s messages)."""

    peer: str
    clock: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesAcknowledged(SessionEvent):
    """``peer``'s process acknowledged receiving the own application messages ``ids``
    (the reliable layer's acknowledgements; none come without the layer): a copy kept
    in case this process died before they left is no longer needed for ``peer``."""

    peer: str
    ids: tuple[str, ...]


def told_by(node: Any, emit: Callable[[SessionEvent], None]) -> None:
    """Have ``node`` (a :class:`~groupcomm.core.node.ProtocolNode`) tell ``emit``, as it
    happens, what its filters report: messages that will not be sent (:class:`MessagesLost`)
    received ones its causality module holds (:class:`MessageHeld`), and own ones a peer
    acknowledged (:class:`MessagesAcknowledged`)."""
    node.undeliverable_listener = lambda ids, why: emit(
        MessagesLost(member=node.name, ids=ids, reason=why))
    node.held_listener = lambda message, waiting_on: emit(
        MessageHeld(member=node.name, message=message, waiting_on=waiting_on))
    node.acknowledged_listener = lambda peer, ids: emit(
        MessagesAcknowledged(member=node.name, peer=peer, ids=ids))
