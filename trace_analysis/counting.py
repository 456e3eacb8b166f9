"""Exact violation counts of one process's flagged deliveries, in numpy (method step 3,
docs/analysis.md). For a sender s, ``a[j] = vcsend(m_j)[s]`` over the process's first
deliveries; a flagged delivery i from s has the causal count ``#{j < i : a[j] >= a[i]}``
and the FIFO count the same among the j from s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def count_earlier_at_least(values: Sequence[int] | np.ndarray,
                           queries: Sequence[int] | np.ndarray) -> np.ndarray:
    """For each index i in ``queries``: how many j < i have ``values[j] >= values[i]``.

    At level w each query in the right half of a block of 2w counts the left half's
    values at least its own (a sort and two binary searches); each pair j < i is counted
    at the one level whose cut separates them, so the sum is exact in O(n log² n)."""
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
    """Up to ``want`` indices j < i with ``values[j] >= values[i]``, the ones nearest to i,
    ascending. Scans backwards in doubling chunks, so a late delivery costs its lateness."""
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


@dataclass
class FlaggedCounts:
    """The exact counts of a process's flagged deliveries (arrays over its deliveries,
    zero where not flagged) and some of their violating triples."""

    causal: np.ndarray
    fifo: np.ndarray
    #: delivery row -> (rows of earlier first deliveries delivered before it although
    #: causally after it, the nearest ones, ascending; whether each has its sender)
    listed: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def count_flagged(clocks: np.ndarray, sidx: np.ndarray, firsts: np.ndarray,
                  flagged: np.ndarray, budget: int) -> FlaggedCounts:
    """Exact counts of the flagged deliveries of one process, in delivery order.

    ``clocks`` (n × K) holds each delivery's send clock over the senders, ``sidx`` its
    sender's column, ``firsts`` marks the first deliveries of messages whose send is
    known (the only ones that take part), ``flagged`` the deliveries to count. At most
    ``budget`` triples are listed, each flagged delivery's nearest predecessors first.
    """
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
    result = FlaggedCounts(causal, fifo)
    for i in queries_at.tolist():
        if budget <= 0:
            break
        row = int(rows[i])
        s = int(sidx[row])
        want = min(int(causal[row]), budget)
        if not want:  # flagged by a delivery that takes no part (its clock lacks its sender)
            continue
        earlier = nearest_earlier_at_least(columns[s], i, want)
        result.listed[row] = (rows[earlier], sidx[rows[earlier]] == s)
        budget -= len(earlier)
    return result
