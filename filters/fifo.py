"""``fifo``: per-pair sequence numbers with an ordered buffer (seed 003, "unicast
sequence numbers"; docs/protocols.md).

A copy per destination carries its pair's number in the one-int header ``f``. A sender
that leaves with a gap in what it sent leaves its later messages held until the
application calls :meth:`FifoManager.release_waiting_on`.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from groupcomm.module_kit import (
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ReceivedMessage,
    SentMessage,
    int_header,
    with_header_unchecked,
    without_header_unchecked,
)

log = logging.getLogger(__name__)

NAME = "fifo"
SEQ = "f"


class FifoManager(CausalityManager):
    """Send counters per destination, delivered counts and buffers per sender."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.sent: dict[str, int] = {}
        self.delivered: dict[str, int] = {}
        self.buffers: dict[str, dict[int, ReceivedMessage]] = {}

    def on_send(self, message: SentMessage) -> None:
        """Stamp each copy with the pair's next number."""
        destinations = message.destinations
        sent = self.sent
        if len(destinations) == 1:  # a unicast, the usual case: the message itself
            dest = destinations[0]
            seq = sent[dest] = sent.get(dest, 0) + 1
            self.send_downstream(with_header_unchecked(message, SEQ, seq))
            return
        for dest in destinations:
            seq = sent[dest] = sent.get(dest, 0) + 1
            self.send_downstream(with_header_unchecked(message.to((dest,)), SEQ, seq))

    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver in per-sender order, buffering what arrives early."""
        sender = message.sender
        seq = message.headers.get(SEQ)
        if type(seq) is not int or seq < 1:
            seq = int_header(message, SEQ, NAME, minimum=1)  # raises, saying what is wrong
        delivered = self.delivered
        last = delivered.get(sender, 0)
        if seq == last + 1 and sender not in self.buffers:
            # the usual case: the next number, nothing held to drain (_deliver, inlined)
            delivered[sender] = seq
            self.deliver_upstream(without_header_unchecked(message, SEQ))
            return
        buffer = self.buffers.setdefault(sender, {})
        if seq <= last or seq in buffer:
            self.count("duplicates")
            log.debug("%s: dropped duplicate #%d from %s", self.host.name, seq, sender)
            return
        if seq != last + 1:
            buffer[seq] = message
            self.host.trace("buffer", message, waiting_for=[sender], seq=seq)
            return
        self._deliver(message)
        self._drain(sender, traced=True)

    def _deliver(self, message: ReceivedMessage) -> None:
        self.delivered[message.sender] = self.delivered.get(message.sender, 0) + 1
        self.deliver_upstream(without_header_unchecked(message, SEQ))

    def _drain(self, sender: str, traced: bool) -> None:
        buffer = self.buffers.get(sender, {})
        while (nxt := self.delivered.get(sender, 0) + 1) in buffer:
            message = buffer.pop(nxt)
            if traced:
                self.host.trace("unbuffer", message)
            self._deliver(message)
        if not buffer:
            self.buffers.pop(sender, None)

    def held(self) -> list[GroupMessage]:
        return [m for s in sorted(self.buffers) for _, m in sorted(self.buffers[s].items())]

    def waiting_for(self) -> dict[str, list[str]]:
        return {m.message_id: [m.sender] for m in self.held()}

    def release_waiting_on(self, name: str) -> list[str]:
        buffer = self.buffers.get(name)
        if not buffer:
            return []
        released = []
        while buffer:
            seq = min(buffer)
            self.delivered[name] = seq - 1  # skip the gap the sender left
            message = buffer[seq]
            released.append(message.message_id)
            self.host.trace("unbuffer", message, forced=True)
            self._drain(name, traced=False)
        self.count("released", len(released))
        return released

    def snapshot(self) -> Hashable:
        return (
            tuple(sorted(self.sent.items())),
            tuple(sorted(self.delivered.items())),
            # messages hash and compare by what travels, so they can sit in a snapshot
            tuple((s, tuple(sorted(b.items()))) for s, b in sorted(self.buffers.items())),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        sent, delivered, buffers, self.control_count = snapshot  # type: ignore[misc]
        self.sent = dict(sent)
        self.delivered = dict(delivered)
        self.buffers = {s: dict(b) for s, b in buffers}


class FifoModule(CausalityModule):
    name = NAME
    manager_class = FifoManager
    description = "per-sender FIFO order: per-pair sequence numbers and an ordered buffer"
    delivery_order = "fifo"
    symmetry_headers = {SEQ: "int"}
