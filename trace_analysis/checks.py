"""Causal delivery checks in Spark: causal and FIFO violations, undelivered, duplicates.

Definitions (docs/trace_schema.md): m → m′ iff vc(send m) < vc(send m′). A causal violation is a
triple (p, m, m′) with m → m′, both delivered at p and m′ delivered first; a FIFO
violation is one where m and m′ have the same sender. Only the first delivery of a
message at a process takes part (later ones are counted as duplicates); the delivery
order at p is the line order of p's deliver events.

Method (linear in the number of events; no pair of deliveries is ever joined):

1. Sends are keyed by message id (the first send record in line order wins; later ones
   are counted) and reduced to what the checks need: the sender, its own clock entry
   ``x = vcsend(m)[sender]`` and the positional vector ``vals[k] = vcsend(m)[s_k]`` over
   the senders s_0 … s_K of the trace. They are few (one per message, a few per cent of
   the events), so they are collected as Arrow and indexed in numpy on the driver
   (:mod:`trace_analysis.send_index`), then broadcast to the Python workers as Arrow IPC
   (and kept as a small DataFrame for the joins of step 3).
2. Scaling fact: for the send of m by s, m → m′ iff vcsend(m)[s] <= vcsend(m′)[s]. So the
   first delivery of m at p has a violation iff an earlier delivery m′ at p has
   vcsend(m′)[s] >= vcsend(m)[s]. The deliveries are shuffled once by process as narrow
   rows, and each process's deliveries are laid out in numpy
   (:mod:`trace_analysis.layout`, one ``applyInArrow`` group per process): each message
   is looked up in the broadcast send index (no K-long arrays travel through the JVM),
   the deliveries are sorted by position in the file, the running maximum of every
   sender column over the earlier deliveries is one cumulative maximum, and the
   delivery is *flagged* when the maximum of its sender's column reaches its own ``x``.
   O(n log n) per process for the sort, O(n × K) for the maxima. (A duplicate delivery
   repeats its first delivery's clock, so it cannot raise a maximum.)
3. Exact counts: with few flagged deliveries (at most :data:`SMALL_FLAGGED`), each is
   joined (broadcast) with the earlier first deliveries at its process and the ones at
   or above its value are counted and listed in the JVM — O(flagged × deliveries).
   With more, only the (process, sender) groups with a flagged delivery are sent to
   Python (``mapPartitions``), where :mod:`trace_analysis.counting` counts for each
   flagged delivery the earlier deliveries at or above its value in O(n log² n), and the
   FIFO ones among them, and lists triples for ``--violations-out``. With correct
   protocols nothing is flagged and this step does not run.
4. Undelivered: each send expects one delivery per distinct destination; the first
   deliveries that are at a destination of their message are counted, and the
   difference is exact. The missing (message, destination) pairs are looked up only for
   a sample of the messages that fall short.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from trace_analysis.counting import count_sorted_rows
from trace_analysis.layout import OUTPUT_DDL as LAYOUT_DDL
from trace_analysis.layout import lay_out, send_table_bytes, worker_lookup
from trace_analysis.send_index import RAW_COLUMNS as RAW_SEND_COLUMNS
from trace_analysis.send_index import SEND_DDL, SendIndex, index_sends

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass
class Tables:
    """Intermediate DataFrames shared by the checks and the metrics (cached).

    ``sends``: msg, sender, sidx, x, vals, dests, send_ts, send_protocol (one per message).
    ``deliveries``: every deliver event with p, msg, ts, protocol, sender, sidx, send_ts,
    send_protocol, ``has_send``, ``in_dests``, ``copy`` (1 for the first delivery of msg
    at p), ``pos`` (position among p's deliveries) and ``flag``.
    """

    sends: DataFrame
    deliveries: DataFrame
    senders: list[str]
    duplicate_sends: int
    cached: list[DataFrame] = field(default_factory=list)
    broadcasts: list[Any] = field(default_factory=list)
    #: protocol -> (messages, expected deliveries), counted when the sends were indexed
    send_counts: dict[str | None, tuple[int, int]] = field(default_factory=dict)

    def unpersist(self) -> None:
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()
        for shipped in self.broadcasts:
            shipped.destroy()
        self.broadcasts.clear()


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
        return self.per_protocol.setdefault(name, {
            "causal_violations": 0, "fifo_violations": 0, "undelivered": 0,
            "duplicates": 0, "deliveries": 0, "messages": 0,
        })

    def add_violating_delivery(self, protocol: str, causal: int, fifo: int) -> None:
        """Count one flagged delivery with its ``causal`` triples, ``fifo`` of them FIFO."""
        self.causal_violations += causal
        self.fifo_violations += fifo
        self.violating_deliveries += 1
        counts = self.protocol(protocol)
        counts["causal_violations"] += causal
        counts["fifo_violations"] += fifo


def _send_index(events: DataFrame) -> SendIndex:
    """Method step 1: the send events collected as Arrow and indexed in numpy."""
    from pyspark.sql import functions as F

    raw = events.filter(F.col("event") == "send").select(*RAW_SEND_COLUMNS).toArrow()
    index = index_sends(raw)
    if index.duplicate_sends:
        log.warning("%d send records repeat a message id; the first one is used",
                    index.duplicate_sends)
    return index


def build_tables(events: DataFrame, progress: Progress | None = None) -> Tables:
    """Method steps 1 and 2: sends by message id; deliveries with their send's clock laid
    out per sender, positions, duplicates and flags (both cached)."""
    from pyspark.sql import functions as F

    say = progress or (lambda message: None)
    index = _send_index(events)
    spark = events.sparkSession
    # a few partitions: the table is small, and each partition costs a task per scan
    partitions = max(1, spark.sparkContext.defaultParallelism)
    sends = spark.createDataFrame(index.table, SEND_DDL).coalesce(partitions).persist()
    shipped = spark.sparkContext.broadcast(send_table_bytes(index.table))
    token = uuid.uuid4().hex

    def lay_out_process(table):  # type: ignore[no-untyped-def]
        # no type hints and no functools.partial: PySpark infers the UDF kind from them
        return lay_out(table, worker_lookup(token, shipped))

    # one group per process, laid out in numpy (sends, positions, copies, running maxima)
    deliveries = (
        events.filter(F.col("event") == "deliver")
        .select(F.col("process").alias("p"), "msg", "ts", "protocol", "file", "blk", "rid")
        .groupBy("p").applyInArrow(lay_out_process, LAYOUT_DDL)
        .persist()
    )
    say(f"indexed {index.table.num_rows:,} sends ({index.width} senders)")
    return Tables(sends, deliveries, index.senders, index.duplicate_sends,
                  [sends, deliveries], [shipped], index.per_protocol())


def _undelivered_samples(tables: Tables, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` missing (message, destination) pairs (method step 4)."""
    from pyspark.sql import functions as F

    d = tables.deliveries
    reached = (d.filter((F.col("copy") == 1) & F.col("has_send") & F.col("in_dests"))
               .groupBy("msg").count())
    short = (
        tables.sends.select("msg", "dests")
        .join(reached, "msg", "left")
        .filter(F.size("dests") > F.coalesce(F.col("count"), F.lit(0)))
        .orderBy("msg").limit(limit).collect()
    )
    if not short:
        return []
    wanted = {row["msg"]: list(row["dests"]) for row in short}
    got: dict[str, set[str]] = {}
    for row in (d.filter((F.col("copy") == 1) & F.col("msg").isin(list(wanted)))
                .select("msg", "p").collect()):
        got.setdefault(row["msg"], set()).add(row["p"])
    pairs = [(msg, p) for msg, dests in wanted.items() for p in dests
             if p not in got.get(msg, set())]
    return sorted(pairs)[:limit]


#: at most this many flagged deliveries are counted with a broadcast join (each against
#: the earlier deliveries at its process: O(flagged x deliveries) comparisons in the JVM);
#: more go through the O(n log^2 n) counting in Python workers
SMALL_FLAGGED = 64


def _exact_counts(tables: Tables, result: CheckResult, limit: int) -> None:
    """Method step 3: exact counts and triples of the flagged deliveries."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    d = tables.deliveries
    flagged = (d.filter("flag").join(F.broadcast(tables.sends.select("msg", "x")), "msg")
               .select("p", "pos", "sidx", "sender", "x", "msg", "protocol")
               .limit(SMALL_FLAGGED + 1).collect())
    if not flagged:
        return
    if len(flagged) > SMALL_FLAGGED:
        _exact_counts_sorted(tables, result, limit)
        return
    spark = d.sparkSession
    # from Arrow: a local relation built in the JVM, no Python worker to start
    queries = spark.createDataFrame(pa.table({
        "fp": pa.array([r["p"] for r in flagged], pa.string()),
        "fpos": pa.array([r["pos"] for r in flagged], pa.int64()),
        "qidx": pa.array([r["sidx"] for r in flagged], pa.int32()),
        "qs": pa.array([r["sender"] for r in flagged], pa.string()),
        "fx": pa.array([r["x"] for r in flagged], pa.int64()),
        "fmsg": pa.array([r["msg"] for r in flagged], pa.string()),
        "fprotocol": pa.array([r["protocol"] for r in flagged], pa.string()),
    }), "fp string, fpos long, qidx int, qs string, fx long, fmsg string, fprotocol string")
    pairs = (
        d.filter(F.col("has_send") & (F.col("copy") == 1))
        .select("p", "pos", "msg", "sender")
        .join(F.broadcast(queries), (F.col("p") == F.col("fp")) & (F.col("pos") < F.col("fpos")))
        .join(F.broadcast(tables.sends.select("msg", "vals")), "msg")
        .filter(F.col("vals")[F.col("qidx")] >= F.col("fx"))
        .select("fp", "fpos", "fmsg", "fprotocol", "qs", "pos", "msg",
                (F.col("sender") == F.col("qs")).alias("fifo"))
        .persist()
    )
    try:
        budget = max(0, limit)
        totals = {(r["fp"], r["fpos"]): (r["causal"], r["fifo"]) for r in pairs.groupBy(
            "fp", "fpos").agg(F.count(F.lit(1)).alias("causal"),
                              F.count_if("fifo").alias("fifo")).collect()}
        listed = (pairs.orderBy("fp", "fpos", F.col("pos").desc()).limit(budget).collect()
                  if budget else [])
    finally:
        pairs.unpersist()
    for row in flagged:
        causal, fifo = totals.get((row["p"], row["pos"]), (0, 0))
        result.add_violating_delivery(row["protocol"], causal, fifo)
    listed.sort(key=lambda r: (r["fp"], r["fpos"], r["pos"]))
    result.triples = [
        {"process": r["fp"], "delivered_first": r["msg"], "delivered_second": r["fmsg"],
         "should_be_first": r["fmsg"], "fifo": r["fifo"], "sender_of_second": r["qs"]}
        for r in listed
    ]
    result.triples_complete = len(result.triples) == result.causal_violations


def _exact_counts_sorted(tables: Tables, result: CheckResult, limit: int) -> None:
    """Method step 3 for many flagged deliveries: the (process, sender) groups with a
    flagged delivery, sorted, counted in Python workers (:mod:`trace_analysis.counting`)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    d = tables.deliveries
    pairs = d.filter("flag").select("p", "sidx", "sender").distinct().collect()
    if not pairs:
        return
    spark = d.sparkSession
    pair_frame = spark.createDataFrame(pa.table({
        "p": pa.array([r["p"] for r in pairs], pa.string()),
        "qidx": pa.array([r["sidx"] for r in pairs], pa.int32()),
        "qs": pa.array([r["sender"] for r in pairs], pa.string()),
    }), "p string, qidx int, qs string")
    groups = (
        d.filter(F.col("has_send") & (F.col("copy") == 1))
        .join(F.broadcast(pair_frame), "p")
        .join(F.broadcast(tables.sends.select("msg", "vals")), "msg")
        .select(
            "p", "qs", "pos",
            F.col("vals")[F.col("qidx")].alias("a"),
            (F.col("sender") == F.col("qs")).alias("from_s"),
            (F.col("flag") & (F.col("sender") == F.col("qs"))).alias("query"),
            "msg", "protocol",
        )
        .repartition("p", "qs")
        .sortWithinPartitions("p", "qs", "pos")
    )
    budget = max(0, limit)
    rows = groups.rdd.mapPartitions(partial(count_sorted_rows, budget=budget))
    listed: list[tuple[str, int, str, str, bool, str]] = []
    for p, s, pos, msg, protocol, causal, fifo, triples in rows.collect():
        result.add_violating_delivery(protocol, causal, fifo)
        for earlier, same_sender in triples:
            listed.append((p, pos, earlier, msg, same_sender, s))
    listed.sort(key=lambda t: (t[0], t[1]))
    result.triples = [
        {"process": p, "delivered_first": earlier, "delivered_second": msg,
         "should_be_first": msg, "fifo": same_sender, "sender_of_second": s}
        for p, _, earlier, msg, same_sender, s in listed[:budget]
    ]
    result.triples_complete = len(result.triples) == result.causal_violations


def run_checks(
    tables: Tables,
    violations_limit: int = 100_000,
    undelivered_samples: int = 20,
    progress: Progress | None = None,
) -> CheckResult:
    """Every check over ``tables``; at most ``violations_limit`` triples are listed."""
    from pyspark.sql import functions as F

    say = progress or (lambda message: None)
    result = CheckResult(duplicate_sends=tables.duplicate_sends)
    expected: dict[str, int] = {}
    for name, (messages, wanted) in tables.send_counts.items():
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
    if result.undelivered and undelivered_samples > 0:
        result.undelivered_samples = _undelivered_samples(tables, undelivered_samples)
    if flagged:
        _exact_counts(tables, result, violations_limit)
    say(f"{result.causal_violations:,} causal violations ({result.fifo_violations:,} FIFO), "
        f"{result.undelivered:,} undelivered, {result.duplicates:,} duplicates")
    if result.orphan_deliveries:
        log.warning("%d deliveries of messages whose send is not in the trace",
                    result.orphan_deliveries)
    return result
