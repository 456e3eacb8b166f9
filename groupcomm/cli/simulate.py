"""``groupcomm simulate``: one simulated run (``run``), or one of the Cykas paper's
figures (``figure``); see docs/commands.md, and docs/sim_results.md for the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_output_arguments,
    checked_module,
    ensure_trace_dir,
    run_main,
    setup_logging,
)

PROG = "groupcomm simulate"

_SHOWN = ("protocol", "engine", "processes", "execution_time_ms", "avg_job_start_ms", "jobs",
          "app_messages", "control_messages", "eager_messages", "meta_bytes_total",
          "wire_bytes_total", "deliveries", "stuck", "events", "wall_s", "messages_per_s")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    from groupcomm.core.causality import CausalityError, ProtocolViolation
    from groupcomm.core.registry import get_module
    from groupcomm.sim.engine import SimConfig, SimulationError, simulate
    from groupcomm.sim.workload import WorkloadError, load_script

    checked_module(get_module, args.protocol, f"{PROG} run", warn=False)
    # the options of ``run`` that configure the simulation carry SimConfig's field names
    config = SimConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SimConfig)})
    ensure_trace_dir(args.trace_dir, f"{PROG} run")
    trace = bool(args.trace_dir) or args.check
    try:
        workload = load_script(args.script) if args.script else config.workload()
        result, sim = simulate(config, workload, trace=trace)
    # (CausalityError, ProtocolViolation: e.g. vector refusing unicasts)
    except (SimulationError, WorkloadError, CausalityError, ProtocolViolation) as error:
        raise CliError(f"{PROG} run: {error}") from None
    data = result.as_dict()
    if args.trace_dir:
        sim.write_traces(args.trace_dir)
        data["trace_dir"] = args.trace_dir
    if args.json:
        print(json.dumps(data, sort_keys=True))
    else:
        for key in _SHOWN:
            print(f"{key:18} {data[key]}")
        if "verdict" in data:
            print("verdict            " + ", ".join(f"{k} {v}" for k, v in data["verdict"].items()))
        if args.trace_dir:
            print(f"traces             {args.trace_dir} (groupcomm analyze {args.trace_dir})")
    if args.check and data.get("verdict"):
        bad = sum(data["verdict"].get(k, 0) for k in (
            "causal_violations", "fifo_violations", "undelivered", "duplicates", "unexpected"))
        return 1 if bad else 0
    return 0


def _figure(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    from groupcomm.sim import figures

    if args.jobs < 1:
        raise CliError(f"{PROG} figure: --jobs must be >= 1")
    if args.master and not args.spark:
        raise CliError(f"{PROG} figure: --master needs --spark")
    scale = "tiny" if args.tiny else "quick" if args.quick else "full"
    runs = len(figures.grid(args.figure, scale))
    how = (f"Spark ({args.master or 'local[2]'})" if args.spark
           else f"{args.jobs} worker process(es)")
    print(f"figure {args.figure}: {runs} runs ({scale} grid) on {how}; output in {args.out}",
          file=sys.stderr, flush=True)
    try:
        info = figures.run_figure(
            args.figure, args.out, scale=scale, jobs=args.jobs, spark=args.spark,
            master=args.master, progress=figures.stderr_progress(f"figure {args.figure}"),
        )
    except Exception as error:  # (Ctrl-C outside the grid: run_main says "interrupted", 130)
        from trace_analysis.session import SparkUnavailableError

        if isinstance(error, SparkUnavailableError):
            raise CliError(f"{PROG} figure: {error}") from None
        raise
    if args.json:
        print(json.dumps(info, sort_keys=True))
        return 0 if info["completed"] else 130
    print(f"figure {info['figure']} ({info['scale']}): {info['done']}/{info['runs']} runs "
          f"in {info['wall_s']} s")
    for key in ("csv", "summary_csv", "png"):
        if key in info:
            print(f"  {key:12} {info[key]}")
    for protocol, cross in info.get("crossover", {}).items():
        print(f"  crossover of {protocol}: last win at {cross['last_win']} processes/kBps, "
              f"first loss at {cross['first_loss']}, estimate {cross['estimate']}")
    return 0 if info["completed"] else 130


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Discrete-event simulation of the causality modules (the real filters "
        "in virtual time, with bandwidth, propagation delay and long-running jobs).",
    )
    sub = parser.add_subparsers(dest="command", metavar="{run,figure}")
    sub.required = True

    run = sub.add_parser("run", help="simulate one configuration and print its measurements",
                         description="Simulate one configuration.")
    run.add_argument("--protocol", default="cykas", help="causality module (default cykas)")
    run.add_argument("--processes", type=_positive_int, default=10)
    run.add_argument("--bandwidth-kbps", type=_number, default=50.0,
                     help="NIC bandwidth per process, kB/s (1 kB = 1000 bytes)")
    run.add_argument("--delay-ms", type=_number, default=5.0, help="propagation delay")
    run.add_argument("--jitter-ms", type=_number, default=0.0,
                     help="extra random delay per frame, uniform in [0, J) (links then not FIFO)")
    run.add_argument("--messages-per-process", type=int, default=100)
    run.add_argument("--interval-ms", type=_number, default=10.0,
                     help="time between a process's sends")
    run.add_argument("--job-fraction", type=_number, default=0.0,
                     help="share of messages that start a job at the recipient")
    run.add_argument("--job-ms", type=_number, default=0.0, help="job length")
    run.add_argument("--job-sd-ms", type=_number, default=0.0,
                     help="standard deviation of job lengths (normal; 0 = fixed)")
    run.add_argument("--hotspot-share", type=_number, default=0.0,
                     help="share of processes that are hotspots")
    run.add_argument("--hotspot-weight", type=_number, default=0.8,
                     help="probability that a message goes to a hotspot")
    run.add_argument("--broadcast", action="store_true", help="every send goes to all others")
    run.add_argument("--payload-bytes", type=int, default=64)
    run.add_argument("--header-bytes", type=int, default=64)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--engine", choices=("auto", "real", "model"), default="auto",
                     help="matrix only: the vectorised model (auto: above 50 processes)")
    run.add_argument("--script", metavar="FILE",
                     help="explicit send script (JSON) instead of a random workload")
    run.add_argument("--trace-dir", metavar="DIR", help="write <process>.jsonl traces there")
    run.add_argument("--check", action="store_true",
                     help="run the oracle on the trace; exit 1 on any violation")
    add_output_arguments(run, "one JSON object on stdout")
    run.set_defaults(body=_run)

    fig = sub.add_parser("figure", help="run the grid of the paper's Figure 4, 5 or 6",
                         description="Run a figure's grid; write CSV files and a PNG.")
    fig.add_argument("figure", type=int, choices=(4, 5, 6))
    fig.add_argument("--out", default="sim-figures", metavar="DIR",
                     help="output directory (default ./sim-figures)")
    fig.add_argument("--quick", action="store_true", help="a reduced grid (a few minutes)")
    fig.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    fig.add_argument("--jobs", type=int, default=1,
                     help="worker processes when not using Spark (default 1)")
    fig.add_argument("--spark", action="store_true",
                     help="run the grid's runs as Spark tasks")
    fig.add_argument("--master", help="Spark master URL (default local[2])")
    add_output_arguments(fig, "print a JSON summary")
    fig.set_defaults(body=_figure)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``groupcomm simulate``."""
    return run_main(build_parser, lambda args: args.body(args), argv)
