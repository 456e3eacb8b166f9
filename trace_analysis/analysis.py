"""The analysis of one trace directory, the Python API behind ``groupcomm analyze``."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_analysis.checks import CheckResult, build_tables, run_checks
from trace_analysis.endings import (
    read_releases,
    released_deliveries,
    trace_endings,
    undelivered_by_ending,
)
from trace_analysis.load import load
from trace_analysis.loaded import Loaded, read_tail, scheme_of
from trace_analysis.metrics import OVERALL, buffering, latency, latency_frame, summarize_counts
from trace_analysis.report import SHIVIZ_MAX_EVENTS, write_report, write_summary
from trace_analysis.session import get_spark
from trace_analysis.spacetime import collect, undelivered_pairs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: the most violating triples listed in --violations-out (counts are always exact)
DEFAULT_VIOLATIONS_LIMIT = 100_000
LATENCY_PLOT_SAMPLES = 50_000
EMPTY_LATENCY = {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
#: the ratios of :func:`~trace_analysis.metrics.summarize_counts` with no counted events
NO_RATIOS = {"events": 0, "network_sends": 0, "meta_bytes_per_message": None,
             "control_per_message": {}, "control_bytes_per_message": None, "eager_share": None}
#: the counts of :class:`~trace_analysis.checks.CheckResult` the result carries as they are
CHECK_COUNTS = ("messages", "deliveries", "causal_violations", "fifo_violations",
                "violating_deliveries", "undelivered", "duplicates", "duplicate_sends",
                "orphan_deliveries", "unexpected_deliveries")


def _latency_ms(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if k not in ("deliveries", "before_send")}


def _per_protocol(checks: CheckResult, ratios: dict, lat: dict, buf: dict) -> dict[str, Any]:
    names = {*ratios, *checks.per_protocol, *lat, *buf} - {OVERALL}
    out = {}
    for name in sorted(names):
        name_lat = lat.get(name, EMPTY_LATENCY)
        out[name] = {**checks.protocol(name), **NO_RATIOS, **ratios.get(name, {}),
                     "latency_ms": _latency_ms(name_lat),
                     "deliveries_before_send": name_lat.get("before_send", 0),
                     "buffered_ms": buf.get(name, {"messages": 0})}
    return out


def _assemble(trace_dir: str | Path, loaded: Loaded, checks: CheckResult, lat: dict,
              buf: dict) -> dict[str, Any]:
    ratios, per_process = summarize_counts(loaded.counts)
    overall = {**NO_RATIOS, **ratios.get(OVERALL, {})}
    del overall["network_sends"]  # counted per protocol only
    overall_lat = lat.get(OVERALL, EMPTY_LATENCY)
    return {
        "trace_dir": str(trace_dir), "files": len(loaded.files), "lines": loaded.lines,
        "processes": len(per_process),
        **{name: getattr(checks, name) for name in CHECK_COUNTS},
        "deliveries_before_send": overall_lat.get("before_send", 0),
        "undelivered_samples": [{"msg": m, "process": p} for m, p in checks.undelivered_samples],
        "malformed_lines": loaded.malformed, "malformed_samples": loaded.malformed_samples,
        "blank_lines": loaded.blank_lines,
        "latency_ms": _latency_ms(overall_lat),
        "buffered_ms": buf.get(OVERALL, {"messages": 0}),
        **overall,  # events, metadata and control traffic per message, eager share
        "per_protocol": _per_protocol(checks, ratios, lat, buf),
        "per_process": per_process,
        "violations_listed": len(checks.triples),
        "violations_complete": checks.triples_complete,
    }


def write_violations(checks: CheckResult, path: str | Path) -> Path:
    """One JSON line per violating triple (docs/trace_schema.md), and a last ``{"note",
    "listed", "total"}`` line when the listing is capped."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        for triple in checks.triples:
            handle.write(json.dumps(triple, separators=(",", ":")) + "\n")
        if not checks.triples_complete:
            handle.write(json.dumps({
                "note": "listing capped: only the first triples are listed",
                "listed": len(checks.triples), "total": checks.causal_violations,
            }) + "\n")
    return target


def _latency_samples(deliveries: Any, total: int) -> dict[str, list[float]]:
    from pyspark.sql import functions as F

    frame = latency_frame(deliveries).filter(F.col("ms") >= 0)  # see metrics.latency
    if total > LATENCY_PLOT_SAMPLES:
        frame = frame.sample(fraction=LATENCY_PLOT_SAMPLES / total, seed=7)
    samples: dict[str, list[float]] = {}
    for row in frame.collect():
        samples.setdefault(row["protocol"], []).append(row["ms"])
    return samples


def _lines_with(spark: SparkSession, files: list[Any], needle: bytes) -> list[bytes]:
    """The lines of (remote) trace files that contain ``needle``, read through Spark."""
    from pyspark.sql import functions as F

    frame = spark.read.text([file.uri for file in files])
    return [row["value"].encode() for row in
            frame.filter(F.col("value").contains(needle.decode())).collect()]


def analyze(trace_dir: str | Path, spark: SparkSession | None = None, master: str | None = None,
            report_dir: str | Path | None = None, violations_out: str | Path | None = None,
            progress: Callable[[str], None] | None = None,
            violations_limit: int = DEFAULT_VIOLATIONS_LIMIT, loader: str | None = None,
            ship_packages: bool = True) -> dict[str, Any]:
    """Check and measure the traces in ``trace_dir`` (a local directory or a URI Spark's
    file systems read); returns the result object. ``spark`` is reused when given, else
    :func:`get_spark` (``master``, ``ship_packages``) provides one; ``loader``: one of
    :data:`~trace_analysis.loaded.LOADERS` (None: by the location). ``report_dir`` gets
    the report files, ``violations_out`` at most ``violations_limit`` violating triples.

    Raises :class:`~trace_analysis.loaded.TraceDirError` for a missing or empty directory
    and :class:`~trace_analysis.session.SparkUnavailableError` when Spark cannot start.
    """
    def stage(message: str) -> None:
        log.info("%s", message)
        if progress is not None:
            progress(message)

    started = time.monotonic()
    directory = trace_dir if scheme_of(trace_dir) is not None else Path(trace_dir)
    if spark is None:
        stage("starting Spark")
        spark = get_spark(master, ship_packages)
    loaded = load(spark, directory, say=stage, loader=loader)
    seconds: dict[str, float] = {"load": round(loaded.seconds, 2)}
    with contextlib.ExitStack() as cached:  # unpersisted last in, first out
        cached.callback(loaded.unpersist)
        mark = time.monotonic()
        tables = build_tables(loaded.events, stage, violations_limit, loaded.sends)
        cached.callback(tables.unpersist)
        checks = run_checks(tables, violations_limit, stage)
        seconds["checks"] = round(time.monotonic() - mark, 2)
        mark = time.monotonic()
        lat = latency(tables.deliveries, checks.deliveries)
        result = _assemble(directory, loaded, checks, lat, buffering(loaded.events))
        endings = trace_endings(loaded.files, lambda file, size: read_tail(spark, file, size))
        result.update(undelivered_by_ending(tables.sends, tables.deliveries, endings,
                                            checks.undelivered))
        result["abrupt_endings"] = endings.abrupt
        result["open_traces"] = endings.open
        releasing = [p for p, n in result["per_process"].items() if n.get("release")]
        releases = read_releases(loaded.files, releasing,
                                 lambda files, needle: _lines_with(spark, files, needle))
        result["releases"] = len(releases)
        result["released_deliveries"] = released_deliveries(tables.deliveries, releases)
        seconds["metrics"] = round(time.monotonic() - mark, 2)
        stage(f"measured latency, buffering and overhead ({seconds['metrics']:.1f} s)")
        if violations_out is not None:
            result["violations_out"] = str(write_violations(checks, violations_out))
        if report_dir is not None:
            mark = time.monotonic()
            app_events = sum(p.get("send", 0) + p.get("deliver", 0)
                             for p in result["per_process"].values())
            execution = collect(loaded.events) if app_events <= SHIVIZ_MAX_EVENTS else None
            samples = _latency_samples(tables.deliveries, checks.deliveries)
            missing = (undelivered_pairs(execution) if execution is not None
                       else checks.undelivered_samples)
            write_report(result, report_dir, samples, execution, missing, checks.triples)
            seconds["report"] = round(time.monotonic() - mark, 2)
            stage(f"report written to {report_dir} ({seconds['report']:.1f} s)")
    seconds["total"] = round(time.monotonic() - started, 2)
    result["seconds"] = seconds
    if report_dir is not None:
        write_summary(result, report_dir)
    return result
