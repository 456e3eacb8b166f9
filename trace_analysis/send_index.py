"""Method step 1 of docs/analysis.md, in numpy on the driver: the send records of a
trace, one per message (the first in line order), with their clocks laid out per sender."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: the columns :func:`index_sends` reads from the send events
RAW_COLUMNS = ("msg", "sender", "vc", "dests", "ts", "protocol", "file", "blk", "rid")
#: line order, as Arrow sort keys
LINE_ORDER = [("file", "ascending"), ("blk", "ascending"), ("rid", "ascending")]
#: the Spark schema of :attr:`SendIndex.table`, as DDL
SEND_DDL = ("msg string, sender string, sidx int, x bigint, vals array<bigint>, "
            "dests array<string>, send_ts double, send_protocol string")


@dataclass
class SendIndex:
    """One row per message id (``table``, :data:`SEND_DDL`), the senders (the columns of
    the clocks) and how many send records repeated an id."""

    table: Any  # pyarrow.Table
    senders: list[str]
    duplicate_sends: int

    def per_protocol(self) -> dict[str | None, tuple[int, int]]:
        """Protocol -> (messages, expected deliveries: distinct destinations summed)."""
        import pyarrow.compute as pc

        protocols = pc.dictionary_encode(self.table.column("send_protocol")).combine_chunks()
        codes = protocols.indices.fill_null(-1).to_numpy(zero_copy_only=False) + 1
        wanted = (pc.list_value_length(self.table.column("dests")).fill_null(0)
                  .to_numpy(zero_copy_only=False))
        names = [None, *protocols.dictionary.to_pylist()]
        messages = np.bincount(codes, minlength=len(names))
        expected = np.bincount(codes, weights=wanted, minlength=len(names))
        return {names[code]: (int(messages[code]), int(expected[code]))
                for code in range(len(names)) if messages[code]}


def send_table_bytes(table: Any, compression: str | None = None) -> bytes:
    """``table`` as an Arrow IPC stream, the form send tables travel in (opaque bytes to
    the JVM)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def send_table_of(blob: bytes) -> Any:
    import pyarrow as pa

    return pa.ipc.open_stream(blob).read_all()


def _first_per_message(raw: Any) -> tuple[Any, int]:
    """``raw`` reduced to the first record of each message id, and how many were dropped."""
    import pyarrow.compute as pc

    n = raw.num_rows
    codes = pc.dictionary_encode(raw.column("msg")).combine_chunks()
    if len(codes.dictionary) == n:
        return raw, 0
    ordered = pc.sort_indices(raw, sort_keys=LINE_ORDER).to_numpy()
    keys = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False)[ordered]
    _, first = np.unique(keys, return_index=True)  # first position of each id in order
    kept = np.sort(ordered[first])
    return raw.take(kept), n - len(kept)


def _entries(lists: Any) -> tuple[Any, Any]:
    """(row of each entry, the entries) of a list or map array (for a map, structs of
    ``key`` and ``value``), null lists being empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(lists.type, pa.MapType):
        # the list kernels abort on map arrays: the same buffers, seen as a list of structs
        lists = pa.Array.from_buffers(pa.list_(lists.values.type), len(lists),
                                      lists.buffers()[:2], offset=lists.offset,
                                      children=[lists.values])
    return (pc.list_parent_indices(lists).to_numpy(zero_copy_only=False),
            pc.list_flatten(lists))


def _clock_columns(vc: Any, sender: Any, senders: list[str]) -> tuple[Any, Any]:
    """The n × K matrix of ``vc[s_k]`` (0 where a clock lacks s_k), and for each row
    whether its clock has an entry for its own sender."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n, width = len(vc), len(senders)
    matrix = np.zeros((n, width), dtype=np.int64)
    own = np.zeros(n, dtype=bool)
    if not n or not width:
        return matrix, own
    vc = vc.combine_chunks() if isinstance(vc, pa.ChunkedArray) else vc
    rows, entries = _entries(vc)
    keys = entries.field(0)
    items = entries.field(1).fill_null(0).to_numpy(zero_copy_only=False)
    columns = (pc.index_in(keys, value_set=pa.array(senders, pa.string()))
               .fill_null(-1).to_numpy(zero_copy_only=False))
    known = columns >= 0
    matrix[rows[known], columns[known]] = items[known]
    sender = sender.combine_chunks() if isinstance(sender, pa.ChunkedArray) else sender
    own_key = pc.equal(keys, sender.take(pa.array(rows, pa.int64())))
    own[rows[own_key.fill_null(False).to_numpy(zero_copy_only=False)]] = True
    return matrix, own


def _distinct_lists(lists: Any) -> Any:
    """Each list of strings without repeats, first occurrences in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    rows, values = _entries(lists)
    codes = (pc.dictionary_encode(values).indices.fill_null(-1)
             .to_numpy(zero_copy_only=False).astype(np.int64))
    # an entry is kept when it is the first of its (row, value) pair
    pair = rows.astype(np.int64) * (int(codes.max(initial=0)) + 2) + codes + 1
    _, first = np.unique(pair, return_index=True)
    first.sort()
    kept_rows = rows[first]
    counts = np.bincount(kept_rows, minlength=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = None if not lists.null_count else ~lists.is_valid().to_numpy(zero_copy_only=False)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                    values.take(pa.array(first, pa.int64())),
                                    mask=None if mask is None else pa.array(mask))


def index_sends(raw: Any) -> SendIndex:
    """The send index of the send events ``raw`` (Arrow, :data:`RAW_COLUMNS`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept, duplicates = _first_per_message(raw)
    sender = kept.column("sender").combine_chunks()
    senders = sorted(s for s in pc.unique(sender).to_pylist() if s is not None)
    width = len(senders)
    matrix, own = _clock_columns(kept.column("vc"), sender, senders)
    has_sender = sender.is_valid().to_numpy(zero_copy_only=False)
    sidx = (pc.index_in(sender, value_set=pa.array(senders, pa.string()))
            .fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32))
    rows = np.arange(kept.num_rows)
    # x = vc[sender]: the sender's own entry, null when the clock lacks it
    x = matrix[rows, sidx] if width else np.zeros(kept.num_rows, dtype=np.int64)
    offsets = np.arange(kept.num_rows + 1, dtype=np.int32) * width  # the clocks' rows
    table = pa.table({
        "msg": kept.column("msg"),
        "sender": sender,
        "sidx": pa.array(sidx, pa.int32(), mask=~has_sender),
        "x": pa.array(x, pa.int64(), mask=~(own & has_sender)),
        "vals": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                         pa.array(matrix.reshape(-1), pa.int64())),
        "dests": _distinct_lists(kept.column("dests")),
        "send_ts": kept.column("ts"),
        "send_protocol": kept.column("protocol"),
    })
    return SendIndex(table, senders, duplicates)
