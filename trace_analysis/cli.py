"""``groupcomm analyze TRACE_DIR``: check and measure a trace directory with PySpark."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from trace_analysis import server
from trace_analysis.analysis import DEFAULT_VIOLATIONS_LIMIT, analyze
from trace_analysis.endings import describe as describe_endings
from trace_analysis.load import choose_loader
from trace_analysis.loaded import (
    LOADERS,
    TraceDirError,
    list_trace_files,
    local_path,
    scheme_of,
    trace_files_in,
)
from trace_analysis.report import write_summary, written_files
from trace_analysis.session import SparkUnavailableError, get_spark


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm analyze",
        description=(
            "Check a trace directory (one <process>.jsonl per process, docs/trace_schema.md) for "
            "causal and FIFO violations, undelivered and duplicate messages, and measure "
            "latency, buffering, metadata and control overhead per protocol, with PySpark."
        ),
    )
    parser.add_argument("trace_dir", nargs="?", help="directory of <process>.jsonl trace "
                        "files: a local path, or a URI of a file system Spark reads "
                        "(hdfs://..., s3a://..., file:// on storage every worker shares)")
    cli.add_output_arguments(parser)
    parser.add_argument("--master", help="Spark master URL (default local[2])")
    parser.add_argument("--report", metavar="DIR", help="write summary.json, CSV tables, "
                        "PNG plots, a space-time diagram and a ShiViz log to DIR")
    parser.add_argument("--violations-out", metavar="FILE",
                        help="write every violating triple as JSON lines to FILE")
    parser.add_argument("--violations-limit", type=int, default=DEFAULT_VIOLATIONS_LIMIT,
                        help="most triples listed in --violations-out (counts stay exact)")
    parser.add_argument("--loader", choices=LOADERS, default=None,
                        help="how the trace lines are parsed: 'workers' (one pass, msgspec "
                        "in Spark's Python workers, which open the files themselves; the "
                        "default for local paths and file://) or 'native' (two passes of "
                        "Spark's JSON reader, through Spark's file systems; the default "
                        "for hdfs://, s3a:// and other URIs)")
    cli.add_flags(parser, no_ship="on a cluster whose workers' Python lacks numpy, msgspec, "
              "pyarrow or pandas, stop with one line saying so instead of shipping this "
              "installation's with the job (spark.archives)")
    warm = parser.add_argument_group(
        "warm Spark", "Starting Spark takes most of the time of a small analysis. An "
        "analysis server keeps one SparkSession for later analyses of the same master: "
        "while one runs, `groupcomm analyze` uses it (and says so), unless --no-server.")
    cli.add_flags(warm, serve="run the analysis server for --master in this terminal until "
              "Ctrl-C (or --idle-timeout)",
              warm="analyse in the analysis server, starting it in the background when none "
              "runs (it stops after --idle-timeout)")
    warm.add_argument("--idle-timeout", type=float, default=None, metavar="MIN",
                      help="minutes without a request after which the server stops "
                      f"(default {server.DEFAULT_IDLE_TIMEOUT / 60:g}; 0: never)")
    cli.add_flags(warm, stop_server="stop the analysis server for --master, if one runs",
              no_server="analyse in this process even when an analysis server runs",
              watch="keep one SparkSession and print a fresh report each time a trace file "
              "of TRACE_DIR (a local directory) grows or appears, until Ctrl-C")
    warm.add_argument("--interval", type=float, default=1.0, metavar="S",
                      help="with --watch: seconds between looks at the directory (default 1)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
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
    engine = result.get("engine")
    if engine:
        write(f"engine: {engine['name']} {engine.get('spark_version', '')} "
              f"{engine.get('master', '')}, {engine.get('session', '')}\n")
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


def _check(args: argparse.Namespace) -> None:
    """One line, exit code 2, for a combination of options that makes no sense."""
    prog = "groupcomm analyze"
    modes = [name for name, on in (("--serve", args.serve), ("--stop-server", args.stop_server),
                                   ("--watch", args.watch)) if on]
    if len(modes) > 1:
        raise cli.CliError(f"{prog}: {' and '.join(modes)} exclude each other")
    if args.serve or args.stop_server:
        if args.trace_dir is not None:
            raise cli.CliError(f"{prog}: {modes[0]} takes no TRACE_DIR")
        extra = [name for name, on in (("--warm", args.warm), ("--no-server", args.no_server),
                                       ("--report", args.report),
                                       ("--violations-out", args.violations_out)) if on]
        if extra:
            raise cli.CliError(f"{prog}: {extra[0]} goes with a TRACE_DIR, not {modes[0]}")
    elif args.trace_dir is None:
        raise cli.CliError(f"{prog}: TRACE_DIR is required (or --serve, --stop-server; "
                       f"see {prog} --help)")
    idle = args.idle_timeout
    for wrong, problem in (
            (args.warm and args.no_server, "--warm and --no-server exclude each other"),
            (idle is not None and not (args.serve or args.warm),
             "--idle-timeout goes with --serve or --warm"),
            (idle is not None and idle < 0, "--idle-timeout must be >= 0 (0: never)"),
            (args.interval <= 0, "--interval must be > 0"),
            (args.violations_limit < 0, "--violations-limit must be >= 0"),
            (args.watch and scheme_of(args.trace_dir) not in (None, "file"),
             f"--watch takes a local directory, not {args.trace_dir}")):
        if wrong:
            raise cli.CliError(f"{prog}: {problem}")


def _note(message: str) -> None:
    print(f"groupcomm analyze: note: {message}", file=sys.stderr, flush=True)


def _analyse(args: argparse.Namespace, loader: str, say: Callable[[str], None]) -> dict[str, Any]:
    """One analysis, in the analysis server for the master when one runs (or, with
    ``--warm``, is started), else here; raises TraceDirError and SparkUnavailableError."""
    if loader == "workers" or scheme_of(args.trace_dir) is None:
        # a missing or empty local directory fails before Spark starts
        list_trace_files(local_path(args.trace_dir))
    result = None if args.no_server else _in_server(args, loader, say)
    if result is not None:
        return result
    result = analyze(args.trace_dir, master=args.master, report_dir=args.report,
                     violations_out=args.violations_out, progress=say,
                     violations_limit=args.violations_limit, loader=loader,
                     ship_packages=not args.no_ship)
    spark = get_spark(args.master, not args.no_ship)  # the session analyze used
    result["engine"] = {"name": "spark", "spark_version": spark.version,
                        "master": spark.sparkContext.master, "session": "this process"}
    return result


def _in_server(args: argparse.Namespace, loader: str, say: Callable[[str], None]
               ) -> dict[str, Any] | None:
    """The result from the analysis server, or None (with a note when one was there
    but could not be used)."""
    ship = not args.no_ship
    if args.warm:
        info = server.find_or_start(args.master, ship, _idle_seconds(args), _note, say)
    else:
        info = server.usable(args.master, ship, _note)
    if info is None:
        return None
    say(f"analysing in {info.describe()}")
    request = {"trace_dir": _absolute(args.trace_dir), "report_dir": _absolute(args.report),
               "violations_out": _absolute(args.violations_out),
               "violations_limit": args.violations_limit, "loader": loader}
    try:
        result = server.analyze_remote(info, request, say)
    except server.ServerGone as why:
        _note(f"{info.describe()} could not be used ({why}); analysing in this process")
        return None
    # the paths as this process would have written them (see analysis.analyze)
    result["trace_dir"] = (args.trace_dir if scheme_of(args.trace_dir) is not None
                           else str(Path(args.trace_dir)))
    if args.violations_out is not None:
        result["violations_out"] = str(Path(args.violations_out))
    if args.report is not None:
        root = _absolute(args.report)
        result["report"] = {what: str(Path(args.report) / Path(path).relative_to(root))
                            for what, path in (result.get("report") or {}).items()}
        write_summary(result, args.report)
    result["engine"] = {"name": "spark", "spark_version": info.spark_version,
                        "master": info.master, "session": f"analysis server (pid {info.pid})"}
    return result


def _idle_seconds(args: argparse.Namespace) -> float:
    return server.DEFAULT_IDLE_TIMEOUT if args.idle_timeout is None else args.idle_timeout * 60


def _absolute(location: str | None) -> str | None:
    """A local path made absolute (the server runs elsewhere); URIs as they are."""
    if location is None or scheme_of(location) is not None:
        return location
    return str(Path(location).absolute())


def _stop_server(args: argparse.Namespace) -> int:
    info = server.read_state(args.master, not args.no_ship)
    if info is None:
        print("no analysis server runs for this master", file=sys.stderr)
        return 0
    stopped = server.stop(info)
    print(f"stopped {info.describe()}" if stopped
          else f"{info.describe()} did not stop within 30 s", file=sys.stderr)
    return 0 if stopped else 1


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, default=str), flush=True)
    else:
        print_table(result)
        sys.stdout.flush()


#: (file name, size, modification time in ns) of every trace file
Snapshot = tuple[tuple[str, int, int], ...]


def snapshot(directory: str | Path) -> Snapshot:
    """The state of the trace files of ``directory`` (empty when there are none)."""
    if not Path(directory).is_dir():
        return ()
    found = []
    for path in trace_files_in(Path(directory)):
        try:
            stat = path.stat()
        except OSError:  # removed between the listing and the stat
            continue
        found.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def describe_files(state: Snapshot) -> str:
    size = sum(entry[1] for entry in state)
    return f"{len(state)} file{'s' if len(state) != 1 else ''}, {size / 1000:.1f} kB"


def watch(directory: str | Path, analyse: Callable[[Snapshot], None],
          stop: threading.Event, interval: float = 1.0,
          say: Callable[[str], None] = lambda text: None) -> None:
    """``--watch``: call ``analyse(state)`` once there are traces and after each change,
    as soon as the trace files have looked the same twice in a row (not in the middle of
    a burst of lines), until ``stop`` is set."""
    analysed: Snapshot | None = None
    previous = snapshot(directory)
    if not previous:
        say(f"waiting for trace files in {directory}")
    while not stop.is_set():
        current = snapshot(directory)
        if current and current == previous and current != analysed:
            analysed = current
            analyse(current)
            say(f"watching {directory} for changes (Ctrl-C ends)")
            previous = snapshot(directory)
            continue
        previous = current
        stop.wait(interval)


def _watch(args: argparse.Namespace, loader: str, say: Callable[[str], None]) -> int:
    def once(state: Snapshot) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
        say(f"{now} UTC: analysing {args.trace_dir} ({describe_files(state)})")
        try:
            result = _analyse(args, loader, say)
        except TraceDirError as error:
            _note(str(error))
            return
        if not args.json:
            print(f"=== {now} UTC, {describe_files(state)} ===")
        _print(result, args.json)

    with contextlib.suppress(KeyboardInterrupt):
        watch(local_path(args.trace_dir), once, threading.Event(), args.interval, say)
    return 0


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    _check(args)

    def say(message: str) -> None:
        if not args.quiet:
            print(f"[analyze] {message}", file=sys.stderr, flush=True)

    try:
        if args.stop_server:
            return _stop_server(args)
        if args.serve:
            server.serve(args.master, not args.no_ship, _idle_seconds(args) or None, say,
                         stop_spark=True)
            return 0
        loader = choose_loader(args.trace_dir, args.loader)
        if args.watch:
            return _watch(args, loader, say)
        result = _analyse(args, loader, say)
    except (TraceDirError, SparkUnavailableError) as error:
        raise cli.CliError(f"groupcomm analyze: {error}") from None
    _print(result, args.json)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
