"""One process's protocol stack, independent of any transport: :class:`ProtocolNode`.

Work is queued and drained in a loop, never run re-entrantly: a send made inside a
delivery callback runs through the send pipeline before the next callback (source 001),
and a message to oneself enters the receive pipeline after the current step, so no
filter is ever re-entered.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from groupcomm.core.causality import CausalityModule, one_module
from groupcomm.core.filtering import (
    CallableProcessor,
    FilterHost,
    MessageFilter,
    MessageFilterCreator,
    Pipeline,
    ReceivedMessageFilterSelector,
    SendMessageFilterSelector,
    SessionMessageListener,
)
from groupcomm.core.headers import meta_bytes
from groupcomm.core.member_ids import split_member
from groupcomm.core.messages import (
    GROUP_HEADER,
    ControlMessage,
    GroupMessage,
    ReceivedMessage,
    SentMessage,
    SystemMessage,
    sent_unchecked,
)
from groupcomm.core.session_messages import SESSION_TRAFFIC, ClockAck
from groupcomm.core.tracing import SAID_BY_EVENT, NullTracer, Tracer

log = logging.getLogger(__name__)

#: how a clock acknowledgement's protocol events are recorded
_ACK_EVENTS = {"network_send": "control_send", "receive": "control_receive"}


class UnknownPeerError(LookupError):
    """A send named a client that is not a member of the session."""


Transmit = Callable[[SentMessage, tuple[str, ...]], None]
Deliver = Callable[[ReceivedMessage], None]


class ProtocolNode(FilterHost):
    """The send and receive pipelines, the causality manager, the application-boundary
    vector clock and the work queues of one client. Each host (communicator, in-process
    network, simulator, checker) wraps one per process and supplies ``transmit`` (what
    leaves the send pipeline) and ``clock`` (trace timestamps).

    ``send_creators`` / ``receive_creators``: the filter factories in pipeline order
    (``None``: the selectors' current one). ``deliver`` is called on the owner thread
    with each message ready for the application; without it the node advances the clock
    and calls :attr:`message_listeners`. A host that delivers otherwise advances the
    clock itself with :meth:`application_delivered`.
    """

    def __init__(self, name: str, *, application: str = "app", session: str = "session",
                 transmit: Transmit, clock: Callable[[], float],
                 send_creators: Sequence[MessageFilterCreator[SentMessage]] | None = None,
                 receive_creators: Sequence[MessageFilterCreator[ReceivedMessage]] | None = None,
                 tracer: Tracer | None = None, deliver: Deliver | None = None,
                 send_queue: deque[SentMessage] | None = None,
                 clock_lock: AbstractContextManager[Any] | None = None) -> None:
        self._name = name
        #: a host's input queue of tagged sends: each is appended under the clock lock,
        #: so the queue holds the sends in the order of their tags
        self._send_queue = send_queue
        self.application = application
        self.session = session
        self._transmit = transmit
        self.clock = clock
        self.tracer: Tracer = tracer or NullTracer()
        self._shared: dict[str, Any] = {}
        self.tickers: list[Callable[[float], None]] = []
        self.batch_listeners: list[Callable[[], None]] = []
        self._session_listeners: list[SessionMessageListener] = []
        self.members: list[str] = []
        self.member_set: frozenset[str] = frozenset()

        if send_creators is None:
            send_creators = [SendMessageFilterSelector.get_message_filter_creator()]
        if receive_creators is None:
            receive_creators = [ReceivedMessageFilterSelector.get_message_filter_creator()]
        self.module: CausalityModule | None = one_module(send_creators, receive_creators)
        self.protocol = self.module.name if self.module else "none"

        send_filters: list[MessageFilter[SentMessage]] = [
            c.get_message_filter(self) for c in send_creators]
        receive_filters: list[MessageFilter[ReceivedMessage]] = [
            c.get_message_filter(self) for c in receive_creators]
        self.send_pipeline = Pipeline(send_filters, CallableProcessor(self._leave_send_pipeline))
        self.receive_pipeline = Pipeline(receive_filters,
                                         CallableProcessor(self._leave_receive_pipeline))
        #: guards the application clock, which application threads advance and tag with
        #: (one lock for all the nodes of one member's incarnations)
        self.clock_lock: AbstractContextManager[Any] = (
            clock_lock if clock_lock is not None else threading.Lock())
        self._app_clock: dict[str, int] = {}
        self._next_id = 0

        self._sends: deque[SentMessage] = deque()
        self._deliveries: deque[ReceivedMessage] = deque()
        self._inputs: deque[ReceivedMessage] = deque()
        self._draining = False
        self._deliver: Deliver = deliver or (
            lambda message: self.application_delivered(message, self.message_listeners))
        self.message_listeners: list[Callable[[ReceivedMessage], Any]] = []
        self.unconsumed_control = 0
        #: ids of messages reported undeliverable, newest last
        self.undeliverable: deque[str] = deque(maxlen=10_000)
        #: ids of the session layer's own messages seen here (see trace)
        self._session_messages: set[str] = set()
        #: the host's handler of system messages no filter consumed (state transfer);
        #: True when the message was its own
        self.system_listener: Callable[[ReceivedMessage], bool] | None = None
        #: each application message as it leaves the send pipeline
        self.sent_listener: Callable[[SentMessage], None] | None = None
        #: the ids and the reason of messages reported undeliverable
        self.undeliverable_listener: Callable[[tuple[str, ...], str], None] | None = None
        #: a peer and the ids of own application messages its process acknowledged
        self.acknowledged_listener: Callable[[str, tuple[str, ...]], None] | None = None
        #: each received application message the module holds, and whom it waits on
        self.held_listener: Callable[[ReceivedMessage, tuple[str, ...]], None] | None = None

    # -- FilterHost ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def shared(self) -> dict[str, Any]:
        return self._shared

    def add_session_listener(self, listener: SessionMessageListener) -> None:
        self._session_listeners.append(listener)

    def now(self) -> float:
        return self.clock()

    def add_ticker(self, ticker: Callable[[float], None]) -> None:
        self.tickers.append(ticker)

    def add_batch_listener(self, listener: Callable[[], None]) -> None:
        self.batch_listeners.append(listener)

    def end_batch(self) -> None:
        """A batch of input is done (see :meth:`FilterHost.add_batch_listener`): tell the
        filters that wait for it, then run what they queued."""
        for listener in self.batch_listeners:
            listener()
        self.drain()

    def report_undeliverable(self, message_ids: Sequence[str], why: str) -> None:
        if not message_ids:
            return
        self.undeliverable.extend(message_ids)
        log.warning("%s: %d message(s) accepted for sending %s: %s", self._name,
                    len(message_ids), why, ", ".join(message_ids[:10]),
                    extra={SAID_BY_EVENT: self.undeliverable_listener is not None})
        if self.undeliverable_listener is not None:
            self.undeliverable_listener(tuple(message_ids), why)

    def report_acknowledged(self, peer: str, message_ids: Sequence[str]) -> None:
        if message_ids and self.acknowledged_listener is not None:
            self.acknowledged_listener(peer, tuple(message_ids))

    def tick(self) -> None:
        """Run the periodic callbacks of filters that keep timers, then the queued work."""
        if not self.tickers:
            return
        now = self.clock()
        for ticker in list(self.tickers):
            ticker(now)
        self.drain()

    def trace(self, event: str, message: Any = None, **fields: Any) -> None:
        if (event == "buffer" and self.held_listener is not None and message is not None
                and fields.get("side") != "send" and message.is_user_message()):
            # the modules say so by tracing it: a chat shows the line as waiting from now
            self.held_listener(message, tuple(fields.get("waiting_for", ())))
        if not self.tracer.enabled:
            return
        if message is not None:
            # the session layer's own messages, and a module's control messages about
            # them (an ACK of a join marker), are neither the application's nor the
            # protocol's: the analysis would count them as either
            user = message.user_message
            if type(user) in SESSION_TRAFFIC:
                if len(self._session_messages) >= 10_000:
                    self._session_messages.clear()
                self._session_messages.add(message.message_id)
                # a clock acknowledgement is traffic of its own: recorded as it leaves
                # and arrives (docs/trace_schema.md), never as a send or a delivery
                if type(user) is not ClockAck or event not in _ACK_EVENTS:
                    return
                event = _ACK_EVENTS[event]
                fields["kind"] = "clock_ack"
            if type(user) is ControlMessage and user.about in self._session_messages:
                return
        record: dict[str, Any] = {"ts": self.clock(), "process": self._name, "event": event,
                                  "protocol": self.protocol}
        if message is not None:
            record["msg"] = message.message_id
            record.setdefault("sender", message.sender)
            if event == "buffer" and message.vc:
                # what the held message's sender had seen: the live view tells from it
                # which messages it waits for, also without the sender's trace
                record["send_vc"] = dict(message.vc)
        record.update(fields)
        self.tracer.emit(record)

    # -- membership -----------------------------------------------------------------------
    def client_joined(self, client_name: str, is_new_session: bool = False,
                      is_new_application: bool = False, all_users: Sequence[str] = ()) -> None:
        """Tell every session listener that ``client_name`` joined (owner thread)."""
        users = list(all_users) or [*self.members, client_name]
        # merge rather than replace: after a server restart members rejoin one by one,
        # and someone who has not rejoined yet is still a member of this session
        self.members = [*self.members, *(u for u in users if u not in self.members)]
        self.member_set = frozenset(self.members)
        self.trace("join", client=client_name, members=list(users),
                   incarnation=split_member(client_name)[1])
        for listener in list(self._session_listeners):
            listener.client_joined(client_name, self.application, self.session,
                                   is_new_session, is_new_application, tuple(users))
        self.drain()

    def client_left(self, client_name: str) -> None:
        """Tell every session listener that ``client_name`` left (owner thread)."""
        if client_name in self.members:
            self.members = [m for m in self.members if m != client_name]
            self.member_set = frozenset(self.members)
        self.trace("leave", client=client_name, incarnation=split_member(client_name)[1])
        for listener in list(self._session_listeners):
            listener.client_left(client_name, self.application)
        self.drain()

    # -- application side ---------------------------------------------------------------
    def tag_sends(self, payload: Any, destinations: Iterable[str], *,
                  module_check: bool = True) -> list[SentMessage]:
        """Make and tag application messages at the moment the application sends; returns
        every message the send became: one, or with ``unicast_events`` (``mfss``,
        ``cykas``) one unicast per destination in the order given. Thread-safe.

        Raises :class:`UnknownPeerError` for a destination that is not a member,
        ``ValueError`` for none, and the module's
        :class:`~groupcomm.core.causality.CausalityError` for a send it cannot carry
        (unless ``module_check=False``: the checker shows what a refused send would do).
        """
        if type(destinations) is list and len(destinations) == 1:
            dests = (destinations[0],)  # the common unicast: nothing to deduplicate
        else:
            dests = tuple(dict.fromkeys(destinations))
        if not dests:
            raise ValueError("a message needs at least one destination")
        members = self.member_set
        name = self._name
        for dest in dests:
            if dest not in members and dest != name:
                unknown = [d for d in dests if d not in members and d != name]
                raise UnknownPeerError(
                    f"unknown user(s) {', '.join(map(repr, unknown))} in session "
                    f"{self.session!r}; members are {', '.join(self.members) or '(none)'}"
                )
        module = self.module
        if module is not None:
            if module_check:
                module.check_destinations(name, dests, self.members)
            if module.unicast_events and len(dests) > 1:
                with self.clock_lock:  # one run of events: no delivery in between
                    copies = [self._tag_locked(payload, (dest,)) for dest in dests]
                    first = copies[0]
                    group = (int(first.message_id.rpartition("#")[2]), dict(first.vc)[name])
                    copies = [m.with_headers(**{GROUP_HEADER: group}) for m in copies]
                    if self._send_queue is not None:
                        self._send_queue.extend(copies)
                return copies
        return [self._tag_one(payload, dests)]

    def tag_unicast(self, payload: Any, destination: str) -> SentMessage:
        """:meth:`tag_sends` to one destination (the common case, without the list)."""
        if destination not in self.member_set and destination != self._name:
            return self.tag_sends(payload, [destination])[0]  # raises UnknownPeerError
        dests = (destination,)
        module = self.module
        if module is not None:
            module.check_destinations(self._name, dests, self.members)
        return self._tag_one(payload, dests)

    def _tag_one(self, payload: Any, dests: tuple[str, ...]) -> SentMessage:
        # _tag_locked under the lock, spelled out: this runs for every send
        name = self._name
        with self.clock_lock:
            self._next_id = next_id = self._next_id + 1
            clock = self._app_clock
            clock[name] = clock.get(name, 0) + 1
            vc = tuple(clock.items())
            message = sent_unchecked(self.application, self.session, payload,
                                     f"{name}#{next_id}", name, vc, dests)
            if self.tracer.enabled:
                self.trace("send", message, dests=list(dests), vc=dict(vc))
            send_queue = self._send_queue
            if send_queue is not None:
                send_queue.append(message)
        return message

    def _tag_locked(self, payload: Any, dests: tuple[str, ...]) -> SentMessage:
        """One send event; the caller holds the clock lock."""
        name = self._name
        self._next_id = next_id = self._next_id + 1
        clock = self._app_clock
        clock[name] = clock.get(name, 0) + 1
        vc = tuple(clock.items())
        # every value is known good: our own name, a fresh id, checked member names
        message = sent_unchecked(self.application, self.session, payload,
                                 f"{name}#{next_id}", name, vc, dests)
        if self.tracer.enabled:
            self.trace("send", message, dests=list(dests), vc=dict(vc))
        return message

    def submit(self, message: SentMessage) -> None:
        """Run a tagged message through the send pipeline (owner thread)."""
        self._sends.append(message)
        self.drain()

    def submit_many(self, messages: Iterable[SentMessage]) -> None:
        """Run several tagged messages through the send pipeline, in order (owner thread)."""
        self._sends.extend(messages)
        self.drain()

    def queue_sends(self, messages: Iterable[SentMessage]) -> None:
        """Queue tagged messages for the send pipeline, without processing them yet (see
        :meth:`drain`; a host that handles the pipeline's errors drains itself)."""
        self._sends.extend(messages)

    def application_delivered(self, message: ReceivedMessage,
                              listeners: Sequence[Deliver] = ()) -> None:
        """Advance the application clock (the application now sees ``message``), then call
        each of ``listeners`` with it: the one place the clock advances. Thread-safe. A
        listener that raises is logged and the next one still runs."""
        with self.clock_lock:
            self.delivered_locked(message)
        if listeners:
            # iterate over a copy (a listener may add or remove listeners), but do not
            # copy the usual single listener
            for listener in ((listeners[0],) if len(listeners) == 1 else tuple(listeners)):
                try:
                    listener(message)
                except Exception:
                    log.exception("%s: message listener raised on %s", self._name,
                                  message.message_id)

    def delivered_locked(self, message: ReceivedMessage) -> None:
        """:meth:`application_delivered`'s clock step, for a caller that holds
        :attr:`clock_lock` (and does more under it)."""
        clock = self._app_clock
        for process, count in message.vc:
            if clock.get(process, 0) < count:
                clock[process] = count
        name = self._name
        clock[name] = clock.get(name, 0) + 1
        if self.tracer.enabled:
            self.trace("deliver", message, vc=dict(clock))

    def merge_application_clock(self, clock: Iterable[tuple[str, int]]) -> None:
        """Take in what another member's application had seen (a state transfer's
        snapshot): entries raise this clock's, never lower it; malformed ones are ignored."""
        with self.clock_lock:
            own = self._app_clock
            for entry in clock:
                if (isinstance(entry, tuple) and len(entry) == 2 and type(entry[0]) is str
                        and type(entry[1]) is int and own.get(entry[0], 0) < entry[1]):
                    own[entry[0]] = entry[1]

    @property
    def application_clock(self) -> dict[str, int]:
        """A copy of the application-boundary vector clock."""
        with self.clock_lock:
            return dict(self._app_clock)

    def application_clock_locked(self) -> dict[str, int]:
        """:attr:`application_clock`, for a caller that holds :attr:`clock_lock`."""
        return dict(self._app_clock)

    # -- network side -------------------------------------------------------------------
    def receive(self, message: ReceivedMessage) -> None:
        """A message arrived from the network (owner thread): a batch of its own."""
        self.arrived(message)
        self.drain()
        if self.batch_listeners:
            self.end_batch()

    def arrived(self, message: ReceivedMessage) -> None:
        """Queue a message that arrived, without processing it yet (see :meth:`drain`)."""
        if self.tracer.enabled:
            user = message.user_message
            if isinstance(user, SystemMessage):
                self.trace("control_receive", message, kind=getattr(user, "kind", "system"),
                           about=getattr(user, "about", ""))
            else:
                self.trace("receive", message, kind=message.kind)
        self._inputs.append(message)

    def arrived_many(self, messages: list[ReceivedMessage]) -> None:
        """:meth:`arrived` for each of ``messages``, in order (a decoded batch)."""
        if self.tracer.enabled:
            for message in messages:
                self.arrived(message)
        else:
            self._inputs.extend(messages)

    def drain(self) -> None:
        """Process queued work until none is left: sends, then deliveries, then inputs."""
        if self._draining:
            return
        self._draining = True
        try:
            sends, deliveries, inputs = self._sends, self._deliveries, self._inputs
            while True:
                if sends:
                    self.send_pipeline.process_message(sends.popleft())
                elif deliveries:
                    self._deliver(deliveries.popleft())
                elif inputs:
                    self.receive_pipeline.process_message(inputs.popleft())
                else:
                    return
        finally:
            self._draining = False

    def snapshot(self) -> tuple:
        """Hashable state of the node between steps: application clock, id counter,
        membership and every manager's snapshot. ``RuntimeError`` while work is queued."""
        if not self.idle:
            raise RuntimeError(f"{self._name}: snapshot taken with work still queued")
        managers = tuple((key, value.snapshot()) for key, value in sorted(self._shared.items())
                         if hasattr(value, "snapshot"))
        with self.clock_lock:
            clock = tuple(sorted(self._app_clock.items()))
            next_id = self._next_id
        return (clock, next_id, tuple(self.members), managers)

    def restore(self, snapshot: tuple) -> None:
        """Set the node back to a :meth:`snapshot`."""
        clock, next_id, members, managers = snapshot
        with self.clock_lock:
            self._app_clock = dict(clock)
            self._next_id = next_id
        self.members = list(members)
        self.member_set = frozenset(self.members)
        for key, value in managers:
            shared = self._shared[key]
            shared.restore(value)
            if hasattr(shared, "members"):
                # a manager tracks the same members, in the same join order, as the node
                shared.members = list(members)

    # -- what the causality module holds ----------------------------------------------------
    @property
    def manager(self) -> Any:
        """The causality module's manager at this node (``None`` without a module)."""
        if self.module is None:
            return None
        return self._shared.get(f"causality:{self.module.name}")

    def held(self) -> list[GroupMessage]:
        """Messages the causality module holds (buffered for delivery, or unsent)."""
        manager = self.manager
        return manager.held() if manager is not None else []

    def holds_sends(self) -> bool:
        """True while the causality module holds back a message this member sent."""
        manager = self.manager
        return manager.holds_sends() if manager is not None else False

    def waiting_for(self) -> dict[str, list[str]]:
        """Held message id -> the members it waits on."""
        manager = self.manager
        return manager.waiting_for() if manager is not None else {}

    def release_waiting_on(self, name: str) -> list[str]:
        """Give up waiting for ``name`` (owner thread); delivers what that frees, and
        traces a ``release`` naming the messages it lets go without their causes."""
        manager = self.manager
        released = manager.release_waiting_on(name) if manager is not None else []
        if self.tracer.enabled:
            self.trace("release", client=name, msgs=list(released))
        self.drain()
        return released

    @property
    def idle(self) -> bool:
        """True when no local work is queued."""
        return not (self._sends or self._deliveries or self._inputs)

    def discard_queued(self) -> None:
        """Drop every queued send, delivery and input (a host that abandons a step that
        failed, then :meth:`restore` s a snapshot)."""
        self._sends.clear()
        self._deliveries.clear()
        self._inputs.clear()

    # -- pipeline ends --------------------------------------------------------------------
    def _leave_send_pipeline(self, message: SentMessage) -> None:
        dests = message.destinations
        remote = dests if self._name not in dests else tuple(d for d in dests if d != self._name)
        if self.tracer.enabled:
            size = meta_bytes(message)
            control = message.user_message
            for dest in message.destinations:
                if isinstance(control, SystemMessage):
                    self.trace("control_send", message, kind=getattr(control, "kind", "system"),
                               meta_bytes=size, to=dest, about=getattr(control, "about", ""))
                else:
                    self.trace("network_send", message, kind=message.kind, meta_bytes=size,
                               to=dest)
        if remote:
            self._transmit(message, remote)
        if (self.sent_listener is not None and message.is_user_message()
                and type(message.user_message) not in SESSION_TRAFFIC):
            self.sent_listener(message)  # the application's own messages only
        if remote is not dests:
            # to self: loops back after the current step (never re-enters a filter)
            self._inputs.append(message.received_by(self._name))

    def _leave_receive_pipeline(self, message: ReceivedMessage) -> None:
        if not isinstance(message.user_message, SystemMessage):  # is_user_message(), inlined
            self._deliveries.append(message)
            return
        if self.system_listener is not None and self.system_listener(message):
            return  # the host's own (state transfer)
        self.unconsumed_control += 1
        log.warning("%s: control message %r from %s reached the application end: no filter "
                    "owns it (does the peer run another causality module?)",
                    self._name, message.user_message, message.sender)
        self.trace("reject", message, reason="unconsumed_control")
