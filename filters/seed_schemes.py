"""The two naive schemes of seed 003's slides, KNOWN BAD (docs/protocols.md, "Known-bad
modules"), kept for the trace analysis and the model checker to catch. Broadcast only.

* ``scalar-id``: one global id, stamped in header ``g``. The slides leave open what
  happens to a message whose id is not higher than the current one (concurrent); this
  module delivers it at once, which keeps it live and delivers effects before causes.
* ``last-sender``: a message carries the sender and count of the last message its
  sender delivered (header ``l``: ``(site, count)``, or ``()``), and is delivered once
  that one has been here: its other causes may still be on the way.
"""

from __future__ import annotations

from collections.abc import Hashable

from groupcomm.module_kit import (
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ProtocolViolation,
    ReceivedMessage,
    SentMessage,
    header,
    int_header,
)

SCALAR_ID = "scalar-id"
SCALAR_STAMP = "g"


class ScalarIdManager(CausalityManager):
    """The global id and the buffer of early messages."""

    protocol = SCALAR_ID

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.global_id = 0
        self.buffer: list[tuple[int, ReceivedMessage]] = []

    def on_send(self, message: SentMessage) -> None:
        self.global_id += 1
        stamped = message.with_header(SCALAR_STAMP, self.global_id)
        self.send_downstream(stamped)  # type: ignore[arg-type]

    def on_receive(self, message: ReceivedMessage) -> None:
        if message.sender == self.host.name:
            self.deliver_upstream(message.without_headers(SCALAR_STAMP))  # type: ignore[arg-type]
            return
        stamp = int_header(message, SCALAR_STAMP, SCALAR_ID, minimum=1)
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
        self.deliver_upstream(message.without_headers(SCALAR_STAMP))  # type: ignore[arg-type]

    def held(self) -> list[GroupMessage]:
        return [m for _, m in self.buffer]

    def snapshot(self) -> Hashable:
        return (self.global_id, tuple(self.buffer), self.control_count)

    def restore(self, snapshot: Hashable) -> None:
        self.global_id, buffer, self.control_count = snapshot  # type: ignore[misc]
        self.buffer = list(buffer)


class ScalarIdModule(CausalityModule):
    name = SCALAR_ID
    manager_class = ScalarIdManager
    description = "KNOWN BAD: global scalar id; wrong with concurrent senders"
    broadcast_only = True
    known_bad = True
    symmetry_headers = {SCALAR_STAMP: "int"}


LAST_SENDER = "last-sender"
LAST_STAMP = "l"


class LastSenderManager(CausalityManager):
    """Delivered counts per site, the last delivery, and the buffer."""

    protocol = LAST_SENDER

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.counts: dict[str, int] = {}
        self.last: tuple = ()
        self.buffer: list[tuple[tuple, ReceivedMessage]] = []

    def on_send(self, message: SentMessage) -> None:
        self.send_downstream(message.with_header(LAST_STAMP, self.last))  # type: ignore[arg-type]

    def on_receive(self, message: ReceivedMessage) -> None:
        if message.sender == self.host.name:
            self.deliver_upstream(message.without_headers(LAST_STAMP))  # type: ignore[arg-type]
            return
        stamp = header(message, LAST_STAMP, LAST_SENDER)
        if not (stamp == () or (
            isinstance(stamp, tuple) and len(stamp) == 2 and type(stamp[0]) is str
            and type(stamp[1]) is int and stamp[1] >= 1
        )):
            raise ProtocolViolation(
                f"{LAST_SENDER}: header {LAST_STAMP!r} of {message.message_id} must be () or "
                f"(site, count >= 1), got {stamp!r:.80}"
            )
        if self._ready(stamp):
            self._deliver(message)
            self._drain()
        else:
            self.buffer.append((stamp, message))
            self.host.trace("buffer", message, waiting_for=[stamp[0]])

    def _ready(self, stamp: tuple) -> bool:
        return not stamp or stamp[0] == self.host.name or self.counts.get(stamp[0], 0) >= stamp[1]

    def _deliver(self, message: ReceivedMessage) -> None:
        count = self.counts.get(message.sender, 0) + 1
        self.counts[message.sender] = count
        self.last = (message.sender, count)
        self.deliver_upstream(message.without_headers(LAST_STAMP))  # type: ignore[arg-type]

    def _drain(self) -> None:
        while (index := next((i for i, (stamp, _) in enumerate(self.buffer)
                              if self._ready(stamp)), None)) is not None:
            _, message = self.buffer.pop(index)
            self.host.trace("unbuffer", message)
            self._deliver(message)

    def held(self) -> list[GroupMessage]:
        return [m for _, m in self.buffer]

    def snapshot(self) -> Hashable:
        return (tuple(sorted(self.counts.items())), self.last, tuple(self.buffer),
                self.control_count)

    def restore(self, snapshot: Hashable) -> None:
        counts, self.last, buffer, self.control_count = snapshot  # type: ignore[misc]
        self.counts = dict(counts)
        self.buffer = list(buffer)


class LastSenderModule(CausalityModule):
    name = LAST_SENDER
    manager_class = LastSenderManager
    description = "KNOWN BAD: last-sender stamp; misses all but one cause"
    broadcast_only = True
    known_bad = True
    symmetry_headers = {LAST_STAMP: "site"}
