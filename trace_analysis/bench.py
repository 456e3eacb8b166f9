"""``groupcomm analyze-bench``: events per second of the Spark analysis (session already
started) against :mod:`trace_analysis.reference` on the same synthetic traces."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from trace_analysis.analysis import analyze
from trace_analysis.loaded import LOADERS
from trace_analysis.reference import check_directory
from trace_analysis.session import SparkUnavailableError, get_spark
from trace_analysis.synth import SynthSpec, generate

COMPARED = ("causal_violations", "fifo_violations", "undelivered", "duplicates",
            "malformed_lines", "messages")


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm analyze-bench",
        description="Generate synthetic traces and time the Spark analysis against a "
        "single-process pure-Python checker on the same data.",
    )
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000],
                        help="trace sizes in events (default 1000000 10000000)")
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--protocol", default="cykas")
    parser.add_argument("--dir", help="where to write traces (default: a temporary dir)")
    parser.add_argument("--master", help="Spark master URL (default local[2])")
    parser.add_argument("--loader", choices=LOADERS, default=LOADERS[0],
                        help="the Spark loader to time (default workers)")
    parser.add_argument("--spark-runs", type=int, default=1, metavar="N",
                        help="analyse each trace N times in the same Spark session and "
                        "report the last run (the JVM warmest; default 1)")
    parser.add_argument("--skip-python", action="store_true",
                        help="time only the Spark analysis")
    parser.add_argument("--keep", action="store_true", help="keep the generated traces")
    parser.add_argument("--json", action="store_true", help="print one JSON line per size")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _say(message: str) -> None:
    print(f"[analyze-bench] {message}", file=sys.stderr, flush=True)


def bench_one(events: int, args: argparse.Namespace, root: Path, spark: Any) -> dict[str, Any]:
    directory = root / f"trace-{events}"
    _say(f"generating {events:,} events ...")
    mark = time.monotonic()
    synth = generate(SynthSpec(events=events, processes=args.processes,
                               protocol=args.protocol), directory)
    row: dict[str, Any] = {"events": synth.lines, "bytes": synth.bytes, "loader": args.loader,
                           "processes": args.processes,
                           "generate_s": round(time.monotonic() - mark, 1)}
    _say(f"{synth.lines:,} lines, {synth.bytes / 1e9:.2f} GB; Spark analysis ...")
    runs = []
    for _ in range(args.spark_runs):
        mark = time.monotonic()
        spark_result = analyze(directory, spark=spark, progress=_say, loader=args.loader)
        runs.append(time.monotonic() - mark)
    row["spark_s"] = round(runs[-1], 1)
    row["spark_runs_s"] = [round(seconds, 1) for seconds in runs]
    row["spark_stages_s"] = {k: v for k, v in spark_result["seconds"].items() if k != "total"}
    row["spark_events_per_s"] = round(synth.lines / runs[-1])
    row["found"] = {k: spark_result[k] for k in COMPARED}
    if not args.skip_python:
        _say("single-process Python checker ...")
        mark = time.monotonic()
        reference = check_directory(directory)
        python_s = time.monotonic() - mark
        row["python_s"] = round(python_s, 1)
        row["python_events_per_s"] = round(synth.lines / python_s)
        row["speedup"] = round(python_s / runs[-1], 2)
        mismatch = {k: (row["found"][k], getattr(reference, k)) for k in COMPARED
                    if row["found"][k] != getattr(reference, k)}
        row["agree"] = not mismatch
        if mismatch:
            row["mismatch"] = mismatch
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)
    return row


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    if any(n < 1 for n in args.events) or args.processes < 2 or args.spark_runs < 1:
        raise cli.CliError("groupcomm analyze-bench: --events and --spark-runs must be >= 1 "
                       "and --processes >= 2")

    try:
        spark = get_spark(args.master)
    except SparkUnavailableError as error:
        raise cli.CliError(f"groupcomm analyze-bench: {error}") from None
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="groupcomm-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for events in args.events:
            row = bench_one(events, args, root, spark)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if not args.json:
        print(f"{'events':>12} {'GB':>6} {'spark s':>8} {'spark ev/s':>11} {'python s':>9} "
              f"{'python ev/s':>12} {'speedup':>8} agree")
        for row in rows:
            print(f"{row['events']:>12,} {row['bytes'] / 1e9:>6.2f} {row['spark_s']:>8} "
                  f"{row['spark_events_per_s']:>11,} {row.get('python_s', '-'):>9} "
                  f"{row.get('python_events_per_s', '-'):>12} {row.get('speedup', '-'):>8} "
                  f"{row.get('agree', '-')}")
    return 0 if all(row.get("agree", True) for row in rows) else 1


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
