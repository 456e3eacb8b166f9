"""``scalar-id`` (KNOWN BAD): the "global scalar id" scheme of seed 003
(docs/protocols.md, "Known-bad modules"): one global id, stamped in header ``g``. The
slides leave open what happens to a message whose id is not higher than the current one
(concurrent); this module delivers it at once, which keeps it live and delivers effects
before their causes. Broadcast only.
"""

from __future__ import annotations

from collections.abc import Hashable

from groupcomm.module_kit import (
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ReceivedMessage,
    SentMessage,
    int_header,
)

NAME = "scalar-id"
STAMP = "g"


class ScalarIdManager(CausalityManager):
    """The global id and the buffer of early messages."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.global_id = 0
        self.buffer: list[tuple[int, ReceivedMessage]] = []

    def on_send(self, message: SentMessage) -> None:
        self.global_id += 1
        self.send_downstream(message.with_header(STAMP, self.global_id))  # type: ignore[arg-type]

    def on_receive(self, message: ReceivedMessage) -> None:
        if message.sender == self.host.name:
            self.deliver_upstream(message.without_headers(STAMP))  # type: ignore[arg-type]
            return
        stamp = int_header(message, STAMP, NAME, minimum=1)
        if stamp > self.global_id + 1:
            self.buffer.append((stamp, message))
            self.buffer.sort(key=lambda e: e[0])
            self.host.trace("buffer", message)
            return
        if stamp <= self.global_id:
            self.count("concurrent_delivered")  # the scheme's blind spot
        self._deliver(stamp, message)
        while self.buffer and self.buffer[0][0] <= self.global_id + 1:
            stamp, held = self.buffer.pop(0)
            self.host.trace("unbuffer", held)
            self._deliver(stamp, held)

    def _deliver(self, stamp: int, message: ReceivedMessage) -> None:
        self.global_id = max(self.global_id, stamp)
        self.deliver_upstream(message.without_headers(STAMP))  # type: ignore[arg-type]

    def held(self) -> list[GroupMessage]:
        return [m for _, m in self.buffer]

    def snapshot(self) -> Hashable:
        return (self.global_id, tuple(self.buffer), self.control_count)

    def restore(self, snapshot: Hashable) -> None:
        self.global_id, buffer, self.control_count = snapshot  # type: ignore[misc]
        self.buffer = list(buffer)


class ScalarIdModule(CausalityModule):
    """KNOWN BAD: one global scalar id."""

    name = NAME
    manager_class = ScalarIdManager
    description = "KNOWN BAD: global scalar id; wrong with concurrent senders"
    broadcast_only = True
    known_bad = True
    symmetry_headers = {STAMP: "int"}
