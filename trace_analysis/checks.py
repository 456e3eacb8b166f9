"""Causal delivery checks in Spark: causal and FIFO violations, undelivered, duplicates.

Definitions (DESIGN.md): m → m′ iff vc(send m) < vc(send m′). A causal violation is a
triple (p, m, m′) with m → m′, both delivered at p and m′ delivered first; a FIFO
violation is one where m and m′ have the same sender. Only the first delivery of a
message at a process takes part (later ones are counted as duplicates); the delivery
order at p is the line order of p's deliver events.

Method (linear in the number of events; no pair of deliveries is ever joined):

1. Sends are keyed by message id (the first send record wins; later ones are counted)
   and reduced to what the checks need: the sender, its own clock entry
   ``x = vcsend(m)[sender]`` and the positional vector ``vals[k] = vcsend(m)[s_k]`` over
   the senders s_0 … s_K of the trace. They are few (one per message), so they are
   broadcast to the deliveries: no shuffle of the deliveries for the join.
2. Scaling fact: for the send of m by s, m → m′ iff vcsend(m)[s] <= vcsend(m′)[s]. So the
   first delivery of m at p has a violation iff an earlier delivery m′ at p has
   vcsend(m′)[s] >= vcsend(m)[s]. The deliveries are shuffled once by process (narrow
   rows; the send clocks are attached after the shuffle from the broadcast), and each
   process's deliveries are laid out in numpy (:mod:`trace_analysis.layout`, one
   ``applyInArrow`` group per process): sorted by position in the file, the running
   maximum of every sender column ``vals[k]`` over the earlier deliveries is one
   cumulative maximum, and the delivery is *flagged* when the maximum of its sender's
   column reaches its own ``x``. O(n log n) per process for the sort, O(n × K) for the
   maxima. (Duplicate deliveries come after the first one, so they cannot raise a
   maximum above what the first one did.)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from trace_analysis.counting import count_sorted_rows
from trace_analysis.layout import NO_VALUE, lay_out
from trace_analysis.layout import OUTPUT_DDL as LAYOUT_DDL

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

    def unpersist(self) -> None:
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


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


def _sends(events: DataFrame) -> tuple[DataFrame, list[str], int]:
    """Method step 1: one row per message id; returns (sends, senders, duplicate sends)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    raw = events.filter(F.col("event") == "send")
    stats = (raw.groupBy("msg").agg(F.count(F.lit(1)).alias("c"), F.first("sender").alias("s"))
             .agg(F.sum(F.col("c") - 1).alias("dups"), F.collect_set("s").alias("senders"))
             .first())
    duplicates = int(stats["dups"] or 0)
    senders: list[str] = sorted(stats["senders"] or [])
    if duplicates:
        log.warning("%d send records repeat a message id; the first one is used", duplicates)
        raw = raw.withColumn("copy", F.row_number().over(
            Window.partitionBy("msg").orderBy("file", "blk", "rid"))).filter("copy = 1")
    names = (F.array(*[F.lit(s) for s in senders]) if senders
             else F.array().cast("array<string>"))
    vc = F.col("vc")
    vals = (F.array(*[F.coalesce(vc[s], F.lit(0)) for s in senders]) if senders
            else F.array().cast("array<bigint>"))
    sends = raw.select(
        "msg", "sender",
        (F.array_position(names, F.col("sender")) - 1).cast("int").alias("sidx"),
        vc[F.col("sender")].alias("x"),
        vals.alias("vals"),
        F.array_distinct("dests").alias("dests"),
        F.col("ts").alias("send_ts"), F.col("protocol").alias("send_protocol"),
    )
    return sends, senders, duplicates


def build_tables(events: DataFrame, progress: Progress | None = None) -> Tables:
    """Method steps 1 and 2: sends by message id; deliveries with their send's clock laid
    out per sender, positions, duplicates and flags (both cached)."""
    from pyspark.sql import functions as F

    say = progress or (lambda message: None)
    sends, senders, duplicate_sends = _sends(events)
    sends = sends.persist()
    width = len(senders)
    no_send = (F.array_repeat(F.lit(NO_VALUE).cast("bigint"), width) if width
               else F.array().cast("array<bigint>"))
    joined = (
        events.filter(F.col("event") == "deliver")
        .select(F.col("process").alias("p"), "msg", "ts", "protocol", "file", "blk", "rid")
        .repartition("p")  # shuffle the narrow rows, then attach the broadcast clocks
        .join(F.broadcast(sends), "msg", "left")
        .select("p", "msg", "ts", "protocol", "sender", "sidx", "x", "send_ts",
                "send_protocol",
                F.coalesce(F.array_contains("dests", F.col("p")), F.lit(False))
                .alias("in_dests"),
                F.coalesce("vals", no_send).alias("vals"), "file", "blk", "rid")
    )

    def lay_out_process(table):  # type: ignore[no-untyped-def]
        # no type hints and no functools.partial: PySpark infers the UDF kind from them
        return lay_out(table, width)

    # one group per process, laid out in numpy (positions, copies, running maxima)
    deliveries = joined.groupBy("p").applyInArrow(lay_out_process, LAYOUT_DDL).persist()
    say(f"joined deliveries to their sends ({len(senders)} senders)")
    return Tables(sends, deliveries, senders, duplicate_sends, [sends, deliveries])


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
    queries = spark.createDataFrame(
        [(r["p"], r["pos"], r["sidx"], r["sender"], r["x"], r["msg"], r["protocol"])
         for r in flagged],
        "fp string, fpos long, qidx int, qs string, fx long, fmsg string, fprotocol string")
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
        result.causal_violations += causal
        result.fifo_violations += fifo
        result.violating_deliveries += 1
        counts = result.protocol(row["protocol"])
        counts["causal_violations"] += causal
        counts["fifo_violations"] += fifo
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
    from pyspark.sql import functions as F

    d = tables.deliveries
    pairs = d.filter("flag").select("p", "sidx", "sender").distinct().collect()
    if not pairs:
        return
    spark = d.sparkSession
    pair_frame = spark.createDataFrame(
        [(r["p"], r["sidx"], r["sender"]) for r in pairs], "p string, qidx int, qs string")
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
        result.causal_violations += causal
        result.fifo_violations += fifo
        result.violating_deliveries += 1
        counts = result.protocol(protocol)
        counts["causal_violations"] += causal
        counts["fifo_violations"] += fifo
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
    for row in tables.sends.groupBy("send_protocol").agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.size("dests")).alias("dests")).collect():
        result.messages += row["n"]
        result.protocol(row["send_protocol"])["messages"] += row["n"]
        expected[row["send_protocol"]] = int(row["dests"] or 0)

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
