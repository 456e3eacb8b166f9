"""``groupcomm conformance NAME``: the conformance suite of one causality module; exit
status 0 when the module behaves as it declares, 1 otherwise, 2 for bad arguments."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import groupcomm.cli.args as cli
from groupcomm.conformance import CHECKS, run_conformance
from groupcomm.core.registry import get_module

if TYPE_CHECKING:
    from groupcomm.conformance.scenarios import Outcome


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm conformance",
        description="Run the conformance suite against an installed causality module "
        "(built-in or plugin), expecting what its declared flags say: random executions "
        "judged by the causal-order oracle, cause before effect, held messages and their "
        "release after a departure, snapshot round-trips, late joiners, replicated types, "
        "symmetry, a model-checker run with a join and a leave; with --stress a real-process "
        "run with drops and churn, with --spark its Spark trace analysis.",
    )
    parser.add_argument("module", metavar="NAME", help="causality module (groupcomm filters)")
    cli.add_flags(parser, quick="fewer random executions and a smaller model check (seconds)",
              stress="also run real processes with drops and churn (about a minute)",
              spark="also analyse the stress run's traces with Spark, last (implies "
              "--stress; Spark takes tens of seconds to start)")
    parser.add_argument("--only", action="append", choices=CHECKS, metavar="CHECK",
                        help=f"run only this check (repeatable): {', '.join(CHECKS)}")
    parser.add_argument("--trace-dir", metavar="DIR", help="keep the stress run's traces here")
    cli.add_output_arguments(parser)
    return parser


def _print_outcome(outcome: Outcome) -> None:
    print(f"{outcome.status:4}  {outcome.check:24} {outcome.detail}  "
          f"({outcome.seconds:.1f} s)", flush=True)
    if outcome.counterexample:
        print("      counterexample:")
        for number, step in enumerate(outcome.counterexample, start=1):
            print(f"      {number:3d}. {step}")


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    cli.checked_module(get_module, args.module, "groupcomm conformance", warn=not args.json)
    cli.ensure_trace_dir(args.trace_dir, "groupcomm conformance")
    if not args.json:
        print(f"conformance of {args.module} ({'quick' if args.quick else 'full'})")
    report = run_conformance(
        args.module, quick=args.quick, stress=args.stress, spark=args.spark, only=args.only,
        trace_dir=Path(args.trace_dir) if args.trace_dir else None,
        progress=None if args.json else _print_outcome)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        counts = {status: sum(o.status == status for o in report.outcomes)
                  for status in ("pass", "fail", "n/a")}
        summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        if report.declared.known_bad:
            verdict = ("known-bad, caught with a counterexample (as declared)"
                       if report.as_declared else "known-bad, but NO check caught it")
        else:
            verdict = "conformant" if report.passed else "NOT conformant"
        print(f"result: {verdict} ({summary})")
    return 0 if report.as_declared else 1


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
