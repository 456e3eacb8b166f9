"""Exact violation counts for one (process, sender) group, in numpy (no Spark here).

The Spark job (:mod:`trace_analysis.checks`) flags the deliveries that have at least
one violation with a running maximum; only the (process p, sender s) groups holding a
flagged delivery come here. A group is p's first deliveries in order, each with
``a[j] = vcsend(m_j)[s]``; a query is a flagged delivery i of a message from s, and

* its causal count is ``#{j < i : a[j] >= a[i]}`` (m_j is causally after m_i, yet was
  delivered first: the scaling fact of docs/trace_schema.md);
* its FIFO count is the same restricted to the j that are from s.

:func:`count_earlier_at_least` computes such counts for any number of queries in
O(n log² n) with a vectorised divide and conquer: at level w, the sequence is cut into
blocks of 2w; each query in the right half of a block counts the left-half elements
that are at least its value (a sort and two binary searches per level). Every pair
j < i is counted at exactly one level, the one whose cut separates them, so the sum over
the levels is exact and no pair is ever enumerated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np


def count_earlier_at_least(values: Sequence[int] | np.ndarray,
                           queries: Sequence[int] | np.ndarray) -> np.ndarray:
    """For each index i in ``queries``: how many j < i have ``values[j] >= values[i]``."""
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
class QueryResult:
    """The exact counts of one flagged delivery, and some of its violating triples."""

    process: str
    sender: str
    pos: int
    msg: str
    protocol: str
    causal: int
    fifo: int
    #: (earlier message delivered first, its sender is the query's sender)
    listed: list[tuple[str, bool]] = field(default_factory=list)


def count_group(
    process: str,
    sender: str,
    rows: Sequence[tuple[int, int, bool, bool, str, str]],
    budget: int,
) -> tuple[list[QueryResult], int]:
    """Count one group; ``rows`` are (pos, a, from_sender, is_query, msg, protocol) in
    delivery order. Lists at most ``budget`` triples; returns the results and the budget
    left."""
    values = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    from_sender = np.fromiter((r[2] for r in rows), dtype=bool, count=len(rows))
    queries = np.flatnonzero(np.fromiter((r[3] for r in rows), dtype=bool, count=len(rows)))
    if len(queries) == 0:
        return [], budget
    causal = count_earlier_at_least(values, queries)
    own = np.flatnonzero(from_sender)
    # queries are deliveries from this sender: their rank among its deliveries
    fifo = count_earlier_at_least(values[own], np.searchsorted(own, queries))
    results = []
    for i, c, f in zip(queries.tolist(), causal.tolist(), fifo.tolist(), strict=True):
        pos, _, _, _, msg, protocol = rows[i]
        result = QueryResult(process, sender, pos, msg, protocol, c, f)
        if budget > 0 and c > 0:
            for j in nearest_earlier_at_least(values, i, min(c, budget)).tolist():
                result.listed.append((rows[j][4], bool(from_sender[j])))
            budget -= len(result.listed)
        results.append(result)
    return results, budget


def count_sorted_rows(
    rows: Iterable[Sequence], budget: int
) -> Iterator[tuple[str, str, int, str, str, int, int, list[tuple[str, bool]]]]:
    """Count every group of ``rows`` sorted by (process, sender, pos); each row is
    (process, sender, pos, a, from_sender, is_query, msg, protocol). Yields one plain
    tuple per query (the shape a Spark ``mapPartitions`` returns)."""
    current: tuple[str, str] | None = None
    group: list[tuple[int, int, bool, bool, str, str]] = []

    def flush() -> Iterator[tuple]:
        nonlocal budget
        if current is None:
            return
        results, budget = count_group(current[0], current[1], group, budget)
        for r in results:
            yield (r.process, r.sender, r.pos, r.msg, r.protocol, r.causal, r.fifo, r.listed)

    for row in rows:
        key = (row[0], row[1])
        if key != current:
            yield from flush()
            current, group = key, []
        group.append((row[2], row[3], row[4], row[5], row[6], row[7]))
    yield from flush()
