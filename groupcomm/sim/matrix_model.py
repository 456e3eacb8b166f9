"""A vectorised *performance model* of the matrix protocol, for large simulations.

**Why.** The real module (:mod:`filters.matrix`) keeps SENT as a dict of dicts and
stamps every message with the encoded matrix: at 500 processes sending 100 messages each a
stamp has up to 50,000 entries, and encoding, decoding and merging it in Python costs tens
of milliseconds per message — hours per Figure-4 run. This model computes *the same*
delivery decisions and *the same* metadata byte counts in O(n) numpy work per delivery
and one O(n²) vectorised pass per send. It is used only for ``matrix`` when the engine is
``model`` (or ``auto`` above :data:`~groupcomm.sim.engine.MODEL_THRESHOLD` processes), and
the tests check on small systems that it gives identical timings, byte counts and
delivery orders to the real module. It does not replace the product code: it is a
model of it, and says so in every result (``engine: model``).

**Why it is exact.** Only process r ever increases row r of any SENT matrix, one send
event at a time, so every row any process holds is a *version* of r's own row — its row
after some number x of r's sends — and versions grow componentwise with x. Merging two
matrices entrywise therefore keeps the later version of each row, and SENT_i is fully
described by the vector K_i[r] = how many of r's sends i knows of. A stamp is a copy of
K (n integers, not n² entries). With that:

* SENT_m[k][i] = number of k's first K_m[k] sends addressed to i. Causal delivery is FIFO
  per pair, so "DELIV_i[k] >= SENT_m[k][i]" says exactly that the next undelivered message
  from k to i has a send index greater than K_m[k]; the engine keeps that index in
  ``nxt[i][k]`` (a queue per pair of sent, undelivered indices). The rule for the sender
  j ("DELIV_i[j] == SENT_m[j][i] - 1") says m is that next message: ``nxt[i][j] == K_m[j]``.
* The merge ``SENT_i = max(SENT_i, SENT_m)`` is ``K_i = max(K_i, K_m)``.
* The encoded header (:func:`groupcomm.module_kit.encode_matrix`: names of the rows and columns
  with non-zero entries, then index triples) has a size that depends only on which
  entries are non-zero and their values, which per-sender tables give: D[r][x] distinct
  destinations and V[r][x] msgpack bytes of the counts after x sends, F[r][c] the index of
  r's first send to c. Its msgpack length is then summed in closed form.

The buffer is scanned in the same order as the real module's (restart from the front
after each delivery), so deliveries happen in the same order. Self-addressed sends are
not modelled (the random workloads never make them).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from groupcomm.sim.stack import Frame, SimulationError, StackHost
from groupcomm.sim.workload import PlannedSend

PROTOCOL = "matrix"
_INF = np.iinfo(np.int32).max


def int_size(value: int) -> int:
    """msgpack bytes of a non-negative int."""
    if value < 128:
        return 1
    if value < 256:
        return 2
    if value < 65536:
        return 3
    return 5 if value < 2**32 else 9


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


class _ModelMessage:
    __slots__ = ("mid", "sender", "stamp", "index", "payload", "vc", "meta")

    def __init__(self, mid: str, sender: int, stamp: np.ndarray, index: int, payload: Any,
                 vc: tuple[tuple[str, int], ...], meta: int) -> None:
        self.mid = mid
        self.sender = sender
        self.stamp = stamp
        self.index = index
        self.payload = payload
        self.vc = vc
        self.meta = meta


class MatrixModelStack:
    """Matrix protocol state of all processes as arrays (see the module docstring)."""

    def __init__(self, sim: StackHost) -> None:
        self.sim = sim
        config = sim.config
        self.names = sorted(sim.names)  # encode_matrix orders names by sort order
        self.idx = {name: i for i, name in enumerate(self.names)}
        n = len(self.names)
        self.n = n
        max_sends = sim.workload.max_sends
        self.header = config.header_bytes
        self.payload = config.payload_bytes
        #: K[i]: how many sends of each process i knows of (its SENT matrix, see above)
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
        self.deliv = np.zeros((n, n), dtype=np.int64)
        self._next_id = [0] * n
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
        self._next_id[i] += 1
        mid = f"{name}#{self._next_id[i]}"
        vc: tuple[tuple[str, int], ...] = ()
        message = _ModelMessage(mid, i, stamp, count, (planned.key, planned.job_ms), vc, meta)
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
        self.deliv[i, j] += 1
        np.maximum(self.known[i], message.stamp, out=self.known[i])
        delivered.append(message)

    def _drain(self, i: int, name: str, delivered: list[_ModelMessage]) -> None:
        buffer = self.buffers[i]
        progress = True
        while progress and buffer:
            progress = False
            for index, message in enumerate(buffer):
                if self._deliverable(i, message):
                    del buffer[index]
                    if self.tracing:
                        self._trace(name, "unbuffer", message)
                    self._deliver(i, message, delivered)
                    progress = True
                    break

    def held(self) -> int:
        return sum(len(b) for b in self.buffers)
