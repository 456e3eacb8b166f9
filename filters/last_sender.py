"""``last-sender`` (KNOWN BAD): the "last sender time stamp" scheme of seed 003
(docs/protocols.md, "Known-bad modules"). A message carries the sender and count of the
last message its sender delivered (header ``l``: ``(site, count)``, or ``()``), and is
delivered once that one has been here: its other causes may still be on the way.
Broadcast only.
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
)

NAME = "last-sender"
STAMP = "l"


class LastSenderManager(CausalityManager):
    """Delivered counts per site, the last delivery, and the buffer."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.counts: dict[str, int] = {}
        self.last: tuple = ()
        self.buffer: list[tuple[tuple, ReceivedMessage]] = []

    def on_send(self, message: SentMessage) -> None:
        self.send_downstream(message.with_header(STAMP, self.last))  # type: ignore[arg-type]

    def on_receive(self, message: ReceivedMessage) -> None:
        if message.sender == self.host.name:
            self.deliver_upstream(message.without_headers(STAMP))  # type: ignore[arg-type]
            return
        stamp = header(message, STAMP, NAME)
        if not (stamp == () or (
            isinstance(stamp, tuple) and len(stamp) == 2 and type(stamp[0]) is str
            and type(stamp[1]) is int and stamp[1] >= 1
        )):
            raise ProtocolViolation(
                f"{NAME}: header {STAMP!r} of {message.message_id} must be () or "
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
        self.deliver_upstream(message.without_headers(STAMP))  # type: ignore[arg-type]

    def _drain(self) -> None:
        progress = True
        while progress:
            progress = False
            for index, (stamp, message) in enumerate(self.buffer):
                if self._ready(stamp):
                    del self.buffer[index]
                    self.host.trace("unbuffer", message)
                    self._deliver(message)
                    progress = True
                    break

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
    """KNOWN BAD: only the most recent cause travels."""

    name = NAME
    manager_class = LastSenderManager
    description = "KNOWN BAD: last-sender stamp; misses all but one cause"
    broadcast_only = True
    known_bad = True
    symmetry_headers = {STAMP: "site"}
