"""One process's deliveries laid out in numpy (``groupBy("p").applyInArrow``), method
steps 2 to 4 of docs/analysis.md. The exact counts: for a sender s, ``a[j] =
vcsend(m_j)[s]`` over the process's first deliveries; a flagged delivery i from s has the
causal count ``#{j < i : a[j] >= a[i]}`` and the FIFO count the same among the j from s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trace_analysis.send_index import LINE_ORDER, send_table_of

#: the Spark schema of the result, as DDL
OUTPUT_DDL = ("p string, msg string, ts double, protocol string, sender string, sidx int, "
              "send_ts double, send_protocol string, has_send boolean, in_dests boolean, "
              "copy int, pos int, flag boolean, causal long, fifo long, "
              "earlier array<string>, earlier_fifo array<boolean>, missing long, "
              "missing_msgs array<string>")
#: "no send" in the clock rows: below every clock entry
NO_VALUE = -1


def count_earlier_at_least(values: Sequence[int] | np.ndarray,
                           queries: Sequence[int] | np.ndarray) -> np.ndarray:
    """For each index i in ``queries``: how many j < i have ``values[j] >= values[i]``.
    At level w each query in the right half of a block of 2w counts the left half's
    values at least its own; each pair is counted at the one level whose cut separates
    it, in O(n log² n)."""
    vals = np.asarray(values, dtype=np.int64)
    q = np.asarray(queries, dtype=np.int64)
    counts = np.zeros(len(q), dtype=np.int64)
    n = int(q.max()) + 1 if len(q) else 0
    if n < 2:
        return counts
    vals = vals[:n]  # nothing after the last query matters
    uniques, rank = np.unique(vals, return_inverse=True)
    width = np.int64(len(uniques) + 1)
    qrank = rank[q]
    index = np.arange(n, dtype=np.int64)
    w = 1
    while w < n:
        left = (index // w) % 2 == 0
        keys = np.sort((index[left] // (2 * w)) * width + rank[left])
        right = (q // w) % 2 == 1
        block = q[right] // (2 * w)
        low = np.searchsorted(keys, block * width + qrank[right], side="left")
        high = np.searchsorted(keys, (block + 1) * width, side="left")
        counts[right] += high - low
        w *= 2
    return counts


def nearest_earlier_at_least(values: np.ndarray, i: int, want: int) -> np.ndarray:
    """Up to ``want`` indices j < i with ``values[j] >= values[i]``, the nearest to i,
    ascending (scanned backwards in doubling chunks: a delivery costs its lateness)."""
    if want <= 0 or i <= 0:
        return np.zeros(0, dtype=np.int64)
    x = values[i]
    found: list[np.ndarray] = []
    total, high, chunk = 0, i, 64
    while high > 0 and total < want:
        low = max(0, high - chunk)
        hits = np.flatnonzero(values[low:high] >= x) + low
        found.append(hits)
        total += len(hits)
        high, chunk = low, chunk * 2
    return np.concatenate(found[::-1])[-want:]


def count_flagged(clocks: np.ndarray, sidx: np.ndarray, firsts: np.ndarray,
                  flagged: np.ndarray, budget: int
                  ) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """The exact causal and FIFO counts of one process's ``flagged`` deliveries (zero
    where not flagged), and at most ``budget`` triples: delivery row -> (the rows of the
    nearest earlier first deliveries that causally follow it, ascending; whether each
    has its sender). ``clocks`` (n × K) holds each delivery's send clock, ``sidx`` its
    sender's column, ``firsts`` marks the first deliveries of messages whose send is
    known (the only ones that take part)."""
    n = len(sidx)
    causal = np.zeros(n, dtype=np.int64)
    fifo = np.zeros(n, dtype=np.int64)
    rows = np.flatnonzero(firsts)  # the group's members, in delivery order
    queries_at = np.flatnonzero(flagged[rows])  # indices into rows
    columns: dict[int, np.ndarray] = {}
    for s in np.unique(sidx[rows[queries_at]]).tolist():
        values = clocks[rows, s]
        columns[s] = values
        mine = queries_at[sidx[rows[queries_at]] == s]
        causal[rows[mine]] = count_earlier_at_least(values, mine)
        own = np.flatnonzero(sidx[rows] == s)
        # the queries are deliveries from s: their rank among its deliveries
        fifo[rows[mine]] = count_earlier_at_least(values[own], np.searchsorted(own, mine))
    listed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i in queries_at.tolist():
        if budget <= 0:
            break
        row = int(rows[i])
        s = int(sidx[row])
        want = min(int(causal[row]), budget)
        if not want:  # flagged by a delivery that takes no part (its clock lacks its sender)
            continue
        earlier = nearest_earlier_at_least(columns[s], i, want)
        listed[row] = (rows[earlier], sidx[rows[earlier]] == s)
        budget -= len(earlier)
    return causal, fifo, listed


class SendLookup:
    """The send index (:mod:`trace_analysis.send_index`) prepared for lookups by message
    id: clocks as an M × K matrix, destinations flattened."""

    def __init__(self, sends: Any) -> None:
        import pyarrow.compute as pc

        sends = sends.combine_chunks()
        self.sends = sends
        self.msg = sends.column("msg").combine_chunks()
        vals = sends.column("vals").combine_chunks()
        count = len(vals)
        self.width = (len(vals.flatten()) // count) if count else 0
        self.matrix = (vals.flatten().to_numpy(zero_copy_only=False)
                       .reshape(count, self.width).astype(np.int64, copy=False))
        self.x = sends.column("x").combine_chunks()
        self.has_x = self.x.is_valid().to_numpy(zero_copy_only=False)
        self.sidx = (sends.column("sidx").combine_chunks().fill_null(0)
                     .to_numpy(zero_copy_only=False).astype(np.int64))
        dests = sends.column("dests").combine_chunks()
        self.dest_rows = pc.list_parent_indices(dests).to_numpy(zero_copy_only=False)
        self.dest_names = pc.list_flatten(dests)
        self._dest_masks: dict[str, Any] = {}

    def addressed_to(self, process: str) -> Any:
        """For every send, whether ``process`` is among its destinations."""
        import pyarrow.compute as pc

        mask = self._dest_masks.get(process)
        if mask is None:
            mask = np.zeros(len(self.msg), dtype=bool)
            hits = pc.equal(self.dest_names, process).fill_null(False)
            mask[self.dest_rows[hits.to_numpy(zero_copy_only=False)]] = True
            self._dest_masks = {process: mask}  # one process at a time per group
        return mask

    def smallest_ids(self, chosen: Any, limit: int) -> list[str]:
        """The ``limit`` smallest ids of the sends marked in ``chosen``, ascending."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ids = self.msg.filter(pa.array(chosen, pa.bool_()))
        return ids.take(pc.sort_indices(ids)[:limit]).to_pylist()


#: per worker process, the lookup of the analysis being run (only: a reused worker
#: keeps no earlier analysis's sends)
_lookups: dict[str, SendLookup] = {}


def worker_lookup(token: str, shipped: Any) -> SendLookup:
    """The :class:`SendLookup` of the broadcast ``shipped``, decoded once per worker
    process and analysis (``token``)."""
    lookup = _lookups.get(token)
    if lookup is None:
        _lookups.clear()
        lookup = SendLookup(send_table_of(shipped.value))
        _lookups[token] = lookup
    return lookup


def occurrence(codes: Any) -> Any:
    """For each integer of ``codes``, its 1-based occurrence number among equal ones."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    order = np.argsort(codes, kind="stable")
    grouped = codes[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = grouped[1:] != grouped[:-1]
    ranks = np.arange(n) - np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    out = np.empty(n, dtype=np.int32)
    out[order] = ranks + 1
    return out


def prior_maximum(vals: Any) -> Any:
    """Row i: the column-wise maximum of rows 0..i-1 of ``vals``; row 0: NO_VALUE."""
    prior = np.full(vals.shape, NO_VALUE, dtype=np.int64)
    if len(vals) > 1:
        prior[1:] = np.maximum.accumulate(vals[:-1], axis=0)
    return prior


def lay_out(table: Any, lookup: SendLookup, budget: int = 0, samples: int = 0) -> Any:
    """The deliveries of one process (p, msg, ts, protocol, file, blk, rid) in line order,
    as :data:`OUTPUT_DDL`: at most ``budget`` triples listed, and on the first row the
    process's undelivered messages, the ``samples`` smallest listed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n:
        table = table.take(pc.sort_indices(table, sort_keys=LINE_ORDER))
    msg = table.column("msg").combine_chunks()
    indexed = len(lookup.msg) > 0
    if indexed:
        found = pc.index_in(msg, value_set=lookup.msg)  # null where it has no send
        has_row = found.is_valid().to_numpy(zero_copy_only=False)
        rows = found.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        has_send = has_row & lookup.has_x[rows]
    else:  # no send in the trace: every delivery lacks its send
        has_row = has_send = np.zeros(n, dtype=bool)
        rows = np.zeros(n, dtype=np.int64)
    codes = (pc.dictionary_encode(msg).indices.fill_null(-1)
             .to_numpy(zero_copy_only=False))
    copy = occurrence(codes)

    in_dests = np.zeros(n, dtype=bool)
    undelivered: list[int | None] = [None] * n
    missing_msgs: list[list[str] | None] = [None] * n
    if n and indexed:
        process = table.column("p")[0].as_py()
        addressed = lookup.addressed_to(process)
        in_dests = has_row & addressed[rows]
        # what counts as reached is what the checks count: first deliveries of messages
        # whose send is known, at a destination
        unreached = addressed.copy()
        unreached[rows[in_dests & has_send & (copy == 1)]] = False
        undelivered[0] = int(unreached.sum())
        if undelivered[0] and samples > 0:
            missing_msgs[0] = lookup.smallest_ids(unreached, samples)
    elif n:
        undelivered[0] = 0

    flag = np.zeros(n, dtype=bool)
    causal = fifo = np.zeros(n, dtype=np.int64)
    earlier: list[list[str] | None] = [None] * n
    earlier_fifo: list[list[bool] | None] = [None] * n
    width = lookup.width
    if n and width and indexed:
        matrix = np.where(has_row[:, None], lookup.matrix[rows], NO_VALUE)
        prior = prior_maximum(matrix)
        sidx = lookup.sidx[rows]
        x = matrix[np.arange(n), sidx]
        first = has_send & (copy == 1)
        flag = first & (prior[np.arange(n), sidx] >= x)
        if flag.any():
            causal, fifo, listed = count_flagged(matrix, sidx, first, flag, budget)
            for row, (before, same_sender) in listed.items():
                earlier[row] = msg.take(pa.array(before, pa.int64())).to_pylist()
                earlier_fifo[row] = same_sender.tolist()

    taken = pa.array(rows, pa.int64())
    missing = pa.array(~has_row)

    def sent(column: str) -> Any:
        kind = lookup.sends.schema.field(column).type
        if not indexed or not n:
            return pa.nulls(n, kind)
        values = lookup.sends.column(column).take(taken).combine_chunks()
        return pc.if_else(missing, pa.scalar(None, kind), values)

    return pa.table({
        "p": table.column("p"), "msg": msg, "ts": table.column("ts"),
        "protocol": table.column("protocol"), "sender": sent("sender"),
        "sidx": sent("sidx").cast(pa.int32()), "send_ts": sent("send_ts"),
        "send_protocol": sent("send_protocol"),
        "has_send": pa.array(has_send, pa.bool_()),
        "in_dests": pa.array(in_dests, pa.bool_()),
        "copy": pa.array(copy, pa.int32()),
        "pos": pa.array(np.arange(1, n + 1, dtype=np.int32), pa.int32()),
        "flag": pa.array(flag, pa.bool_()),
        "causal": pa.array(causal, pa.int64()),
        "fifo": pa.array(fifo, pa.int64()),
        "earlier": pa.array(earlier, pa.list_(pa.string())),
        "earlier_fifo": pa.array(earlier_fifo, pa.list_(pa.bool_())),
        "missing": pa.array(undelivered, pa.int64()),
        "missing_msgs": pa.array(missing_msgs, pa.list_(pa.string())),
    })
