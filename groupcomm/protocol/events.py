"""The inputs of a client's protocol object, as data, and :func:`handle`, which feeds
them to it: for hosts and tests that record, replay or queue inputs. The ZeroMQ host
calls :class:`~groupcomm.protocol.client.ClientProtocol`'s methods directly (the same
thing without an object per input)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.protocol.client import ClientProtocol

__all__ = ["Acknowledged", "ApplicationSends", "ClientEvent", "Close", "MessageFrame",
           "SessionFrame", "Start", "Timer", "handle"]


@dataclass(frozen=True, slots=True)
class Start:
    """Join; ``address`` is where peers push frames (direct routing), or empty."""

    address: str = ""


@dataclass(frozen=True, slots=True)
class SessionFrame:
    """A frame from the server that is not a message (a notice, or an error with the
    relayed frame it returned)."""

    frame: bytes
    now: float
    returned: bytes | None = None


@dataclass(frozen=True, slots=True)
class MessageFrame:
    """A message frame: relayed (``attested``: the sender the server vouches for, with
    per-client keys) or pushed by a peer (``direct``)."""

    frame: bytes
    now: float
    attested: bytes | None = None
    direct: bool = False


@dataclass(frozen=True, slots=True)
class Timer:
    """Time passed (the host wakes at ``ClientProtocol.deadline``)."""

    now: float


@dataclass(frozen=True, slots=True)
class ApplicationSends:
    """The application's tagged sends, in the order they were tagged."""

    messages: Sequence[SentMessage]


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """The application has applied ``message`` (then ``listeners`` are called)."""

    message: ReceivedMessage
    listeners: Sequence[Callable[[ReceivedMessage], Any]] = ()


@dataclass(frozen=True, slots=True)
class Close:
    """Leave gracefully; ``direct_frames``: frames pushed to each peer."""

    direct_frames: Mapping[str, int] = field(default_factory=dict)


ClientEvent = (Start | SessionFrame | MessageFrame | Timer | ApplicationSends | Acknowledged
               | Close)


def handle(protocol: ClientProtocol, *events: ClientEvent) -> None:
    """Feed ``events`` to ``protocol`` in order; its actions go to its ``out``."""
    for event in events:
        if isinstance(event, MessageFrame):
            protocol.on_message_frame(event.frame, event.attested, event.direct, event.now)
        elif isinstance(event, SessionFrame):
            protocol.on_session_frame(event.frame, event.returned, event.now)
        elif isinstance(event, Timer):
            protocol.timer(event.now)
        elif isinstance(event, ApplicationSends):
            if event.messages:
                protocol.application_sends(event.messages)
        elif isinstance(event, Acknowledged):
            protocol.applied(event.message, event.listeners)
        elif isinstance(event, Start):
            protocol.start(event.address)
        elif isinstance(event, Close):
            protocol.leave(dict(event.direct_frames))
        else:
            raise TypeError(f"not a client protocol input: {event!r}")
