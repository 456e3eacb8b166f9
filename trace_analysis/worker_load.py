"""The default loader: one Spark task per chunk (``mapInArrow`` over the chunk numbers)
reads and parses its bytes in a Python worker (:mod:`trace_analysis.chunks`); the result
is cached, its summary rows collected. Every executor must see the files at one path."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trace_analysis.chunks as chunks_mod
from trace_analysis.loaded import EVENT_COLUMNS, Loaded, add_counts, finished, malformed_samples
from trace_analysis.progress import task_progress
from trace_analysis.send_index import send_table_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: partitions of the cached events per core of the Spark application
SCAN_PARTITIONS_PER_CORE = 4


def load_in_workers(spark: SparkSession, files: list[Path], samples: int,
                    say: Callable[[str], None],
                    chunk_bytes: int = chunks_mod.CHUNK_BYTES) -> Loaded:
    """Parse ``files`` (already listed and checked) in Python workers."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    chunks = chunks_mod.plan_chunks(files, chunk_bytes)
    keep = max(0, samples)

    def parse(batches: Iterator[Any]) -> Iterator[Any]:
        return chunks_mod.parse_partitions(batches, chunks, keep)

    # one task per chunk while parsing (progress, balance); the cached result is read by
    # every later scan, where a hundred small partitions would cost a task each
    partitions = max(1, spark.sparkContext.defaultParallelism) * SCAN_PARTITIONS_PER_CORE
    parsed = (spark.range(0, len(chunks), 1, len(chunks))
              .mapInArrow(parse, chunks_mod.output_ddl())
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
    sends = None
    if send_tables:
        import pyarrow as pa

        sends = pa.concat_tables(send_tables)
    return finished(events, counts, files, lines, blank, malformed, samples, started, say,
                    [parsed], sends)
