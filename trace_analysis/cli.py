"""``groupcomm analyze TRACE_DIR``: check and measure a trace directory with PySpark."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from groupcomm.cli.args import ArgumentParser, CliError, run_main, setup_logging
from trace_analysis.endings import describe as describe_endings
from trace_analysis.loaded import LOADERS
from trace_analysis.report import written_files


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm analyze",
        description=(
            "Check a trace directory (one <process>.jsonl per process, docs/trace_schema.md) for "
            "causal and FIFO violations, undelivered and duplicate messages, and measure "
            "latency, buffering, metadata and control overhead per protocol, with PySpark."
        ),
    )
    parser.add_argument("trace_dir", help="directory of <process>.jsonl trace files: a "
                        "local path, or a URI of a file system Spark reads (hdfs://..., "
                        "s3a://..., file:// on storage every worker shares)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--master", help="Spark master URL (default local[2])")
    parser.add_argument("--report", metavar="DIR", help="write summary.json, CSV tables, "
                        "PNG plots, a space-time diagram and a ShiViz log to DIR")
    parser.add_argument("--violations-out", metavar="FILE",
                        help="write every violating triple as JSON lines to FILE")
    parser.add_argument("--violations-limit", type=int, default=None,
                        help="most triples listed in --violations-out (counts stay exact)")
    parser.add_argument("--loader", choices=LOADERS, default=None,
                        help="how the trace lines are parsed: 'workers' (one pass, msgspec "
                        "in Spark's Python workers, which open the files themselves; the "
                        "default for local paths and file://) or 'native' (two passes of "
                        "Spark's JSON reader, through Spark's file systems; the default "
                        "for hdfs://, s3a:// and other URIs)")
    parser.add_argument("--no-ship", action="store_true",
                        help="on a cluster whose workers' Python lacks numpy, msgspec, "
                        "pyarrow or pandas, stop with one line saying so instead of shipping "
                        "this installation's with the job (spark.archives)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def print_table(result: Mapping[str, Any], out: Any = None) -> None:
    """The readable form of an analysis result."""
    lat = result.get("latency_ms", {})
    write = (out or sys.stdout).write
    write(f"trace {result['trace_dir']}: {result['events']} events, {result['messages']} "
          f"messages, {result['processes']} processes, {result['malformed_lines']} malformed "
          "lines\n")
    write(f"causal violations {result['causal_violations']}   fifo violations "
          f"{result['fifo_violations']}   undelivered {result['undelivered']}   duplicates "
          f"{result['duplicates']}\n")
    write(f"latency ms p50 {_fmt(lat.get('p50'))}  p95 {_fmt(lat.get('p95'))}  "
          f"p99 {_fmt(lat.get('p99'))}\n")
    for line in describe_endings(result):
        write(line + "\n")
    repeated, early = result.get("duplicate_sends", 0), result.get("deliveries_before_send", 0)
    if repeated or early:
        write(f"INCONSISTENT TRACE: {repeated} send record(s) repeat a message id, {early} "
              "delivery(ies) stamped before their send (a restarted process reusing ids, or "
              "clocks of different machines); the latter are left out of the latency "
              "figures\n")
    write("\n")
    columns = ["protocol", "messages", "causal", "fifo", "undeliv", "dup", "p50 ms", "p99 ms",
               "buffered", "meta B/msg", "ack/msg", "yct/msg", "eager"]
    rows = []
    for name, p in sorted(result.get("per_protocol", {}).items()):
        control = p.get("control_per_message") or {}
        rows.append([name, p["messages"], p["causal_violations"], p["fifo_violations"],
                     p["undelivered"], p["duplicates"], p["latency_ms"].get("p50"),
                     p["latency_ms"].get("p99"), p["buffered_ms"].get("messages", 0),
                     p.get("meta_bytes_per_message"), control.get("ack", 0),
                     control.get("yct", 0), p.get("eager_share")])
    cells = [columns, *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        write("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))) + "\n")
    for sample in result.get("malformed_samples", [])[:5]:
        write(f"malformed: {sample}\n")
    if result.get("report"):
        write(f"\nreport written: {', '.join(written_files(result))}\n")


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    from trace_analysis.analysis import DEFAULT_VIOLATIONS_LIMIT, analyze
    from trace_analysis.loaded import TraceDirError
    from trace_analysis.session import SparkUnavailableError

    limit = args.violations_limit if args.violations_limit is not None else (
        DEFAULT_VIOLATIONS_LIMIT)
    if limit < 0:
        raise CliError("groupcomm analyze: --violations-limit must be >= 0")

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[analyze] {message}", file=sys.stderr, flush=True)

    from trace_analysis.load import choose_loader
    from trace_analysis.loaded import list_trace_files
    from trace_analysis.store import local_path, scheme_of

    try:
        loader = choose_loader(args.trace_dir, args.loader)
        if loader == "workers" or scheme_of(args.trace_dir) is None:
            # a missing or empty local directory fails before Spark starts
            list_trace_files(local_path(args.trace_dir))
        result = analyze(args.trace_dir, master=args.master, report_dir=args.report,
                         violations_out=args.violations_out, progress=progress,
                         violations_limit=limit, loader=loader,
                         ship_packages=not args.no_ship)
    except (TraceDirError, SparkUnavailableError) as error:
        raise CliError(f"groupcomm analyze: {error}") from None
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print_table(result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``groupcomm analyze``."""
    return run_main(build_parser, _run, argv)
