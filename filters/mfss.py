"""``mfss``: Mattern and Fünfrocken's sender-side causal order (004 §2.1; the rule and
departures: docs/protocols.md). A message to several members is sent as that many
unicasts (``unicast_events``); one to oneself goes through the local loop without an
ACK, still in buffer order.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable

from groupcomm.module_kit import (
    CausalityError,
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ProtocolViolation,
    ReceivedMessage,
    SentMessage,
    control_message,
    drop_unsent_to,
    gone_before_sending,
)

log = logging.getLogger(__name__)

NAME = "mfss"


class MfssManager(CausalityManager):
    """The output buffer and the message whose ACK is awaited."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.buffer: deque[SentMessage] = deque()
        #: (message id, destination) of the message awaiting its ACK, if any
        self.unacked: tuple[str, str] | None = None

    def on_send(self, message: SentMessage) -> None:
        """Send at once when nothing is un-acknowledged, else put it in the buffer."""
        if self.unacked is None and not self.buffer:
            self._send(message)
            return
        self.buffer.append(message)
        self.host.trace("buffer", message, side="send", waiting_for=[self.unacked[1]]
                        if self.unacked else [])

    def try_send(self) -> None:
        """Send from the head of the buffer while nothing is un-acknowledged."""
        while self.buffer and self.unacked is None:
            message = self.buffer.popleft()
            self.host.trace("unbuffer", message, side="send")
            self._send(message)

    def _send(self, message: SentMessage) -> None:
        me = self.host.name
        if len(message.destinations) != 1:
            raise CausalityError(f"{NAME}: {message.message_id} must have one destination "
                                 "(the node splits multicasts for this module)")
        if gone_before_sending(self, message):
            return
        (dest,) = message.destinations
        if dest != me:
            self.unacked = (message.message_id, dest)
        self.send_downstream(message)

    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver on receipt and acknowledge."""
        if message.sender != self.host.name:
            self.send_downstream(
                control_message(self, NAME, "ack", message.sender, about=message.message_id)
            )
        self.deliver_upstream(message)

    def on_control(self, message: ReceivedMessage) -> None:
        if message.user_message.kind == "ack":
            self.on_ack(message)
        else:
            super().on_control(message)

    def on_ack(self, message: ReceivedMessage) -> None:
        about = message.user_message.about
        if self.unacked != (about, message.sender):
            raise ProtocolViolation(
                f"{NAME}: unexpected ack from {message.sender} for {about!r} "
                f"(awaiting {self.unacked!r})"
            )
        self.unacked = None
        self.try_send()

    def member_removed(self, name: str) -> None:
        self.buffer = drop_unsent_to(self, self.buffer, name, log)
        if self.unacked is not None and self.unacked[1] == name:
            log.info("%s: %s left before acknowledging %s; sending on", self.host.name,
                     name, self.unacked[0])
            self.unacked = None
            self.try_send()

    def held(self) -> list[GroupMessage]:
        return list(self.buffer)

    def holds_sends(self) -> bool:
        return bool(self.buffer)

    def waiting_for(self) -> dict[str, list[str]]:
        waits = [self.unacked[1]] if self.unacked else []
        return {m.message_id: waits for m in self.buffer}

    def snapshot(self) -> Hashable:
        return (tuple(self.buffer), self.unacked, self.control_count)

    def restore(self, snapshot: Hashable) -> None:
        buffer, self.unacked, self.control_count = snapshot  # type: ignore[misc]
        self.buffer = deque(buffer)


class MfssModule(CausalityModule):
    name = NAME
    manager_class = MfssManager
    description = "sender-side causal order (Mattern-Fuenfrocken): send after the last ACK"
    unicast_events = True
    acknowledged_sends = True
    symmetry_headers = {}
    commuting_controls = frozenset({"ack"})
