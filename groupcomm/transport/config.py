"""What a communicator is built from, checked before any thread or socket exists: the
routing, the option groups of a :class:`~groupcomm.transport.communicator.Communicator`
(frozen dataclasses with keyword fields, each checked when made: ``ValueError`` where
the mistake was written; docs/programming.md, "Options"), per-client keys and the
filter stacks of both pipelines."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import (
    MessageFilterCreator,
    ReceivedMessageFilterSelector,
    SendMessageFilterSelector,
    SessionMessageListener,
)
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.protocol.placement import DEFAULT_PROBE_EVERY
from groupcomm.protocol.session_events import SessionEvent
from groupcomm.protocol.state_transfer import STATE_TIMEOUT
from groupcomm.transport.curve import ClientKeys, CurveKeyError
from groupcomm.wire.frames import DEFAULT_MAX_FRAME
from groupcomm.wire.parts import DEFAULT_MAX_STATE

__all__ = ["ROUTINGS", "Connection", "Delivery", "Limits", "Listeners", "Pipelines",
           "StateTransfer", "check_routing", "client_keys"]

ROUTINGS = ("relayed", "direct")

SendStack = Sequence[MessageFilterCreator[SentMessage]]
ReceiveStack = Sequence[MessageFilterCreator[ReceivedMessage]]


def check_routing(routing: str) -> None:
    """Raise ``ValueError`` for a routing that is not one of :data:`ROUTINGS`."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")


def _positive(owner: str, **values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{owner}: {name} must be a number > 0, not {value!r}")


@dataclass(frozen=True, kw_only=True)
class Listeners:
    """The application's callbacks, registered before the join so that they miss
    nothing; all are called on the member's loop thread. ``message``: each delivered
    message (the callback model; without it the application pulls with ``receive()``);
    ``session``: joins and leaves (a ``SessionMessageListener``); ``event``: the typed
    session events (:mod:`groupcomm.protocol.session_events`); ``sent``: each own
    message as it leaves for the network (a sender-side module may hold one back)."""

    message: Callable[[ReceivedMessage], Any] | None = None
    session: SessionMessageListener | None = None
    event: Callable[[SessionEvent], Any] | None = None
    sent: Callable[[SentMessage], Any] | None = None


@dataclass(frozen=True, kw_only=True)
class StateTransfer:
    """State transfer (see :mod:`groupcomm.protocol.state_transfer`): ``provider`` gives
    a snapshot of the application state to a newcomer, ``consumer`` installs one when
    this member is the newcomer; ``timeout`` seconds for one member's answer before the
    next is asked (it starts again with each part of a large state); ``max_state``: the
    most bytes of serialized state this newcomer takes (a larger state travels in parts
    of half a frame; past the limit it is refused in one line and the next member is
    asked)."""

    provider: Callable[[], Any] | None = None
    consumer: Callable[[Any], None] | None = None
    timeout: float = STATE_TIMEOUT
    max_state: int = DEFAULT_MAX_STATE

    def __post_init__(self) -> None:
        _positive("StateTransfer", timeout=self.timeout, max_state=self.max_state)


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """How deliveries reach the application. ``acknowledged``: a message handed over is
    applied (application clock, snapshots) only when the application acknowledges it
    (``Communicator.acknowledge``). ``release_after``: what to do with messages held on
    a member that left: None holds them (``held()``, ``release_waiting_on()``); a number
    of seconds releases them that long after the departure. ``clock_acks``: when the
    application has taken in something new and sent nothing for a heartbeat period,
    tell the others its clock on the heartbeat (they get a ``ClockAcknowledged`` event;
    causal stability advances with members that never send: docs/replicated.md)."""

    acknowledged: bool = False
    release_after: float | None = None
    clock_acks: bool = False

    def __post_init__(self) -> None:
        if self.release_after is not None and not (
                isinstance(self.release_after, int | float) and self.release_after >= 0):
            raise ValueError("release_after must be >= 0 seconds (or None: hold)")


@dataclass(frozen=True, kw_only=True)
class Connection:
    """The member's link to the server and its peers. ``heartbeat_interval`` (s);
    ``join_timeout`` (s) for the server to accept the join; ``max_frame``: the largest
    frame sent or taken (the same on every member); ``compress_frames``: small frames
    compressed in a stream per destination set (None: with relayed routing only; the
    trade-off is in docs/security.md); ``bind_host`` / ``advertise_host``: where direct
    routing takes frames and the address peers are told; ``curve_dir``: per-client keys
    (relayed routing only); ``context``: the ZeroMQ context of a communicator that runs
    a loop of its own; ``probe_every`` (s): with several servers, how often a member
    that moved off its session's first server asks the ones ranked before (docs/deploy.md)."""

    heartbeat_interval: float = 0.5
    join_timeout: float = 10.0
    max_frame: int = DEFAULT_MAX_FRAME
    compress_frames: bool | None = None
    bind_host: str = "127.0.0.1"
    advertise_host: str | None = None
    curve_dir: str | os.PathLike[str] | None = None
    context: zmq.Context | None = None
    probe_every: float = DEFAULT_PROBE_EVERY

    def __post_init__(self) -> None:
        _positive("Connection", heartbeat_interval=self.heartbeat_interval,
                  join_timeout=self.join_timeout, max_frame=self.max_frame,
                  probe_every=self.probe_every)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Bounded queues: at most ``max_pending`` sends wait for the loop (a sending thread
    then waits, and gets ``SendQueueFull`` after ``send_timeout`` seconds); with
    ``max_inbox`` undelivered messages in the pull model's inbox the member stops
    reading from the network."""

    max_pending: int = 10_000
    max_inbox: int = 100_000
    send_timeout: float = 30.0

    def __post_init__(self) -> None:
        _positive("Limits", max_pending=self.max_pending, max_inbox=self.max_inbox,
                  send_timeout=self.send_timeout)


@dataclass(frozen=True, kw_only=True)
class Pipelines:
    """The filters of both pipelines when no ``causality`` module is named: ``send`` /
    ``receive`` factories (otherwise the selectors' current ones); ``extra_send`` /
    ``extra_receive`` are added below the causality module (nearer the network) on
    each side, with or without one."""

    send: SendStack | None = None
    receive: ReceiveStack | None = None
    extra_send: SendStack = ()
    extra_receive: ReceiveStack = ()

    def stacks(self, causality: str | CausalityModule | None
               ) -> tuple[SendStack | None, ReceiveStack | None]:
        """The send and receive filter factories, in pipeline order (``None``: the
        selectors')."""
        send, receive = self.send, self.receive
        if causality is not None:
            from groupcomm.core.registry import get_module

            module = get_module(causality) if isinstance(causality, str) else causality
            send, receive = [module.send_creator()], [module.receive_creator()]
        if send is None and self.extra_send:
            send = [SendMessageFilterSelector.get_message_filter_creator()]
        if receive is None and self.extra_receive:
            receive = [ReceivedMessageFilterSelector.get_message_filter_creator()]
        return (None if send is None else [*send, *self.extra_send],
                None if receive is None else [*self.extra_receive, *receive])


def client_keys(curve_dir: str | os.PathLike[str] | None, routing: str,
                name: str) -> ClientKeys | None:
    """``name``'s per-client keys from ``curve_dir`` (``None`` without one);
    ``ValueError`` with direct routing and when the keys cannot be read."""
    if curve_dir is None:
        return None
    if routing != "relayed":
        raise ValueError("per-client keys (curve_dir) work with relayed routing only: "
                         "direct connections are not authenticated per client")
    try:
        return ClientKeys.from_dir(curve_dir, name)
    except CurveKeyError as error:
        raise ValueError(f"per-client keys: {error}") from None
