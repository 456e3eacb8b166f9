"""Filters, processors, factories and selectors (the vocabulary of source 003).

A pipeline is a chain of :class:`MessageFilter` objects, each handing what it lets
through to the next stage; the send pipeline ends by transmitting, the receive pipeline
by delivering. Factories (:class:`MessageFilterCreator`) are called once per
communicator, so filters never share state across communicators. The selectors hold
the factories a communicator uses when built without explicit ones: process-wide, as
the slides' static selectors, and set before the communicator is created.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from groupcomm.core.messages import GroupMessage, ReceivedMessage, SentMessage

M = TypeVar("M", bound=GroupMessage)
M_contra = TypeVar("M_contra", bound=GroupMessage, contravariant=True)


@runtime_checkable
class MessageProcessor(Protocol[M_contra]):
    """The next stage of a pipeline."""

    def process_message(self, message: M_contra) -> None:
        """Take ``message`` and carry it further (transmit, deliver, or filter again)."""


class SessionMessageListener(Protocol):
    """Told about joins and leaves, in the same order at every member (003)."""

    def client_joined(
        self, client_name: str, application_name: str, session_name: str,
        is_new_session: bool, is_new_application: bool, all_users: Sequence[str],
    ) -> None:
        """``client_name`` joined; ``all_users`` is the membership after the join, in join order."""

    def client_left(self, client_name: str, application_name: str) -> None:
        """``client_name`` left (or was declared gone by the heartbeat)."""


class FilterHost(Protocol):
    """What a filter may ask of the communicator (or simulator, or checker) hosting it.

    Nothing here does I/O on the filter's behalf that the filter could observe: tracing
    is fire-and-forget and membership arrives through session listeners.
    """

    @property
    def name(self) -> str:
        """The local client name."""

    @property
    def shared(self) -> dict[str, Any]:
        """Per-communicator store where one module's filters find their shared manager."""

    def add_session_listener(self, listener: SessionMessageListener) -> None:
        """Register a listener for joins and leaves."""

    def trace(self, event: str, message: GroupMessage | None = None, **fields: Any) -> None:
        """Record a protocol-level trace event (``buffer``, ``unbuffer``, ...)."""

    def now(self) -> float:
        """The host's clock in seconds (wall clock, or virtual time in the simulator)."""

    def add_ticker(self, ticker: Callable[[float], None]) -> None:
        """Have ``ticker(now)`` called periodically (retransmission timers and the like)."""

    def report_undeliverable(self, message_ids: Sequence[str], why: str) -> None:
        """Application messages accepted for sending that will not reach (or are not
        known to have reached) a destination: the application is told."""

    def report_acknowledged(self, peer: str, message_ids: Sequence[str]) -> None:
        """``peer``'s process acknowledged receiving these application messages (the
        reliable layer): what its sender holds of them may go (docs/web.md, "Nothing
        typed is lost")."""

    def add_batch_listener(self, listener: Callable[[], None]) -> None:
        """Have ``listener()`` called at the end of each batch of input: after the host
        has run every frame it took in one turn (one read of its sockets, or one arrival
        in an in-process host) through the receive pipeline, and the application's sends
        of that turn through the send pipeline. The reliable layer acknowledges there,
        once per peer heard from in the batch."""


class MessageFilter(ABC, Generic[M]):
    """A pipeline stage that may forward, stamp, buffer, reorder or hold messages."""

    def __init__(self) -> None:
        self._processor: MessageProcessor[M] | None = None

    def set_message_processor(self, processor: MessageProcessor[M]) -> None:
        """Set the next stage (called by the communicator when it builds the pipeline)."""
        self._processor = processor

    def forward(self, message: M) -> None:
        """Hand ``message`` to the next stage."""
        processor = self._processor  # not the property: this runs for every message
        if processor is None:
            raise RuntimeError(f"{type(self).__name__} has no message processor yet")
        processor.process_message(message)

    @abstractmethod
    def filter_message(self, message: M) -> None:
        """Called by the pipeline with each message that reaches this stage."""


class MessageForwarder(MessageFilter[M]):
    """The default filter: passes every message on unchanged."""

    def filter_message(self, message: M) -> None:
        self.forward(message)


class MessageFilterCreator(ABC, Generic[M]):
    """A factory of filters (003). Called once per communicator."""

    #: One line shown by ``groupcomm filters``.
    description: str = ""

    @abstractmethod
    def get_message_filter(self, host: FilterHost) -> MessageFilter[M]:
        """Return the filter for the communicator ``host`` (fresh, or shared via host)."""


class MessageForwarderCreator(MessageFilterCreator[M]):
    """Makes :class:`MessageForwarder` instances (the default factory)."""

    description = "passes every message on unchanged"

    def get_message_filter(self, host: FilterHost) -> MessageFilter[M]:
        return MessageForwarder()


class _Selector(Generic[M]):
    """A process-wide holder of the factory used when a communicator builds a pipeline."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._creator: MessageFilterCreator[M] = MessageForwarderCreator()

    def get_message_filter_creator(self) -> MessageFilterCreator[M]:
        """The factory used by communicators created from now on."""
        with self._lock:
            return self._creator

    def set_message_filter_creator(self, creator: MessageFilterCreator[M]) -> None:
        """Use ``creator`` for communicators created from now on."""
        if not isinstance(creator, MessageFilterCreator):
            raise TypeError(
                f"{self._what} selector needs a MessageFilterCreator, got {type(creator).__name__}"
            )
        with self._lock:
            self._creator = creator

    def reset(self) -> None:
        """Back to the default forwarder."""
        self.set_message_filter_creator(MessageForwarderCreator())


#: Holds the send-filter factory (003: ``SendMessageFilterSelector``).
SendMessageFilterSelector: _Selector[SentMessage] = _Selector("send")
#: Holds the receive-filter factory (003: ``ReceivedMessageFilterSelector``).
ReceivedMessageFilterSelector: _Selector[ReceivedMessage] = _Selector("receive")


class CallableProcessor(Generic[M]):
    """Adapts a function to :class:`MessageProcessor` (the ends of a pipeline, and each
    filter's ``filter_message`` as the processor of the stage before it).

    ``process_message`` *is* the function (an instance attribute, not a method that
    calls it): every message passes here, and one Python call less per message is
    measurable.
    """

    __slots__ = ("process_message",)

    def __init__(self, function: Callable[[M], None]) -> None:
        self.process_message: Callable[[M], None] = function


class Pipeline(Generic[M]):
    """Filters chained in order, ending in a sink processor; a
    :class:`MessageProcessor` itself (see ``process_message``)."""

    def __init__(self, filters: Sequence[MessageFilter[M]], sink: MessageProcessor[M]) -> None:
        self.filters: tuple[MessageFilter[M], ...] = tuple(filters)
        downstream: MessageProcessor[M] = sink
        for stage in reversed(self.filters):
            stage.set_message_processor(downstream)
            downstream = CallableProcessor(stage.filter_message)
        #: ``process_message(message)`` feeds the first filter (or the sink when there is
        #: none); bound once here rather than forwarded by a method on every message
        self.process_message: Callable[[M], None] = downstream.process_message

