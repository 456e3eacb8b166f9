"""The inputs of a client's protocol object, as data, and :func:`handle`, which feeds
them to it: for hosts and tests that record, replay or queue inputs. The ZeroMQ host
calls :class:`~groupcomm.protocol.client.ClientProtocol`'s methods directly (the same
thing without an object per input). The application's inputs go through the member's
port (:class:`~groupcomm.protocol.port.ApplicationPort`), as they do from an application
thread: a :class:`Send` is tagged and queued there, then taken."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupcomm.core.messages import ReceivedMessage
from groupcomm.protocol.client import ClientProtocol

__all__ = ["Applied", "ClientEvent", "Close", "MessageFrame", "Send", "SessionFrame",
           "Start", "Timer", "handle"]


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
class Send:
    """The application sends ``payload`` to ``destinations`` (member ids or names)."""

    payload: Any
    destinations: Sequence[str]


@dataclass(frozen=True, slots=True)
class Applied:
    """The application has applied ``message``, which it pulled from the inbox."""

    message: ReceivedMessage


@dataclass(frozen=True, slots=True)
class Close:
    """Leave gracefully; ``direct_frames``: frames pushed to each peer."""

    direct_frames: Mapping[str, int] = field(default_factory=dict)


ClientEvent = Start | SessionFrame | MessageFrame | Timer | Send | Applied | Close


def handle(protocol: ClientProtocol, *events: ClientEvent) -> None:
    """Feed ``events`` to ``protocol`` in order; its actions go to its ``out``."""
    for event in events:
        if isinstance(event, MessageFrame):
            protocol.on_message_frame(event.frame, event.attested, event.direct, event.now)
        elif isinstance(event, SessionFrame):
            protocol.on_session_frame(event.frame, event.returned, event.now)
        elif isinstance(event, Timer):
            protocol.timer(event.now)
        elif isinstance(event, Send):
            port = protocol.port
            port.send(event.payload, [port.resolve(d) for d in event.destinations])
            protocol.take_inputs()
        elif isinstance(event, Applied):
            protocol.port.applied(event.message)
        elif isinstance(event, Start):
            protocol.start(event.address)
        elif isinstance(event, Close):
            protocol.leave(dict(event.direct_frames))
        else:
            raise TypeError(f"not a client protocol input: {event!r}")
