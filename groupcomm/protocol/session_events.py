"""What a member tells its application about the session, as typed events.

An application registers a listener (``Communicator.add_event_listener``, or
``event_listener=`` at construction) and is called, on the member's thread, with one of
the frozen dataclasses below as things happen. Every event carries ``member``: this
client's member id when it happened (``carol``, or ``carol~2`` after a return). The
events are for people and programs alike: a chat says them in its own words, a test
waits for them; nothing needs to read log text.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HeldReleased", "MessagesLost", "PeerJoined", "PeerLeft", "Rejoined", "Removed",
           "ServerAnswers", "ServerSilent", "SessionEvent", "StateInstalled",
           "StateRequested", "StateUnavailable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent:
    """Base of every event: ``member`` is this client's member id at the time."""

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
    """This client is a member again after the server lost it. ``previous`` is the member
    id it had: the same as ``member`` when the server restarted (nothing changes for the
    peers); another when the session took this client for gone (a new member for every
    peer: what the old one had not sent is reported in a :class:`MessagesLost`)."""

    previous: str

    @property
    def server_restarted(self) -> bool:
        return self.previous == self.member


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSilent(SessionEvent):
    """The session server has not answered for ``silent_for`` seconds; the client keeps
    trying (relayed messages wait, direct ones go on)."""

    silent_for: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerAnswers(SessionEvent):
    """The session server answers again after a :class:`ServerSilent`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesLost(SessionEvent):
    """Messages this client accepted for sending that did not go out (``ids``, message
    ids as the sends returned them), and why."""

    ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldReleased(SessionEvent):
    """Held messages that waited on ``departed`` were delivered without its missing
    messages (the ``release_after`` policy, or ``release_waiting_on``)."""

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
class Removed(SessionEvent):
    """This client is out of the session for good: ``reason`` is ``left`` (its own
    leave) or ``replaced`` (a new start of its name took over while it was stalled)."""

    reason: str
