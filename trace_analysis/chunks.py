"""Parse one byte range of a trace file into Arrow batches in a Spark Python worker
(docs/analysis.md, "How the analysis works"). A task yields ``e`` rows (the kept events;
``(file, blk, rid)``, the chunk's start and the line's index in it, is line order), ``c``
rows (counts and metadata bytes per protocol, process, event and kind), ``m`` rows (the
first malformed lines), a ``k`` row (lines, blank and malformed) and an ``s`` row (the
chunk's sends, packed)."""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec

import trace_analysis.schema as schema
from trace_analysis.loaded import HEAVY_EVENTS as _HEAVY
from trace_analysis.send_index import RAW_COLUMNS as RAW_SEND_COLUMNS
from trace_analysis.send_index import send_table_bytes

#: target size of one chunk (one Spark task)
CHUNK_BYTES = 32 * 1024 * 1024
#: how far a boundary search reads at a time
_SCAN = 1 << 16
#: characters of a malformed line kept for the samples
SAMPLE_CHARS = 201

HEAVY_EVENTS = frozenset(_HEAVY)


@dataclass(frozen=True)
class Chunk:
    """Lines of ``path`` starting in ``[start, end)``; a gzip file is one chunk."""

    path: str
    uri: str
    start: int
    end: int
    gzip: bool = False


def plan_chunks(files: Iterable[Path], chunk_bytes: int = CHUNK_BYTES) -> list[Chunk]:
    """Split the files into chunks of about ``chunk_bytes`` that start at line starts."""
    chunks: list[Chunk] = []
    for path in files:
        resolved = path.resolve()
        # the form Spark's own file metadata uses ("file:/a/b.jsonl")
        name, uri = str(resolved), "file:" + resolved.as_uri()[len("file://"):]
        size = resolved.stat().st_size
        if resolved.suffix == ".gz":
            chunks.append(Chunk(name, uri, 0, size, gzip=True))
            continue
        starts = [0]
        with open(resolved, "rb") as handle:
            while starts[-1] + chunk_bytes < size:
                boundary = _next_line_start(handle, starts[-1] + chunk_bytes, size)
                if boundary >= size:
                    break
                starts.append(boundary)
        ends = starts[1:] + [size]
        chunks.extend(Chunk(name, uri, s, e) for s, e in zip(starts, ends, strict=True))
    return chunks


def _next_line_start(handle: Any, position: int, size: int) -> int:
    """The offset just after the first ``\\n`` at or after ``position`` (``size`` if none)."""
    handle.seek(position)
    while True:
        block = handle.read(_SCAN)
        if not block:
            return size
        at = block.find(b"\n")
        if at >= 0:
            return position + at + 1
        position += len(block)


def _read(chunk: Chunk) -> bytes:
    if chunk.gzip:
        with gzip.open(chunk.path, "rb") as handle:
            return handle.read()
    with open(chunk.path, "rb") as handle:
        handle.seek(chunk.start)
        return handle.read(chunk.end - chunk.start)


_Count = Annotated[int, msgspec.Meta(ge=0, le=schema.INT64_MAX)]


class Record(msgspec.Struct):
    """:data:`trace_analysis.schema.FIELDS` typed; JSON ``null`` is absent (None)."""

    ts: float | None = None
    process: str | None = None
    event: str | None = None
    protocol: str | None = None
    msg: str | None = None
    sender: str | None = None
    dests: list[str] | None = None
    vc: dict[str, _Count] | None = None
    kind: str | None = None
    meta_bytes: _Count | None = None


_decoder = msgspec.json.Decoder(Record)


def _utf8_safe(value: Any) -> Any:
    """``value`` with lone surrogates (legal in JSON escapes, not in UTF-8) replaced."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    if isinstance(value, dict):
        return {_utf8_safe(k): v for k, v in value.items()}
    return value


@dataclass
class ChunkResult:
    """What :func:`parse_chunk` found: (rid, ts, process, event, protocol, msg, sender,
    dests, vc) of the sends, the deliveries, and the buffer and unbuffer events;
    (protocol, process, event, kind) -> [events, metadata bytes]; and (rid, reason,
    first characters) of malformed lines."""

    groups: list[list[tuple]]
    counts: dict[tuple, list[int]]
    malformed: list[tuple[int, str, str]]
    lines: int
    blank: int


def parse_chunk(data: bytes) -> ChunkResult:
    """Classify and parse every line of ``data`` (split as Python's text mode and Spark's
    reader do; a chunk starts just after a ``\\n``)."""
    decode = _decoder.decode
    heavy = HEAVY_EVENTS
    # ValidationError is a DecodeError; invalid UTF-8 raises UnicodeDecodeError
    failed = (msgspec.DecodeError, UnicodeDecodeError)
    sends: list[tuple] = []
    deliveries: list[tuple] = []
    others: list[tuple] = []
    counts: dict[tuple, list[int]] = {}
    malformed: list[tuple[int, str, str]] = []
    blank = 0
    lines = data.splitlines()
    required = schema.REQUIRED
    for rid, line in enumerate(lines):
        try:
            r = decode(line)
        except failed:
            r = None
        # the fast path: required fields present (types were checked by the decoder)
        if r is not None:
            ts, process, event, protocol = r.ts, r.process, r.event, r.protocol
            if ts is None or process is None or event is None or protocol is None:
                r = None
            elif event == "deliver":
                msg, sender = r.msg, r.sender
                if msg is None or sender is None or r.vc is None:
                    r = None
            elif event == "send":
                msg, sender, vc, dests = r.msg, r.sender, r.vc, r.dests
                if (msg is None or sender is None or vc is None or dests is None
                        or vc.get(sender, 0) < 1):
                    r = None
            else:
                msg, sender = r.msg, r.sender
                for name in required.get(event, ()):
                    if getattr(r, name) is None:
                        r = None
                        break
            if r is not None:
                kind, meta = r.kind, r.meta_bytes
        if r is None:  # the one validator, on what the fast path did not accept
            status, reason, record = schema.parse_line(line.decode("utf-8", errors="replace"))
            if status == schema.BLANK:
                blank += 1
                continue
            if record is None:
                text = line[: SAMPLE_CHARS * 4].decode("utf-8", errors="replace")
                malformed.append((rid, reason or "malformed", text[:SAMPLE_CHARS]))
                continue
            ts, process, event, protocol, msg, sender, dests, vc, kind, meta = (
                _utf8_safe(record[name]) for name in schema.FIELDS)
        key = (protocol, process, event, kind)
        entry = counts.get(key)
        if entry is None:
            counts[key] = entry = [0, 0]
        entry[0] += 1
        if meta is not None:
            entry[1] += meta
        if event in heavy:  # each with the fields of schema.KEPT
            if event == "deliver":
                deliveries.append((rid, ts, process, event, protocol, msg, sender, None, None))
            elif event == "send":
                sends.append((rid, ts, process, event, protocol, msg, sender, dests, vc))
            else:
                others.append((rid, ts, process, event, protocol, msg, None, None, None))
    return ChunkResult([sends, deliveries, others], counts, malformed, len(lines), blank)


#: rec, :data:`trace_analysis.loaded.EVENT_COLUMNS`, then the summary columns
OUTPUT_COLUMNS = (("rec", "string"), ("file", "string"), ("blk", "bigint"),
                  ("rid", "bigint"), ("ts", "double"), ("process", "string"),
                  ("event", "string"), ("protocol", "string"), ("msg", "string"),
                  ("sender", "string"), ("dests", "array<string>"),
                  ("vc", "map<string,bigint>"), ("kind", "string"),
                  ("meta_bytes", "bigint"), ("n", "bigint"), ("bytes", "bigint"),
                  ("blank", "bigint"), ("bad", "bigint"), ("reason", "string"),
                  ("raw", "string"), ("sends", "binary"))


def _arrow_schema() -> Any:
    import pyarrow as pa

    kinds = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64(),
             "array<string>": pa.list_(pa.string()),
             "map<string,bigint>": pa.map_(pa.string(), pa.int64()),
             "binary": pa.binary()}
    return pa.schema([(name, kinds[kind]) for name, kind in OUTPUT_COLUMNS])


def to_batches(chunk: Chunk, result: ChunkResult, samples: int) -> Iterator[Any]:
    """The Arrow record batches of one chunk: its events, then the summary rows (the
    first ``samples`` malformed lines, and the sends once more, packed for the driver)."""
    import pyarrow as pa

    arrow = _arrow_schema()
    blob = None
    # one batch per kind of event: Spark's cache keeps min/max statistics per batch of
    # rows, so a scan for sends (or deliveries) skips the batches of the other kinds
    for events in result.groups:
        if not events:
            continue
        n = len(events)
        rid, ts, process, event, protocol, msg, sender, dests, vc = zip(*events, strict=True)
        columns = {
            "rec": pa.array(["e"] * n, pa.string()),
            "file": pa.array([chunk.uri] * n, pa.string()),
            "blk": pa.array([chunk.start] * n, pa.int64()),
            "rid": pa.array(rid, pa.int64()),
            "ts": pa.array(ts, pa.float64()),
            "process": pa.array(process, pa.string()),
            "event": pa.array(event, pa.string()),
            "protocol": pa.array(protocol, pa.string()),
            "msg": pa.array(msg, pa.string()),
            "sender": pa.array(sender, pa.string()),
            "dests": pa.array(dests, arrow.field("dests").type),
            "vc": _map_array(vc, arrow.field("vc").type),
        }
        batch = pa.RecordBatch.from_arrays(
            [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in arrow],
            schema=arrow)
        if events is result.groups[0]:
            sends = pa.Table.from_batches([batch]).select(list(RAW_SEND_COLUMNS))
            blob = send_table_bytes(sends, "zstd")
        yield batch
    summary: list[dict[str, Any]] = [
        {"rec": "c", "protocol": k[0], "process": k[1], "event": k[2], "kind": k[3],
         "n": v[0], "bytes": v[1]} for k, v in result.counts.items()]
    summary.extend({"rec": "m", "rid": rid, "reason": reason, "raw": raw}
                   for rid, reason, raw in result.malformed[:samples])
    summary.append({"rec": "k", "n": result.lines, "blank": result.blank,
                    "bad": len(result.malformed)})
    if blob is not None:
        summary.append({"rec": "s", "sends": blob})
    for row in summary:
        row["file"], row["blk"] = chunk.uri, chunk.start
    yield pa.RecordBatch.from_pylist(summary, schema=arrow)


def _map_array(values: tuple, kind: Any) -> Any:
    """A map array from dicts and Nones (flattened: faster than converting dicts)."""
    import pyarrow as pa

    offsets: list[int | None] = []
    keys: list[str] = []
    items: list[int] = []
    at = 0
    for value in values:
        if value is None:
            offsets.append(None)
            continue
        offsets.append(at)
        keys.extend(value)
        items.extend(value.values())
        at += len(value)
    offsets.append(at)
    if not keys and all(o is None for o in offsets[:-1]):
        return pa.nulls(len(values), kind)
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                   pa.array(items, pa.int64()), type=kind)


def parse_partitions(batches: Iterator[Any], chunks: list[Chunk], samples: int) -> Iterator[Any]:
    """The ``mapInArrow`` function: each input row is the number of a chunk."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            chunk = chunks[index]
            yield from to_batches(chunk, parse_chunk(_read(chunk)), samples)
