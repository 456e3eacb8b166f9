"""The application's side of one member: :class:`ApplicationPort`, the one object an
application thread touches.

A member (:class:`~groupcomm.protocol.client.ClientProtocol`) has one owner: the thread
that feeds it its frames and its time (the ZeroMQ poll loop, the simulator, the
checker). An application may send, receive and acknowledge from threads of its own; what
it does there reaches the member through this port, in one of two ways:

* **Tagged at the call.** A send must be tagged with exactly what the application had
  seen when it called (source 001: the application-boundary clock), and a caller wants
  its message back at once. So :meth:`send` tags under the member's clock lock and, in
  the same step, appends the message to the member's input queue: the queue holds the
  sends in the order of their tags, and a join marker the member tags on its own thread
  goes into the same queue behind every send tagged before it. Applying a message the
  application was handed (:meth:`applied`, :meth:`acknowledge`) advances the same clock
  under the same lock, so a send made after it is tagged after it.
* **Everything else** (adding a listener, leaving, asking what is held) is a call the
  host runs on the owner's thread.

Delivery comes up once: the member hands each deliverable message to
:meth:`hand_over`, on its own thread, and the port calls the listeners (callback model),
or keeps the message in :attr:`inbox` for the application to pull. The lock is the
only thing shared; it is given, so that this module takes none itself and one
implementation runs under threads and in the single-threaded hosts.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode

__all__ = ["ApplicationPort", "PortError"]

log = logging.getLogger(__name__)

MessageListener = Callable[[ReceivedMessage], Any]


class PortError(RuntimeError):
    """A call the port's mode does not take (for example :meth:`ApplicationPort.acknowledge`
    without acknowledged delivery)."""


class ApplicationPort:
    """The application's side of one member (see the module docstring).

    ``lock`` guards the application clock (it is every node's clock lock, across the
    member's incarnations); ``inputs`` is the member's input queue, which the owner
    takes in order; ``post`` runs a function on the owner's thread (now, when called
    there); ``inbox_changed`` is called (on the owner's thread) after a message was put
    in :attr:`inbox`, so that a host can wake a thread waiting in a pull.
    """

    def __init__(self, node: ProtocolNode, *, lock: AbstractContextManager[Any],
                 inputs: deque[Any], acknowledged: bool = False,
                 keep_recent: int | None = None,
                 post: Callable[[Callable[[], None]], None] = lambda function: function(),
                 inbox_changed: Callable[[], None] = lambda: None) -> None:
        self.node = node
        self.lock = lock
        self.inputs = inputs
        self.acknowledged_delivery = acknowledged
        self.post = post
        self.inbox_changed = inbox_changed
        #: the callback model's listeners (the owner's thread calls them)
        self.listeners: list[MessageListener] = []
        #: the pull model's messages, oldest first
        self.inbox: deque[ReceivedMessage] = deque()
        #: application-level ids of the latest messages applied: what a snapshot
        #: reflects (None when this member gives no snapshots)
        self.recent: deque[str] | None = (
            deque(maxlen=keep_recent) if keep_recent is not None else None)
        #: current member id of each client name, for sends that name a client (set by
        #: the member whenever the membership changes; replaced, never changed in place)
        self.member_ids: dict[str, str] = {}
        #: acknowledged delivery: messages handed over and not acknowledged, oldest first
        self._unacknowledged: deque[ReceivedMessage] = deque()
        self.handed = 0
        self.acknowledged = 0
        #: called when the application has caught up with what it was handed (the
        #: member answers the newcomers whose snapshot waited for that)
        self.on_caught_up: Callable[[], None] = lambda: None

    # -- any thread ---------------------------------------------------------------------------
    @property
    def member_id(self) -> str:
        """The member id of the member's current incarnation."""
        return self.node.name

    @property
    def members(self) -> list[str]:
        """The session's members in join order (a list the member replaces, never
        changes in place)."""
        return self.node.members

    def resolve(self, name: str) -> str:
        """The current member id for a client name (a member id is returned as is)."""
        return self.member_ids.get(name, name)

    def send(self, payload: Any, destinations: Sequence[str]) -> list[SentMessage]:
        """Tag ``payload`` for ``destinations`` and queue it for the member; returns every
        message the send became. Raises what :meth:`ProtocolNode.tag_sends` raises."""
        return self.node.tag_sends(payload, destinations)

    def send_one(self, payload: Any, destination: str) -> SentMessage:
        """:meth:`send` to one destination (the common send, without lists)."""
        return self.node.tag_unicast(payload, destination)

    @property
    def caught_up(self) -> bool:
        """True when the application has applied everything it was handed (always, without
        acknowledged delivery: a message is applied as it is handed over)."""
        return self.acknowledged == self.handed

    def applied(self, message: ReceivedMessage) -> None:
        """The application pulled ``message`` (pull model): apply it now, unless it is to
        be acknowledged."""
        if self.acknowledged_delivery:
            with self.lock:
                self._unacknowledged.append(message)
                self.handed += 1
        else:
            self._apply((message,))

    def acknowledge(self, count: int, who: str) -> None:
        """Acknowledged delivery: the application has applied the first ``count``
        messages it was handed (cumulative). Raises :class:`PortError` without
        acknowledged delivery, ``ValueError`` for a count that is not an int >= 0 or
        beyond what was handed."""
        if not self.acknowledged_delivery:
            raise PortError(f"{who}: acknowledge() needs acknowledged_delivery=True "
                            "(without it a message is applied as it is handed over)")
        if type(count) is not int or count < 0:
            raise ValueError(f"acknowledge() takes a count of messages (an int >= 0), "
                             f"not {count!r}")
        with self.lock:
            if count > self.handed:
                raise ValueError(
                    f"{who}: cannot acknowledge {count} message(s): only {self.handed} were "
                    f"handed to the application so far ({self.acknowledged} acknowledged)")
            # applied in order under the lock: a concurrent acknowledge() cannot apply a
            # later message before an earlier one
            taken = [self._unacknowledged.popleft()
                     for _ in range(max(0, count - self.acknowledged))]
            self.acknowledged = max(self.acknowledged, count)
            self._apply_locked(taken)
            caught_up = self.acknowledged == self.handed
        if caught_up:
            self.post(self.on_caught_up)

    def _apply(self, messages: Iterable[ReceivedMessage]) -> None:
        with self.lock:
            self._apply_locked(messages)

    def _apply_locked(self, messages: Iterable[ReceivedMessage]) -> None:
        delivered = self.node.delivered_locked
        recent = self.recent
        for message in messages:
            if recent is not None:
                recent.append(message.app_message_id)
            delivered(message)

    # -- the owner's thread -------------------------------------------------------------------
    def hand_over(self, message: ReceivedMessage) -> None:
        """``message`` is delivered: to the listeners, or to the inbox."""
        listeners = self.listeners
        if not listeners:
            self.inbox.append(message)
            self.inbox_changed()
            return
        if self.acknowledged_delivery:
            with self.lock:  # counted before any listener runs: it may acknowledge at once
                self._unacknowledged.append(message)
                self.handed += 1
        else:  # the callback model: the clock advances as the listeners are called
            self._apply((message,))
        self._call(listeners, message)

    def add_listener(self, listener: MessageListener) -> None:
        """Deliver by calling ``listener`` from now on; the first listener is handed,
        in order, whatever waited in the inbox."""
        listeners = self.listeners
        listeners.append(listener)
        if len(listeners) == 1:
            inbox = self.inbox
            while inbox:
                message = inbox.popleft()
                self.applied(message)
                self._call(listeners, message)

    def remove_listener(self, listener: MessageListener) -> None:
        self.listeners.remove(listener)

    def _call(self, listeners: list[MessageListener], message: ReceivedMessage) -> None:
        # a copy (a listener may add or remove listeners), except of the usual single one
        for listener in ((listeners[0],) if len(listeners) == 1 else tuple(listeners)):
            try:
                listener(message)
            except Exception:
                log.exception("%s: message listener raised on %s", self.node.name,
                              message.message_id)
