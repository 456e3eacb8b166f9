"""Performance metrics per protocol and overall (key :data:`OVERALL`): latency, time
buffered, metadata and control traffic per application send, event counts per process."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PERCENTILES = (0.5, 0.95, 0.99)
OVERALL = None  # the key of the figures over all protocols
#: up to this many latencies are collected and their percentiles computed in numpy,
#: several times faster than Spark's exact ``percentile``; more stay in Spark
LOCAL_PERCENTILE_ROWS = 20_000_000


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _distribution(row: Any) -> dict[str, float | None]:
    values = row["pct"] or [None] * len(PERCENTILES)
    out = {f"p{int(q * 100)}": _rounded(v) for q, v in zip(PERCENTILES, values, strict=True)}
    return {**out, "mean": _rounded(row["mean"]), "max": _rounded(row["max"])}


def _add_overall(rows: dict[str | None, Any], overall: Callable[[], Any]) -> None:
    """Add the figures over all protocols: a single protocol's, else ``overall()``."""
    if len(rows) == 1:
        rows[OVERALL] = next(iter(rows.values()))
    elif rows:
        rows[OVERALL] = overall()


def _by_protocol(frame: DataFrame, value: str, extra: list[Any]) -> dict[str | None, Any]:
    """Distribution of ``value`` per protocol, and overall (key None)."""
    from pyspark.sql import functions as F

    def aggregates() -> list[Any]:
        return [F.percentile(F.col(value), list(PERCENTILES)).alias("pct"),
                F.mean(value).alias("mean"), F.max(value).alias("max"),
                F.count(value).alias("n"), *extra]

    rows = {row["protocol"]: row for row in frame.groupBy("protocol").agg(*aggregates())
            .collect()}
    _add_overall(rows, lambda: frame.agg(*aggregates()).first())
    return rows


def _local_by_protocol(frame: DataFrame, value: str) -> dict[str | None, Any]:
    """:func:`_by_protocol` computed in numpy on the collected column ``value``: the
    same figures (numpy's default percentile interpolates linearly between the closest
    ranks, as Spark's exact ``percentile`` does)."""
    import numpy as np
    import pyarrow.compute as pc

    table = frame.select("protocol", value).toArrow()
    values = table.column(value).to_numpy(zero_copy_only=False).astype(float)
    present = pc.is_valid(table.column(value)).to_numpy(zero_copy_only=False)
    protocols = pc.dictionary_encode(table.column("protocol")).combine_chunks()
    codes = protocols.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names = protocols.dictionary.to_pylist()

    def figures(chosen: Any) -> dict[str, Any]:
        sample = values[chosen & present]
        if not len(sample):
            return {"pct": None, "mean": None, "max": None, "n": 0}
        return {"pct": [float(v) for v in np.percentile(sample, [q * 100 for q in
                                                                  PERCENTILES])],
                "mean": float(sample.mean()), "max": float(sample.max()),
                "n": int(len(sample))}

    rows: dict[str | None, Any] = {None if code < 0 else names[code]: figures(codes == code)
                                   for code in np.unique(codes)}
    _add_overall(rows, lambda: figures(np.ones(len(values), dtype=bool)))
    return rows


def latency(deliveries: DataFrame, expected_rows: int) -> dict[str | None, dict[str, Any]]:
    """Send-to-first-delivery latency per protocol (key None: overall), summarised in
    numpy when ``expected_rows`` (the first deliveries) are at most
    :data:`LOCAL_PERCENTILE_ROWS`, else in Spark."""
    from pyspark.sql import functions as F

    frame = latency_frame(deliveries)
    # a delivery stamped before its send is an inconsistent trace (clocks of different
    # machines, or a restarted process reusing message ids), not a latency: counted
    # apart and left out of the figures
    before = {row["protocol"]: row["count"] for row in
              frame.filter(F.col("ms") < 0).groupBy("protocol").count().collect()}
    frame = frame.filter(F.col("ms") >= 0)
    if expected_rows <= LOCAL_PERCENTILE_ROWS:
        rows = _local_by_protocol(frame, "ms")
    else:
        rows = _by_protocol(frame, "ms", [])
    if before:
        before[OVERALL] = sum(before.values())
    out = {key: {**_distribution(row), "deliveries": row["n"], "before_send": before.get(key, 0)}
           for key, row in rows.items()}
    nothing = _distribution({"pct": None, "mean": None, "max": None})
    for key, count in before.items():  # protocols whose every latency was negative
        out.setdefault(key, {**nothing, "deliveries": 0, "before_send": count})
    return out


def latency_frame(deliveries: DataFrame) -> DataFrame:
    """(protocol, ms): send-to-delivery time of each first delivery whose send is known."""
    from pyspark.sql import functions as F

    return deliveries.filter((F.col("copy") == 1) & F.col("has_send")).select(
        "protocol", ((F.col("ts") - F.col("send_ts")) * 1000.0).alias("ms"))


def buffering(events: DataFrame) -> dict[str | None, dict[str, Any]]:
    """Time between buffer and unbuffer per protocol (key None: overall)."""
    from pyspark.sql import functions as F

    event = F.col("event")
    spans = (
        events.filter(event.isin("buffer", "unbuffer"))
        .groupBy("protocol", "process", "msg")
        .agg(F.min(F.when(event == "buffer", F.col("ts"))).alias("start"),
             F.min(F.when(event == "unbuffer", F.col("ts"))).alias("end"))
        .filter(F.col("start").isNotNull())
        .select("protocol",
                F.when(F.col("end") >= F.col("start"),
                       (F.col("end") - F.col("start")) * 1000.0).alias("ms"),
                F.col("end").isNull().alias("open"))
    )
    extra = [F.count_if(F.col("open")).alias("open_count")]
    return {
        key: {"messages": row["n"] + row["open_count"], **_distribution(row),
              "unfinished": row["open_count"]}
        for key, row in _by_protocol(spans, "ms", extra).items()
    }


def summarize_counts(counts: dict[tuple, list[int]]
                     ) -> tuple[dict[str | None, dict[str, Any]], dict[str, dict[str, int]]]:
    """Per-protocol ratios (key None: overall) and per-process event counts, from the
    events and metadata bytes per (protocol, process, event, kind)."""
    per_process: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str | None, dict[str, Any]] = {}

    def bucket(key: str | None) -> dict[str, Any]:
        return totals.setdefault(key, {
            "events": 0, "sends": 0, "network_sends": 0, "eager": 0, "meta_bytes": 0,
            "control_bytes": 0, "control": defaultdict(int),
        })

    for (protocol, process, event, kind), (n, size) in counts.items():
        per_process[process]["events"] += n
        per_process[process][event] += n
        for key in (protocol, OVERALL):
            b = bucket(key)
            b["events"] += n
            if event == "send":
                b["sends"] += n
            elif event == "network_send":
                b["network_sends"] += n
                b["meta_bytes"] += size
                if kind == "eager":
                    b["eager"] += n
            elif event == "control_send":
                b["control"][kind] += n
                b["control_bytes"] += size
    ratios = {}
    for key, b in totals.items():
        sends = b["sends"]
        ratios[key] = {
            "events": b["events"],
            "network_sends": b["network_sends"],
            "meta_bytes_per_message": _ratio(b["meta_bytes"], sends),
            "control_per_message": {kind: _ratio(count, sends)
                                    for kind, count in sorted(b["control"].items())},
            "control_bytes_per_message": _ratio(b["control_bytes"], sends),
            "eager_share": _ratio(b["eager"], b["network_sends"]),
        }
    processes = {name: dict(sorted(values.items())) for name, values in sorted(per_process.items())}
    return ratios, processes
