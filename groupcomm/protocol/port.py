"""The application's side of one member: :class:`ApplicationPort`, the one object an
application thread touches. A send is tagged under the member's clock lock and queued in
the same step, so the queue holds sends (and the member's join markers) in the order of
their tags; applying a handed message advances the same clock under the same lock.
Everything else runs on the owner's thread.
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
    """The application's side of one member. ``lock`` guards the application clock
    (across incarnations); ``inputs`` is the member's input queue; ``post`` runs a
    function on the owner's thread; ``inbox_changed`` is called after a message was put
    in :attr:`inbox` (a host wakes a thread waiting in a pull)."""

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
        self.listeners: list[MessageListener] = []
        #: the pull model's messages, oldest first
        self.inbox: deque[ReceivedMessage] = deque()
        #: application-level ids of the latest messages applied (for snapshots)
        self.recent: deque[str] | None = (
            deque(maxlen=keep_recent) if keep_recent is not None else None)
        #: current member id of each client name (replaced, never changed in place)
        self.member_ids: dict[str, str] = {}
        #: acknowledged delivery: messages handed over and not acknowledged, oldest first
        self._unacknowledged: deque[ReceivedMessage] = deque()
        self.handed = 0
        self.acknowledged = 0
        #: called when the application has caught up with what it was handed
        self.on_caught_up: Callable[[], None] = lambda: None
        #: whether :attr:`on_caught_up` has anything to do (read on the application's
        #: thread): an acknowledgement posts no call to the owner's thread without it,
        #: for a gateway acknowledges each tab's every batch of deliveries
        self.caught_up_wanted: Callable[[], bool] = lambda: True

    # -- any thread ---------------------------------------------------------------------------
    @property
    def member_id(self) -> str:
        return self.node.name

    @property
    def members(self) -> list[str]:
        """The session's members in join order (replaced, never changed in place)."""
        return self.node.members

    def resolve(self, name: str) -> str:
        return self.member_ids.get(name, name)

    def send(self, payload: Any, destinations: Sequence[str]) -> list[SentMessage]:
        """Tag and queue ``payload``; raises what :meth:`ProtocolNode.tag_sends` raises."""
        return self.node.tag_sends(payload, destinations)

    def send_one(self, payload: Any, destination: str) -> SentMessage:
        return self.node.tag_unicast(payload, destination)

    @property
    def caught_up(self) -> bool:
        """The application applied everything it was handed."""
        return self.acknowledged == self.handed

    def applied(self, message: ReceivedMessage) -> None:
        """The application has ``message`` now: apply it, unless it is to be acknowledged."""
        with self.lock:
            if self.acknowledged_delivery:
                self._unacknowledged.append(message)
                self.handed += 1
            else:
                self._apply_locked((message,))

    def acknowledge(self, count: int, who: str) -> None:
        """The application applied the first ``count`` messages it was handed. Raises
        :class:`PortError` without acknowledged delivery, ``ValueError`` for a count that
        is not an int >= 0 or beyond what was handed."""
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
        if caught_up and self.caught_up_wanted():
            self.post(self.on_caught_up)

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
        self.applied(message)  # counted before any listener runs: it may acknowledge
        self._call(listeners, message)

    def add_listener(self, listener: MessageListener) -> None:
        """Deliver to ``listener``; the first one is handed what waited in the inbox."""
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
