"""The checks in Spark (definitions: docs/trace_schema.md; the method's steps 1 to 4:
docs/analysis.md, "How the analysis works")."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trace_analysis.layout import OUTPUT_DDL as LAYOUT_DDL
from trace_analysis.layout import SendLookup, lay_out, worker_lookup
from trace_analysis.send_index import RAW_COLUMNS as RAW_SEND_COLUMNS
from trace_analysis.send_index import SEND_DDL, SendIndex, index_sends, send_table_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: how many undelivered (message, destination) pairs are listed
UNDELIVERED_SAMPLES = 20


@dataclass
class Tables:
    """The DataFrames the checks and the metrics share (cached): ``sends`` (one row per
    message, :data:`SEND_DDL`) and ``deliveries`` (:data:`LAYOUT_DDL`); the send index
    itself, and its table as broadcast to the workers."""

    sends: DataFrame
    deliveries: DataFrame
    index: SendIndex
    shipped: Any

    def unpersist(self) -> None:
        self.sends.unpersist()
        self.deliveries.unpersist()
        self.shipped.destroy()


@dataclass
class CheckResult:
    """What the checks found; ``triples`` holds at most the requested number."""

    messages: int = 0
    deliveries: int = 0
    duplicates: int = 0
    duplicate_sends: int = 0
    orphan_deliveries: int = 0
    unexpected_deliveries: int = 0
    undelivered: int = 0
    causal_violations: int = 0
    fifo_violations: int = 0
    violating_deliveries: int = 0
    per_protocol: dict[str, dict[str, int]] = field(default_factory=dict)
    triples: list[dict[str, Any]] = field(default_factory=list)
    triples_complete: bool = True
    undelivered_samples: list[tuple[str, str]] = field(default_factory=list)

    def protocol(self, name: str) -> dict[str, int]:
        return self.per_protocol.setdefault(name, dict.fromkeys(
            ("causal_violations", "fifo_violations", "undelivered", "duplicates", "deliveries",
             "messages"), 0))


def build_tables(events: DataFrame, say: Callable[[str], None], violations_limit: int,
                 raw_sends: Any) -> Tables:
    """Method steps 1 to 4: the send index and the laid-out deliveries (listing at most
    ``violations_limit`` triples). ``raw_sends``: the send events as Arrow, when the
    loader collected them."""
    from pyspark.sql import functions as F

    if raw_sends is None:
        raw_sends = (events.filter(F.col("event") == "send").select(*RAW_SEND_COLUMNS)
                     .toArrow())
    index = index_sends(raw_sends)
    if index.duplicate_sends:
        log.warning("%d send records repeat a message id; the first one is used",
                    index.duplicate_sends)
    spark = events.sparkSession
    # a few partitions: the table is small, and each partition costs a task per scan
    partitions = max(1, spark.sparkContext.defaultParallelism)
    sends = spark.createDataFrame(index.table, SEND_DDL).coalesce(partitions).persist()
    shipped = spark.sparkContext.broadcast(send_table_bytes(index.table))
    token = uuid.uuid4().hex
    budget = max(0, violations_limit)

    def lay_out_process(table):  # type: ignore[no-untyped-def]
        # no type hints and no functools.partial: PySpark infers the UDF kind from them
        return lay_out(table, worker_lookup(token, shipped), budget, UNDELIVERED_SAMPLES)

    deliveries = (
        events.filter(F.col("event") == "deliver")
        .select(F.col("process").alias("p"), "msg", "ts", "protocol", "file", "blk", "rid")
        .groupBy("p").applyInArrow(lay_out_process, LAYOUT_DDL)
        .persist()
    )
    say(f"indexed {index.table.num_rows:,} sends ({len(index.senders)} senders)")
    return Tables(sends, deliveries, index, shipped)


def _undelivered_samples(tables: Tables) -> list[tuple[str, str]]:
    """The smallest missing (message, destination) pairs (method step 4): each
    process's layout lists its smallest, and every message addressed to a process with
    no delivery at all is missing there."""
    import pyarrow.compute as pc

    firsts = tables.deliveries.filter("pos = 1").select("p", "missing_msgs").collect()
    pairs = [(msg, row["p"]) for row in firsts for msg in row["missing_msgs"] or []]
    sends = tables.index.table
    absent = (set(pc.unique(pc.list_flatten(sends.column("dests"))).drop_null().to_pylist())
              - {row["p"] for row in firsts})
    if absent:
        lookup = SendLookup(sends)
        for process in absent:
            pairs += [(msg, process) for msg in
                      lookup.smallest_ids(lookup.addressed_to(process), UNDELIVERED_SAMPLES)]
    return sorted(pairs)[:UNDELIVERED_SAMPLES]


def _flagged_details(tables: Tables, result: CheckResult, limit: int) -> None:
    """Method step 3, on the driver: the flagged deliveries' counts, and their triples
    in process and delivery order, each with its nearest predecessors first, until
    ``limit`` are listed."""
    flagged = (tables.deliveries.filter("flag")
               .select("p", "pos", "msg", "protocol", "sender", "causal", "fifo",
                       "earlier", "earlier_fifo")
               .orderBy("p", "pos").collect())
    budget = max(0, limit)
    triples = []
    for row in flagged:
        result.causal_violations += row["causal"]
        result.fifo_violations += row["fifo"]
        result.violating_deliveries += 1
        counts = result.protocol(row["protocol"])
        counts["causal_violations"] += row["causal"]
        counts["fifo_violations"] += row["fifo"]
        earlier = row["earlier"] or []
        take = min(len(earlier), budget)
        if not take:
            continue
        for before, same_sender in zip(earlier[len(earlier) - take:],
                                       row["earlier_fifo"][len(earlier) - take:],
                                       strict=True):
            triples.append({"process": row["p"], "delivered_first": before,
                            "delivered_second": row["msg"], "should_be_first": row["msg"],
                            "fifo": same_sender, "sender_of_second": row["sender"]})
        budget -= take
    result.triples = triples
    result.triples_complete = len(triples) == result.causal_violations


def run_checks(tables: Tables, violations_limit: int, say: Callable[[str], None]) -> CheckResult:
    """Every check over ``tables``; at most ``violations_limit`` triples are listed."""
    from pyspark.sql import functions as F

    result = CheckResult(duplicate_sends=tables.index.duplicate_sends)
    expected: dict[str, int] = {}
    for name, (messages, wanted) in tables.index.per_protocol().items():
        result.messages += messages
        result.protocol(name)["messages"] += messages
        expected[name] = wanted

    first = F.col("copy") == 1
    sent = first & F.col("has_send")
    rows = tables.deliveries.groupBy("protocol", "send_protocol").agg(
        F.count_if(first).alias("first"),
        F.count_if(~first).alias("dups"),
        F.count_if(first & ~F.col("has_send")).alias("orphans"),
        F.count_if(sent & ~F.col("in_dests")).alias("unexpected"),
        F.count_if(sent & F.col("in_dests")).alias("reached"),
        F.count_if(F.col("flag")).alias("flagged"),
    ).collect()
    flagged = 0
    for row in rows:
        counts = result.protocol(row["protocol"])
        counts["deliveries"] += row["first"]
        counts["duplicates"] += row["dups"]
        result.deliveries += row["first"]
        result.duplicates += row["dups"]
        result.orphan_deliveries += row["orphans"]
        result.unexpected_deliveries += row["unexpected"]
        flagged += row["flagged"]
        if row["send_protocol"] is not None:
            expected[row["send_protocol"]] = (expected.get(row["send_protocol"], 0)
                                              - row["reached"])
    for name, missing in expected.items():
        result.protocol(name)["undelivered"] = missing
        result.undelivered += missing
    say(f"{result.deliveries:,} first deliveries of {result.messages:,} messages; "
        f"{flagged:,} delivered after something that depends on them")
    if result.undelivered:
        result.undelivered_samples = _undelivered_samples(tables)
    if flagged:
        _flagged_details(tables, result, violations_limit)
    say(f"{result.causal_violations:,} causal violations ({result.fifo_violations:,} FIFO), "
        f"{result.undelivered:,} undelivered, {result.duplicates:,} duplicates")
    if result.orphan_deliveries:
        log.warning("%d deliveries of messages whose send is not in the trace",
                    result.orphan_deliveries)
    return result
