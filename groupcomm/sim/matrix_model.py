"""A vectorised *performance model* of the matrix protocol, for large simulations.

The real module (:mod:`filters.matrix`) stamps every message with the encoded matrix:
hours per Figure-4 run at 500 processes. This model computes the same delivery
decisions, in the same order, and the same metadata byte counts, in O(n) numpy work per
delivery and one O(n²) pass per send; why it is exact is in docs/sim_results.md (the
model). It runs for ``matrix`` when the engine is ``model`` (or ``auto`` above
:data:`~groupcomm.sim.engine.MODEL_THRESHOLD` processes), says so in every result
(``engine: model``), and the tests check it against the real module on small systems.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from groupcomm.sim.stack import Frame, SimulationError, StackHost
from groupcomm.sim.workload import PlannedSend

PROTOCOL = "matrix"
_INF = np.iinfo(np.int32).max


def int_size(value: int) -> int:
    """msgpack bytes of a non-negative int."""
    return 1 if value < 128 else 2 if value < 256 else 3 if value < 65536 else (
        5 if value < 2**32 else 9)


def _int_sizes(values: np.ndarray) -> np.ndarray:
    return (1 + (values >= 128) + (values >= 256) + 2 * (values >= 65536)
            + 4 * (values >= 2**32)).astype(np.int64)


def array_header(length: int) -> int:
    """msgpack bytes of an array header."""
    return 1 if length < 16 else 3 if length < 65536 else 5


def str_size(text: str) -> int:
    """msgpack bytes of a str (``use_bin_type=True``)."""
    size = len(text.encode())
    return size + (1 if size < 32 else 2 if size < 256 else 3 if size < 65536 else 5)


@dataclass(slots=True, eq=False)
class _ModelMessage:
    mid: str
    sender: int
    #: K of the sender at the send (docs/sim_results.md, the model)
    stamp: np.ndarray
    #: the send's index among the sender's sends
    index: int
    payload: Any
    #: the ground-truth clock (traced runs only)
    vc: tuple[tuple[str, int], ...]


class MatrixModelStack:
    """Matrix protocol state of all processes as arrays."""

    def __init__(self, sim: StackHost) -> None:
        self.sim = sim
        config = sim.config
        self.names = sorted(sim.names)  # encode_matrix orders names by sort order
        self.idx = {name: i for i, name in enumerate(self.names)}
        n = len(self.names)
        max_sends = sim.workload.max_sends
        self.header = config.header_bytes
        self.payload = config.payload_bytes
        #: K[i]: how many sends of each process i knows of (its SENT matrix)
        self.known = np.zeros((n, n), dtype=np.int32)
        #: nxt[i][k]: send index of the next undelivered message from k to i
        self.nxt = np.full((n, n), _INF, dtype=np.int32)
        self.pending: dict[tuple[int, int], deque[int]] = {}
        self.first = np.full((n, n), _INF, dtype=np.int32)
        self.distinct = np.zeros((n, max_sends + 1), dtype=np.int64)
        self.value_bytes = np.zeros((n, max_sends + 1), dtype=np.int64)
        self._counts: list[dict[int, int]] = [{} for _ in range(n)]
        self._running_distinct = [0] * n
        self._running_values = [0] * n
        self.name_bytes = np.array([str_size(name) for name in self.names], dtype=np.int64)
        self.buffers: list[list[_ModelMessage]] = [[] for _ in range(n)]
        self.tracing = sim.tracer.enabled
        self.clocks: list[dict[str, int]] = [{} for _ in range(n)]
        self._range = np.arange(n)
        if self.tracing:
            everyone = list(sim.names)
            for name in sim.names:
                self._trace(name, "join", client=name, members=everyone)

    # -- tracing (the same records a ProtocolNode writes) ----------------------------------------
    def _trace(self, process: str, event: str, message: _ModelMessage | None = None,
               **fields: Any) -> None:
        record: dict[str, Any] = {"ts": self.sim.now, "process": process, "event": event,
                                  "protocol": PROTOCOL}
        if message is not None:
            record["msg"] = message.mid
            record["sender"] = self.names[message.sender]
        record.update(fields)
        self.sim.tracer.emit(record)

    # -- sending ----------------------------------------------------------------------------------
    def app_send(self, planned: PlannedSend) -> None:
        name = planned.sender
        i = self.idx[name]
        dests = [self.idx[d] for d in planned.dests]
        if i in dests:
            raise SimulationError("the matrix model does not model self-addressed sends; "
                                  "use engine='real'")
        count = int(self.known[i, i]) + 1
        self.known[i, i] = count
        counts = self._counts[i]
        for d in dests:
            old = counts.get(d, 0)
            if old == 0:
                self._running_distinct[i] += 1
                self.first[i, d] = count
                self._running_values[i] += 1
            else:
                self._running_values[i] += int_size(old + 1) - int_size(old)
            counts[d] = old + 1
            queue = self.pending.setdefault((i, d), deque())
            queue.append(count)
            if len(queue) == 1:
                self.nxt[d, i] = count
        self.distinct[i, count] = self._running_distinct[i]
        self.value_bytes[i, count] = self._running_values[i]
        stamp = self.known[i].copy()
        meta = self.meta_size(stamp)
        message = _ModelMessage(f"{name}#{count}", i, stamp, count,
                                (planned.key, planned.job_ms), ())
        if self.tracing:
            clock = self.clocks[i]
            clock[name] = clock.get(name, 0) + 1
            message.vc = tuple(clock.items())
            self._trace(name, "send", message, dests=list(planned.dests), vc=dict(clock))
            for dest in planned.dests:
                self._trace(name, "network_send", message, kind="normal", meta_bytes=meta,
                            to=dest)
        size = self.header + self.payload + meta
        for dest in planned.dests:
            self.sim.transmit(name, dest, message, size, meta, False)

    def meta_size(self, stamp: np.ndarray) -> int:
        """Bytes of the encoded ``M`` header for a stamp (== ``meta_bytes`` of the real one)."""
        per_column = np.count_nonzero(self.first <= stamp[:, None], axis=0)
        present = (stamp > 0) | (per_column > 0)
        rank = np.cumsum(present) - 1
        rank_bytes = _int_sizes(np.maximum(rank, 0))
        row_entries = self.distinct[self._range, stamp]
        entries = int(row_entries.sum())
        flat = int((row_entries * rank_bytes).sum() + (per_column * rank_bytes).sum()
                   + self.value_bytes[self._range, stamp].sum())
        names = int(np.count_nonzero(present))
        # {"M": (names, flat)}: fixmap(1) + "M"(2) + 2-array(1) + names + flat
        return (4 + array_header(names) + int(self.name_bytes[present].sum())
                + array_header(3 * entries) + flat)

    # -- receiving --------------------------------------------------------------------------------
    def arrive(self, frame: Frame) -> None:
        message: _ModelMessage = frame.item
        name = frame.dest
        i = self.idx[name]
        if self.tracing:
            self._trace(name, "receive", message, kind="normal")
        delivered: list[_ModelMessage] = []
        if self._deliverable(i, message):
            self._deliver(i, message, delivered)
            self._drain(i, name, delivered)
        else:
            self.buffers[i].append(message)
            if self.tracing:
                self._trace(name, "buffer", message, waiting_for=self._waits_on(i, message))
        for done in delivered:
            if self.tracing:
                clock = self.clocks[i]
                for process, count in done.vc:
                    if clock.get(process, 0) < count:
                        clock[process] = count
                clock[name] = clock.get(name, 0) + 1
                self._trace(name, "deliver", done, vc=dict(clock))
            self.sim.delivered(name, done.payload)

    def _deliverable(self, i: int, message: _ModelMessage) -> bool:
        nxt = self.nxt[i]
        if nxt[message.sender] != message.index:
            return False
        return int(np.count_nonzero(nxt <= message.stamp)) == 1

    def _waits_on(self, i: int, message: _ModelMessage) -> list[str]:
        nxt = self.nxt[i]
        late = np.nonzero(nxt <= message.stamp)[0]
        return [self.names[k] for k in late
                if not (k == message.sender and nxt[k] == message.index)]

    def _deliver(self, i: int, message: _ModelMessage, delivered: list[_ModelMessage]) -> None:
        j = message.sender
        queue = self.pending[(j, i)]
        head = queue.popleft()
        assert head == message.index, "matrix delivers FIFO per pair"
        self.nxt[i, j] = queue[0] if queue else _INF
        np.maximum(self.known[i], message.stamp, out=self.known[i])
        delivered.append(message)

    def _drain(self, i: int, name: str, delivered: list[_ModelMessage]) -> None:
        buffer = self.buffers[i]
        while (index := next((k for k, m in enumerate(buffer) if self._deliverable(i, m)),
                             None)) is not None:
            message = buffer.pop(index)
            if self.tracing:
                self._trace(name, "unbuffer", message)
            self._deliver(i, message, delivered)

    def held(self) -> int:
        return sum(len(b) for b in self.buffers)
