"""One process's deliveries laid out in numpy: positions, copies and violation flags.

Spark hands :func:`lay_out` all the deliveries of one process (``groupBy("p")
.applyInArrow``), each already joined with its send's clock laid out per sender
(``vals``). The function orders them by line position (file, blk, rid) and computes, in
a few vectorised passes instead of two window sorts in the JVM:

* ``pos``: the 1-based position of the delivery among the process's deliveries;
* ``copy``: 1 for the first delivery of its message at the process, 2 for the second…;
* ``flag``: the first delivery of a message m from sender s is flagged when an earlier
  delivery m′ at the process has ``vcsend(m′)[s] >= vcsend(m)[s]`` — the running maximum
  of each sender's column over the earlier deliveries reaches m's own entry (method step
  2 of :mod:`trace_analysis.checks`).

Pure computation over Arrow tables: no Spark here, so it is tested directly.
"""

from __future__ import annotations

from typing import Any

#: the columns :func:`lay_out` expects (``vals`` is ``array<bigint>`` of one entry per
#: sender, -1 where the delivery has no send)
INPUT_COLUMNS = ("p", "msg", "ts", "protocol", "sender", "sidx", "x", "send_ts",
                 "send_protocol", "in_dests", "vals", "file", "blk", "rid")
#: the Spark schema of the result, as DDL
OUTPUT_DDL = ("p string, msg string, ts double, protocol string, sender string, sidx int, "
              "send_ts double, send_protocol string, has_send boolean, in_dests boolean, "
              "copy int, pos int, flag boolean")
#: stands for "no send" in ``vals``: below every clock entry, which are never negative
NO_VALUE = -1


def occurrence(codes: Any) -> Any:
    """For each element of ``codes`` (integers), its 1-based occurrence number among the
    equal elements before it (in array order)."""
    import numpy as np

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
    """Row i of the result is the column-wise maximum of rows 0..i-1 of ``vals`` (an
    n × K integer matrix); row 0 is :data:`NO_VALUE`."""
    import numpy as np

    prior = np.full(vals.shape, NO_VALUE, dtype=np.int64)
    if len(vals) > 1:
        prior[1:] = np.maximum.accumulate(vals[:-1], axis=0)
    return prior


def lay_out(table: Any, width: int) -> Any:
    """The deliveries of one process (columns :data:`INPUT_COLUMNS`, ``width`` senders),
    in line order, with ``has_send``, ``copy``, ``pos`` and ``flag`` (schema
    :data:`OUTPUT_DDL`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n:
        table = table.take(pc.sort_indices(table, sort_keys=[
            ("file", "ascending"), ("blk", "ascending"), ("rid", "ascending")]))
    x_column = table.column("x")
    has_send = pc.is_valid(x_column).to_numpy(zero_copy_only=False)
    codes = (pc.dictionary_encode(table.column("msg")).combine_chunks().indices
             .fill_null(-1).to_numpy(zero_copy_only=False))
    copy = occurrence(codes)

    flag = np.zeros(n, dtype=bool)
    if n and width:
        vals = table.column("vals").combine_chunks()
        if vals.null_count:  # a delivery without a send: below every clock entry
            vals = pc.coalesce(vals, pa.scalar([NO_VALUE] * width, vals.type))
        matrix = vals.flatten().to_numpy(zero_copy_only=False).reshape(n, width)
        prior = prior_maximum(matrix)
        sidx = table.column("sidx").fill_null(0).to_numpy(zero_copy_only=False)
        x = x_column.fill_null(0).to_numpy(zero_copy_only=False)
        rows = np.arange(n)
        candidates = has_send & (copy == 1) & (sidx >= 0) & (sidx < width)
        reached = prior[rows, np.clip(sidx, 0, width - 1)] >= x
        flag = candidates & reached

    return pa.table({
        "p": table.column("p"), "msg": table.column("msg"), "ts": table.column("ts"),
        "protocol": table.column("protocol"), "sender": table.column("sender"),
        "sidx": table.column("sidx").cast(pa.int32()), "send_ts": table.column("send_ts"),
        "send_protocol": table.column("send_protocol"),
        "has_send": pa.array(has_send, pa.bool_()),
        "in_dests": table.column("in_dests").fill_null(False),
        "copy": pa.array(copy, pa.int32()),
        "pos": pa.array(np.arange(1, n + 1, dtype=np.int32), pa.int32()),
        "flag": pa.array(flag, pa.bool_()),
    })
