"""Read a trace directory: count every line, keep the events the checks need.

Two passes of Spark's native JSON parser, because caching ten million parsed rows costs
more than parsing them twice:

**Pass 1** reads every line with ``spark.read.text`` (one row per line, blank lines
included), with the file, the start of its file block and a
``monotonically_increasing_id`` (deterministic for a given set of files, so pass 2 gets
the same ids; within a file, ``(block start, id)`` follows line order, which is the
delivery order the checks need). ``from_json`` with the explicit schema of
:mod:`trace_analysis.schema` parses it (PERMISSIVE, ``_corrupt_record`` set when a value
does not fit its type), and a native predicate vouches for the line when the parse is
clean, required fields are there, and the raw text shows that string fields really are
JSON strings (Spark's parser silently turns ``5`` into ``"5"`` where a string is
expected; the text search runs only for values that could be such a conversion). The
pass ends in an aggregation: counts and metadata bytes per (block, protocol, process,
event, kind) for clean lines, and one group per line the fast path could not vouch for
(not JSON, missing fields, wrong types, but also legal lines such as non-ASCII escapes in
``dests``). Those few go through the Python validator
:func:`trace_analysis.schema.parse_line` as a UDF, which decides.

**Pass 2** reads the text again, keeps the lines whose ``"event":"…"`` (looked up in the
first 160 characters, no JSON parsing) is ``send``, ``deliver``, ``buffer`` or
``unbuffer`` (or cannot be found there), parses only those and caches them. The number
of such events must equal pass 1's count for each type; if a line was written in a
layout the look-up misses, the counts differ and pass 2 runs again without the filter.

Line numbers for the malformed samples come from pass 1's per-block counts: the lines in
earlier blocks of the same file plus the row's offset in its block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from trace_analysis import schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

TRACE_PATTERNS = ("*.jsonl", "*.jsonl.gz")
#: columns of :attr:`Loaded.events`
EVENT_COLUMNS = ("file", "blk", "rid") + schema.FIELDS
#: the events pass 2 keeps (everything else is only counted)
HEAVY_EVENTS = ("send", "deliver", "buffer", "unbuffer")
_GLOB_CHARS = set("\\{}[]*?^")
#: at most this many odd lines are validated on the driver; more go through a Python UDF
DRIVER_VALIDATION_LIMIT = 20_000

Progress = Callable[[str], None]


class TraceDirError(ValueError):
    """The trace directory is missing or holds no trace files."""


@dataclass
class Loaded:
    """The parsed trace: counts of every valid event, the events the checks need (cached),
    and what was wrong with the rest."""

    #: send, deliver, buffer and unbuffer events; columns EVENT_COLUMNS
    events: DataFrame
    #: one dict per (protocol, process, event, kind) of valid events: n, bytes (meta_bytes)
    counts: list[dict[str, Any]]
    files: list[Path]
    lines: int
    blank_lines: int
    malformed: int
    malformed_samples: list[dict[str, Any]]
    seconds: float
    cached: list[DataFrame] = field(default_factory=list)

    def unpersist(self) -> None:
        """Drop the cached data (the session lives on for the next analysis)."""
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def list_trace_files(trace_dir: str | Path) -> list[Path]:
    """The trace files of a directory, sorted; raises :class:`TraceDirError`."""
    directory = Path(trace_dir)
    if not directory.exists():
        raise TraceDirError(f"trace directory {directory} does not exist")
    if not directory.is_dir():
        raise TraceDirError(f"{directory} is not a directory")
    files = sorted({p for pattern in TRACE_PATTERNS for p in directory.glob(pattern)
                    if p.is_file()})
    if not files:
        raise TraceDirError(f"no trace files (*.jsonl) in {directory}")
    return files


def display_name(file_uri: str) -> str:
    """``alice.jsonl`` for a Spark file URI."""
    return Path(unquote(urlparse(file_uri).path)).name


def _hadoop_path(path: Path) -> str:
    """A path Spark will not expand as a glob pattern."""
    text = str(path.resolve())
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in text)


def spark_schema() -> Any:
    """The ``from_json`` schema: the analyzed fields plus ``_corrupt_record``."""
    from pyspark.sql import types as T

    types = {
        "ts": T.DoubleType(),
        "dests": T.ArrayType(T.StringType()),
        "vc": T.MapType(T.StringType(), T.LongType()),
        "meta_bytes": T.LongType(),
    }
    fields = [T.StructField(name, types.get(name, T.StringType())) for name in schema.FIELDS]
    return T.StructType(fields + [T.StructField("_corrupt_record", T.StringType())])


def _parsed_type() -> Any:
    from pyspark.sql import types as T

    base = spark_schema()
    return T.StructType(
        [T.StructField("status", T.StringType()), T.StructField("reason", T.StringType())]
        + [f for f in base.fields if f.name != "_corrupt_record"]
    )


def parse_for_spark(raw: str | None) -> tuple:
    """The Python validator as a Spark UDF: (status, reason, *FIELDS)."""
    status, reason, record = schema.parse_line(raw or "")
    if record is None:
        return (status, reason) + (None,) * len(schema.FIELDS)
    return (status, reason) + tuple(record[name] for name in schema.FIELDS)


def _looks_coerced(value: Column) -> Column:
    """True when ``value`` could be Spark's text of a non-string JSON value (a number,
    ``true``/``false``, an object or an array) rather than a JSON string."""
    from pyspark.sql import functions as F

    return F.substring(value, 1, 1).isin(*"-0123456789{[") | value.isin("true", "false")


def _string_ok(raw: Column, value: Column, name: str) -> Column:
    """True when ``value`` is absent, cannot be a coerced non-string, or the raw text
    shows a JSON string for ``name`` (the text search runs only for odd-looking values)."""
    return (value.isNull() | ~_looks_coerced(value)
            | raw.contains(f'"{name}":"') | raw.contains(f'"{name}": "'))


def _clean_predicate(raw: Column, j: Column) -> Column:
    """The native fast path: True only for lines the Python validator would accept with
    exactly the values Spark parsed (see the module docstring)."""
    from pyspark.sql import functions as F

    event = j["event"]
    conditions = [
        j.isNotNull(),
        j["_corrupt_record"].isNull(),
        raw.startswith("{"),
        raw.endswith("}"),
        ~raw.contains("}{"),
        ~F.isnan(j["ts"]),
        F.abs(j["ts"]) != float("inf"),
    ]
    conditions += [j[name].isNotNull() for name in schema.ALWAYS]
    conditions += [_string_ok(raw, j[name], name) for name in schema.STRING_FIELDS]
    dests = j["dests"]
    dests_json = F.to_json(dests)
    conditions.append(
        dests.isNull()
        | (F.forall(dests, lambda d: d.isNotNull())
           & (F.forall(dests, lambda d: ~_looks_coerced(d))
              | raw.contains(F.concat(F.lit('"dests":'), dests_json))
              | raw.contains(F.concat(F.lit('"dests": '),
                                      F.regexp_replace(dests_json, '","', '", "')))))
    )
    values = F.map_values(j["vc"])
    conditions.append(j["vc"].isNull() | (
        (F.coalesce(F.array_min(values), F.lit(0)) >= 0)
        & (F.size(F.array_compact(values)) == F.size(values))))
    conditions.append(j["meta_bytes"].isNull() | (j["meta_bytes"] >= 0))
    for event_name, names in schema.REQUIRED.items():
        present = [j[name].isNotNull() for name in names]
        required = present[0]
        for item in present[1:]:
            required = required & item
        conditions.append((event != event_name) | required)
    conditions.append(
        (event != "send") | (F.coalesce(j["vc"][j["sender"]], F.lit(0)) >= 1)
    )
    # a repeated key: Spark's map keeps both, Python the last one; let Python decide
    conditions.append(
        (event != "send") | (F.size(F.array_distinct(F.map_keys(j["vc"]))) == F.size(j["vc"]))
    )
    predicate = conditions[0]
    for condition in conditions[1:]:
        predicate = predicate & F.coalesce(condition, F.lit(False))
    return F.coalesce(predicate, F.lit(False))


def _kept(event: Column, value: Column, name: str) -> Column:
    """``value`` where the analysis uses ``name`` for this event type, else null."""
    from pyspark.sql import functions as F

    if name in schema.ALWAYS:
        return value.alias(name)
    users = [e for e, names in schema.KEPT.items() if name in names]
    return F.when(event.isin(users), value).alias(name)


def _json(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.from_json(
        column, spark_schema(),
        {"mode": "PERMISSIVE", "allowSingleQuotes": "false",
         "columnNameOfCorruptRecord": "_corrupt_record"},
    )


def _lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """One row per line: file, blk, rid, value (the same ids on every call)."""
    from pyspark.sql import functions as F

    return spark.read.text([_hadoop_path(p) for p in files]).select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("blk"),
        F.monotonically_increasing_id().alias("rid"),
        "value",
    )


def _condense(lines: DataFrame) -> DataFrame:
    """The one pass over the text (see the module docstring): parse, validate, and
    aggregate clean light lines per (block, protocol, process, event, kind) while every
    clean heavy line and every odd line stays a group of its own (key ``hrid``)."""
    from pyspark.sql import functions as F

    parsed = lines.select("file", "blk", "rid", F.col("value").alias("raw"),
                          _json("value").alias("j"))
    clean = F.col("clean")
    j = F.col("j")
    event = j["event"]
    heavy = clean & event.isin(*HEAVY_EVENTS)

    def kept(name: str) -> Column:
        users = [e for e, names in schema.KEPT.items() if name in names and e in HEAVY_EVENTS]
        value = F.map_entries(j[name]) if name == "vc" else j[name]  # maps cannot be keys
        return F.when(heavy & event.isin(users), value).alias(name)

    keys = parsed.select("file", "blk", "rid", "raw", "j",
                         _clean_predicate(F.col("raw"), j).alias("clean")).select(
        "file", "blk", "rid", "clean",
        *[F.when(clean, j[name]).alias(name)
          for name in ("protocol", "process", "event", "kind", "meta_bytes")],
        F.when(heavy | ~clean, F.col("rid")).alias("hrid"),
        F.when(heavy, j["ts"]).alias("ts"),
        *[kept(name) for name in ("msg", "sender", "dests", "vc")],
        F.when(~clean, F.col("raw")).alias("raw"),
    )
    return keys.groupBy(
        "file", "blk", "clean", "protocol", "process", "event", "kind", "hrid", "ts", "msg",
        "sender", "dests", "vc", "raw",
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("meta_bytes").alias("bytes"),
        F.min("rid").alias("first_rid"),
    )


def _line_numbers(blocks: dict[tuple[str, int], tuple[int, int]],
                  rows: list[Any]) -> dict[tuple[str, int, int], int]:
    """1-based line numbers of ``rows`` (each with file, blk, rid) from the per-block
    (lines, first id) of pass 1."""
    before: dict[tuple[str, int], int] = {}
    for file in {key[0] for key in blocks}:
        total = 0
        for blk in sorted(b for f, b in blocks if f == file):
            before[(file, blk)] = total
            total += blocks[(file, blk)][0]
    return {
        (row["file"], row["blk"], row["rid"]):
            before[(row["file"], row["blk"])] + row["rid"] - blocks[(row["file"], row["blk"])][1]
            + 1
        for row in rows
    }


def _sample(row: Any, numbers: dict[tuple[str, int, int], int]) -> dict[str, Any]:
    raw = row["raw"]
    return {
        "file": display_name(row["file"]),
        "line": numbers[(row["file"], row["blk"], row["rid"])],
        "reason": row["reason"],
        "text": raw if len(raw) <= 200 else raw[:200] + "...",
    }


@dataclass
class _Checked:
    """What the Python validator said about the lines the fast path did not vouch for."""

    statuses: dict[str, int]
    samples: list[dict[str, Any]]
    #: (protocol, process, event, kind, n, bytes) rows of the valid ones
    counts: list[dict[str, Any]]
    #: their heavy events (columns EVENT_COLUMNS), or None when there are none
    heavy: DataFrame | None
    cached: list[DataFrame] = field(default_factory=list)


def _validate_on_driver(spark: SparkSession, odd: list[Any],
                        blocks: dict[tuple[str, int], tuple[int, int]],
                        samples: int) -> _Checked:
    """The Python validator on the few odd lines, collected to the driver."""
    statuses: dict[str, int] = {}
    malformed: list[tuple[Any, str | None]] = []
    counts: dict[tuple, list[int]] = {}
    heavy: list[tuple] = []
    for row in odd:
        status, reason, record = schema.parse_line(row["raw"] or "")
        statuses[status] = statuses.get(status, 0) + 1
        if status == schema.MALFORMED:
            malformed.append((row, reason))
        if record is None:
            continue
        key = (record["protocol"], record["process"], record["event"], record["kind"])
        entry = counts.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += record["meta_bytes"] or 0
        if record["event"] in HEAVY_EVENTS:
            kept = schema.KEPT.get(record["event"], ())
            heavy.append((row["file"], row["blk"], row["rid"]) + tuple(
                record[name] if name in schema.ALWAYS or name in kept else None
                for name in schema.FIELDS))
    malformed.sort(key=lambda item: (item[0]["file"], item[0]["blk"], item[0]["rid"]))
    chosen = malformed[:max(0, samples)]
    numbers = _line_numbers(blocks, [row for row, _ in chosen])
    sample_rows = [_sample({**row.asDict(), "reason": reason}, numbers)
                   for row, reason in chosen]
    count_rows = [{"protocol": k[0], "process": k[1], "event": k[2], "kind": k[3],
                   "n": v[0], "bytes": v[1]} for k, v in counts.items()]
    frame = None
    if heavy:
        from pyspark.sql import types as T

        columns = [T.StructField("file", T.StringType()), T.StructField("blk", T.LongType()),
                   T.StructField("rid", T.LongType())] + list(spark_schema().fields[:-1])
        frame = spark.createDataFrame(heavy, T.StructType(columns))
    return _Checked(statuses, sample_rows, count_rows, frame)


def _validate_in_spark(odd: DataFrame, blocks: dict[tuple[str, int], tuple[int, int]],
                       samples: int) -> _Checked:
    """The Python validator as a UDF, for many odd lines."""
    from pyspark.sql import functions as F

    validate = F.udf(parse_for_spark, _parsed_type(), useArrow=False)
    checked = (
        odd.select("file", "blk", "rid", "raw", validate("raw").alias("p"))
        .select("file", "blk", "rid", "raw", "p.*")
        .persist()
    )
    statuses = {row["status"]: row["count"] for row in checked.groupBy("status").count()
                .collect()}
    sample_rows: list[dict[str, Any]] = []
    if statuses.get(schema.MALFORMED) and samples > 0:
        rows = (checked.filter(F.col("status") == schema.MALFORMED)
                .orderBy("file", "blk", "rid").limit(samples).collect())
        numbers = _line_numbers(blocks, rows)
        sample_rows = [_sample(row, numbers) for row in rows]
    valid = checked.filter(F.col("status") == schema.OK)
    count_rows = [row.asDict() for row in valid.groupBy("protocol", "process", "event", "kind")
                  .agg(F.count(F.lit(1)).alias("n"), F.sum("meta_bytes").alias("bytes"))
                  .collect()]
    heavy = valid.filter(F.col("event").isin(*HEAVY_EVENTS)).select(
        "file", "blk", "rid",
        *[_kept(F.col("event"), F.col(name), name) for name in schema.FIELDS])
    return _Checked(statuses, sample_rows, count_rows, heavy, [checked])


def _add_counts(counts: dict[tuple, list[int]], rows: list[Any]) -> None:
    for row in rows:
        key = (row["protocol"], row["process"], row["event"], row["kind"])
        entry = counts.setdefault(key, [0, 0])
        entry[0] += row["n"]
        entry[1] += row["bytes"] or 0


def load(
    spark: SparkSession,
    trace_dir: str | Path,
    samples: int = 5,
    progress: Progress | None = None,
) -> Loaded:
    """Parse every trace file of ``trace_dir`` (see the module docstring).

    Raises :class:`TraceDirError` for a missing or empty directory.
    """
    from pyspark.sql import functions as F

    say = progress or (lambda message: None)
    started = time.monotonic()
    files = list_trace_files(trace_dir)
    size = sum(p.stat().st_size for p in files)
    say(f"reading {len(files)} files ({size / 1e6:,.1f} MB)")
    log.info("reading %d trace files (%d bytes) from %s", len(files), size, trace_dir)

    condensed = _condense(_lines(spark, files)).persist()
    cached = [condensed]
    summary = condensed.groupBy("file", "blk", "protocol", "process", "event", "kind").agg(
        F.sum("n").alias("n"), F.sum("bytes").alias("bytes"),
        F.min("first_rid").alias("first_rid"),
        F.sum(F.when(~F.col("clean"), F.col("n"))).alias("odd"),
    ).collect()
    blocks: dict[tuple[str, int], tuple[int, int]] = {}
    counts: dict[tuple, list[int]] = {}
    suspicious = 0
    for row in summary:
        block = (row["file"], row["blk"])
        n, first = blocks.get(block, (0, row["first_rid"]))
        blocks[block] = (n + row["n"], min(first, row["first_rid"]))
        if row["odd"]:  # odd lines have no protocol, process, event or kind
            suspicious += row["odd"]
        else:
            _add_counts(counts, [row])
    lines = sum(n for n, _ in blocks.values())
    say(f"parsed {lines:,} lines ({time.monotonic() - started:.1f} s); "
        f"{suspicious:,} need a closer look")

    types = dict(zip(schema.FIELDS, spark_schema().fields, strict=False))
    events = condensed.filter(F.col("clean") & F.col("hrid").isNotNull()).select(*[
        F.col("hrid").alias("rid") if name == "rid"
        else F.map_from_entries("vc").alias("vc") if name == "vc"
        else F.lit(None).cast(types[name].dataType).alias(name) if name in ("kind", "meta_bytes")
        else F.col(name)
        for name in EVENT_COLUMNS
    ])
    blank = malformed = 0
    sample_rows: list[dict[str, Any]] = []
    if suspicious:
        odd = condensed.filter(~F.col("clean")).select(
            "file", "blk", F.col("hrid").alias("rid"), "raw")
        if suspicious <= DRIVER_VALIDATION_LIMIT:
            checked = _validate_on_driver(spark, odd.collect(), blocks, samples)
        else:
            checked = _validate_in_spark(odd, blocks, samples)
        cached += checked.cached
        blank = checked.statuses.get(schema.BLANK, 0)
        malformed = checked.statuses.get(schema.MALFORMED, 0)
        sample_rows = checked.samples
        _add_counts(counts, checked.counts)
        if checked.heavy is not None:
            events = events.unionByName(checked.heavy)
        if malformed:
            log.warning("%d malformed lines in %s (first: %s)", malformed, trace_dir,
                        ", ".join(f"{s['file']}:{s['line']}" for s in sample_rows))
    seconds = time.monotonic() - started
    say(f"{lines - blank - malformed:,} events, {malformed:,} malformed lines, "
        f"{blank:,} blank ({seconds:.1f} s)")
    count_rows = [{"protocol": k[0], "process": k[1], "event": k[2], "kind": k[3],
                   "n": v[0], "bytes": v[1]} for k, v in sorted(counts.items(), key=str)]
    return Loaded(events, count_rows, files, lines, blank, malformed, sample_rows, seconds,
                  cached)
