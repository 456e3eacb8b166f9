"""Read a trace directory with one of two loaders (docs/analysis.md, "How the analysis
works"): ``workers``, one Spark task per chunk parsing its bytes in a Python worker
(:mod:`trace_analysis.chunks`); or ``native``, two passes of Spark's JSON reader, lines
identified by file, block start and a ``monotonically_increasing_id``."""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trace_analysis.chunks as chunks_mod
import trace_analysis.schema as schema
from trace_analysis.loaded import (
    EVENT_COLUMNS,
    HEAVY_EVENTS,
    LOADERS,
    Loaded,
    RemoteFile,
    TraceDirError,
    add_counts,
    list_remote_trace_files,
    list_trace_files,
    local_path,
    malformed_samples,
    scheme_of,
)
from trace_analysis.send_index import send_table_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

_GLOB_CHARS = set("\\{}[]*?^")


def _hadoop_path(path: Path | RemoteFile) -> str:
    """A path Spark will not expand as a glob pattern."""
    text = path.uri if isinstance(path, RemoteFile) else str(path.resolve())
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in text)


def choose_loader(trace_dir: str | Path, loader: str | None) -> str:
    """``loader``, or for None the one for ``trace_dir`` (``workers`` for a local path or
    ``file://``, else ``native``); raises :class:`TraceDirError` for ``workers`` and a
    location its Python cannot open."""
    scheme = scheme_of(trace_dir)
    if loader is None:
        return LOADERS[0] if scheme in (None, "file") else "native"
    if loader not in LOADERS:
        raise ValueError(f"unknown loader {loader!r} (choose from {', '.join(LOADERS)})")
    if loader == "workers" and scheme not in (None, "file"):
        raise TraceDirError(
            f"the workers loader opens trace files with Python on the workers, which "
            f"cannot read {scheme}:// ({trace_dir}); use --loader native, which reads them "
            "through Spark's file systems")
    return loader


def _struct(first: tuple[str, ...] = (), last: tuple[str, ...] = ()) -> Any:
    """The analyzed fields as a Spark struct, between string fields ``first`` and ``last``
    (the ``from_json`` schema ends with ``_corrupt_record``)."""
    from pyspark.sql import types as T

    types = {"ts": T.DoubleType(), "dests": T.ArrayType(T.StringType()),
             "vc": T.MapType(T.StringType(), T.LongType()), "meta_bytes": T.LongType()}
    names = [*first, *schema.FIELDS, *last]
    return T.StructType([T.StructField(name, types.get(name, T.StringType()))
                         for name in names])


def parse_for_spark(raw: str | None) -> tuple:
    """The validator as a Spark UDF: (status, reason, *FIELDS)."""
    status, reason, record = schema.parse_line(raw or "")
    if record is None:
        return (status, reason) + (None,) * len(schema.FIELDS)
    return (status, reason) + tuple(record[name] for name in schema.FIELDS)


def _looks_coerced(value: Column) -> Column:
    """True when ``value`` could be Spark's text of a non-string JSON value (a number,
    ``true``/``false``, an object or an array) rather than a JSON string."""
    from pyspark.sql import functions as F

    return F.substring(value, 1, 1).isin(*"-0123456789{[") | value.isin("true", "false")


def _clean_predicate(raw: Column, j: Column) -> Column:
    """True only for lines the Python validator would accept with exactly the values
    Spark parsed (Spark turns ``5`` into ``"5"``: where a value could be such a
    conversion, the text is searched for the string)."""
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
    # a string field is absent, cannot be a coerced non-string, or shows as a JSON string
    conditions += [j[name].isNull() | ~_looks_coerced(j[name]) | raw.contains(f'"{name}":"')
                   | raw.contains(f'"{name}": "') for name in schema.STRING_FIELDS]
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
        required = functools.reduce(operator.and_, [j[name].isNotNull() for name in names])
        conditions.append((event != event_name) | required)
    conditions.append(
        (event != "send") | (F.coalesce(j["vc"][j["sender"]], F.lit(0)) >= 1)
    )
    predicate = functools.reduce(
        operator.and_, [F.coalesce(condition, F.lit(False)) for condition in conditions[1:]],
        conditions[0])
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
        column, _struct(last=("_corrupt_record",)),
        {"mode": "PERMISSIVE", "allowSingleQuotes": "false",
         "columnNameOfCorruptRecord": "_corrupt_record"},
    )


def _lines(spark: SparkSession, files: list[Path] | list[RemoteFile]) -> DataFrame:
    """One row per line: file, blk, rid, value (the same ids on every call)."""
    from pyspark.sql import functions as F

    return spark.read.text([_hadoop_path(p) for p in files]).select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("blk"),
        F.monotonically_increasing_id().alias("rid"),
        "value",
    )


def _summarize(lines: DataFrame) -> DataFrame:
    """Pass 1: per-block counts of clean lines, and every other line on its own."""
    from pyspark.sql import functions as F

    parsed = lines.select("file", "blk", "rid", F.col("value").alias("raw"),
                          _json("value").alias("j"))
    clean = _clean_predicate(F.col("raw"), F.col("j"))
    step = parsed.select("file", "blk", "rid", "raw", clean.alias("clean"),
                         *[F.col("j")[name].alias(name)
                           for name in ("protocol", "process", "event", "kind", "meta_bytes")])
    odd = ~F.col("clean")
    return step.groupBy(
        "file", "blk", "clean", "protocol", "process", "event", "kind",
        F.when(odd, F.col("rid")).alias("srid"), F.when(odd, F.col("raw")).alias("sraw"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("meta_bytes").alias("bytes"),
        F.min("rid").alias("first_rid"),
    )


def _heavy_rows(lines: DataFrame, prefilter: bool) -> DataFrame:
    """Pass 2: the parsed send, deliver, buffer and unbuffer lines (and, with
    ``prefilter``, few others: ``"event"`` found in the first 160 characters)."""
    from pyspark.sql import functions as F

    if prefilter:
        head = F.substring(F.col("value"), 1, 160)
        at = F.locate('"event":"', head)
        name = F.substring_index(F.substring(head, at + 9, 24), '"', 1)
        lines = lines.filter((at == 0) | name.isin(*HEAVY_EVENTS))
    parsed = lines.select("file", "blk", "rid", _json("value").alias("j"))
    event = F.col("j.event")
    return parsed.select("file", "blk", "rid",
                         *[_kept(event, F.col("j")[name], name) for name in schema.FIELDS])


def _check_suspicious(summary: DataFrame, blocks: dict[tuple[str, int], tuple[int, int]],
                      samples: int) -> tuple[DataFrame, dict[str, int], list[dict[str, Any]]]:
    """Run the Python validator on the lines the fast path did not vouch for."""
    from pyspark.sql import functions as F

    validate = F.udf(parse_for_spark, _struct(first=("status", "reason")), useArrow=False)
    checked = (
        summary.filter(~F.col("clean"))
        .select("file", "blk", F.col("srid").alias("rid"), F.col("sraw").alias("raw"))
        .select("file", "blk", "rid", "raw", validate("raw").alias("p"))
        .select("file", "blk", "rid", "raw", "p.*")
        .persist()
    )
    statuses = {row["status"]: row["count"] for row in checked.groupBy("status").count()
                .collect()}
    sample_rows: list[dict[str, Any]] = []
    if statuses.get(schema.MALFORMED) and samples > 0:
        rows = (checked.filter(F.col("status") == schema.MALFORMED)
                .orderBy("file", "blk", "rid").limit(samples).collect())
        sample_rows = malformed_samples(blocks, rows)
    return checked, statuses, sample_rows


def load(spark: SparkSession, trace_dir: str | Path, samples: int = 5,
         say: Callable[[str], None] = lambda message: None, loader: str | None = None
         ) -> Loaded:
    """Parse every trace file of ``trace_dir`` (a local directory, or a URI) with
    ``loader`` (None: :func:`choose_loader`); raises :class:`TraceDirError` for a missing
    or empty directory."""
    loader = choose_loader(trace_dir, loader)
    started = time.monotonic()
    files: list[Path] | list[RemoteFile]
    if loader == "native" and scheme_of(trace_dir) is not None:
        files = list_remote_trace_files(spark, str(trace_dir))
        size = sum(f.size for f in files)
    else:
        files = list_trace_files(local_path(trace_dir))
        size = sum(p.stat().st_size for p in files)
    say(f"reading {len(files)} files ({size / 1e6:,.1f} MB)")
    log.info("reading %d trace files (%d bytes) from %s", len(files), size, trace_dir)
    if loader == "workers":
        loaded = load_in_workers(spark, files, samples, say)  # type: ignore[arg-type]
    else:
        loaded = _load_native(spark, files, samples, say)
    if loaded.malformed:
        log.warning("%d malformed lines (first: %s)", loaded.malformed,
                    ", ".join(f"{s['file']}:{s['line']}" for s in loaded.malformed_samples))
    loaded.seconds = time.monotonic() - started
    say(f"{loaded.lines - loaded.blank_lines - loaded.malformed:,} events, "
        f"{loaded.malformed:,} malformed lines, {loaded.blank_lines:,} blank "
        f"({loaded.seconds:.1f} s)")
    return loaded


def _load_native(spark: SparkSession, files: list[Path] | list[RemoteFile], samples: int,
                 say: Callable[[str], None]) -> Loaded:
    from pyspark.sql import functions as F

    started = time.monotonic()
    lines_frame = _lines(spark, files)

    summary = _summarize(lines_frame).persist()
    cached = [summary]
    blocks: dict[tuple[str, int], tuple[int, int]] = {
        (row["file"], row["blk"]): (row["n"], row["first"])
        for row in summary.groupBy("file", "blk")
        .agg(F.sum("n").alias("n"), F.min("first_rid").alias("first")).collect()
    }
    lines = sum(n for n, _ in blocks.values())
    clean_rows = summary.filter("clean").groupBy("protocol", "process", "event", "kind").agg(
        F.sum("n").alias("n"), F.sum("bytes").alias("bytes")).collect()
    counts: dict[tuple, list[int]] = {}
    add_counts(counts, clean_rows)
    suspicious = lines - sum(row["n"] for row in clean_rows)
    say(f"pass 1: {lines:,} lines ({time.monotonic() - started:.1f} s); "
        f"{suspicious:,} need a closer look")

    blank = malformed = 0
    sample_rows: list[dict[str, Any]] = []
    fixed = None
    if suspicious:
        checked, statuses, sample_rows = _check_suspicious(summary, blocks, samples)
        cached.append(checked)
        blank = statuses.get(schema.BLANK, 0)
        malformed = statuses.get(schema.MALFORMED, 0)
        valid = checked.filter(F.col("status") == schema.OK)
        add_counts(counts, valid.groupBy("protocol", "process", "event", "kind").agg(
            F.count(F.lit(1)).alias("n"), F.sum("meta_bytes").alias("bytes")).collect())
        fixed = valid.filter(F.col("event").isin(*HEAVY_EVENTS)).select(
            "file", "blk", "rid",
            *[_kept(F.col("event"), F.col(name), name) for name in schema.FIELDS])

    expected = {event: sum(row["n"] for row in clean_rows if row["event"] == event)
                for event in HEAVY_EVENTS}
    heavy: DataFrame | None = None
    for prefilter in (True, False):
        candidate = _heavy_rows(lines_frame, prefilter)
        if suspicious:
            candidate = candidate.join(
                summary.filter(~F.col("clean")).select(F.col("srid").alias("rid")), "rid",
                "left_anti")
        candidate = candidate.persist()
        found = {row["event"]: row["count"] for row in candidate.groupBy("event").count()
                 .collect() if row["event"] in HEAVY_EVENTS}
        if all(found.get(event, 0) == n for event, n in expected.items()) or not prefilter:
            if found != {e: n for e, n in expected.items() if n}:
                log.warning("the trace files changed while they were read: pass 2 found %s, "
                            "pass 1 counted %s", found, expected)
            heavy = candidate
            break
        candidate.unpersist()
        log.info("pass 2 look-up missed events (%s, expected %s); parsing every line",
                 found, expected)
    assert heavy is not None  # the loop always ends with the unfiltered pass
    cached.append(heavy)
    events = heavy.filter(F.col("event").isin(*HEAVY_EVENTS)).select(*EVENT_COLUMNS)
    if fixed is not None:
        events = events.unionByName(fixed)
    return Loaded(events, counts, list(files), lines, blank, malformed, sample_rows, cached)


#: partitions of the cached events per core of the Spark application
SCAN_PARTITIONS_PER_CORE = 4


def load_in_workers(spark: SparkSession, files: list[Path], samples: int,
                    say: Callable[[str], None],
                    chunk_bytes: int = chunks_mod.CHUNK_BYTES) -> Loaded:
    """Parse ``files`` (already listed and checked) in Python workers."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    chunks = chunks_mod.plan_chunks(files, chunk_bytes)
    keep = max(0, samples)

    def parse(batches: Iterator[Any]) -> Iterator[Any]:
        return chunks_mod.parse_partitions(batches, chunks, keep)

    # one task per chunk while parsing (progress, balance); the cached result is read by
    # every later scan, where a hundred small partitions would cost a task each
    partitions = max(1, spark.sparkContext.defaultParallelism) * SCAN_PARTITIONS_PER_CORE
    parsed = (spark.range(0, len(chunks), 1, len(chunks))
              .mapInArrow(parse, ", ".join(f"{name} {kind}"
                                           for name, kind in chunks_mod.OUTPUT_COLUMNS))
              .coalesce(min(len(chunks), partitions))
              .persist())
    say(f"parsing {len(chunks)} chunks in Python workers")
    with task_progress(spark, say, "parsing"):
        rows = parsed.filter(F.col("rec") != "e").drop("ts", "dests", "vc").collect()

    counts: dict[tuple, list[int]] = {}
    blocks: dict[tuple[str, int], tuple[int, int]] = {}
    bad_rows = []
    send_tables = []
    lines = blank = malformed = 0
    for row in rows:
        if row["rec"] == "c":
            add_counts(counts, [row])
        elif row["rec"] == "s":
            send_tables.append(send_table_of(row["sends"]))
        elif row["rec"] == "k":
            blocks[(row["file"], row["blk"])] = (row["n"], 0)
            lines += row["n"]
            blank += row["blank"]
            malformed += row["bad"]
        else:
            bad_rows.append(row)
    bad_rows.sort(key=lambda r: (r["file"], r["blk"], r["rid"]))
    samples = malformed_samples(blocks, bad_rows[:keep])
    events = parsed.filter(F.col("rec") == "e").select(*EVENT_COLUMNS)
    sends = pa.concat_tables(send_tables) if send_tables else None
    return Loaded(events, counts, list(files), lines, blank, malformed, samples, [parsed], sends)


@contextlib.contextmanager
def task_progress(spark: Any, say: Callable[[str], None], label: str) -> Iterator[None]:
    """Says ``{label}: 12/108 tasks`` every 3 seconds while the block runs."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(3.0):
            try:
                stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:  # the JVM may be shutting down; progress is best effort
                log.debug("progress poll failed", exc_info=True)
                return
            stages = [info for info in stages if info is not None]
            total = sum(info.numTasks for info in stages)
            if total:
                say(f"{label}: {sum(info.numCompletedTasks for info in stages)}/{total} tasks")

    thread = threading.Thread(target=run, name="spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
