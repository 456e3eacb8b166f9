"""``groupcomm check``: bounded model checking of the real code, two models in one
command (docs/commands.md): the plain model explores a causality module's real filters
(:mod:`groupcomm.check`); the session model (``--session``, or any of its options)
explores whole clients and the real session registry
(:mod:`groupcomm.check.session_rules`).

Exit status: 0 ok, 1 violation, 3 incomplete (``--max-states`` reached or Ctrl-C),
2 bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groupcomm.check.config import DESTINATION_MODES
from groupcomm.check.session_config import REGISTRIES, TRANSFERS
from groupcomm.cli import args as cli_args
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_flags,
    add_output_arguments,
    checked_module,
    ensure_trace_dir,
    run_main,
    setup_logging,
)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm check",
        description="Explore every interleaving of application sends and frame arrivals "
        "of N processes running a causality module's real filters (bounded), and check "
        "causal delivery, FIFO, liveness and that no filter raises; or, with --session "
        "(or any option of the session model), every interleaving of whole clients and "
        "the real session registry under joins, departures, crashes, restarts, false "
        "suspicions, server restarts and state transfer.",
    )
    parser.add_argument("--protocol", help="causality module (groupcomm filters); "
                        "required but for the session model (default there: none)")
    parser.add_argument("--processes", type=int, help="number of processes: 2-9 (default "
                        "3); the session model 1-4 (default 2)")
    parser.add_argument("--messages", type=int,
                        help="application sends per process, destinations explored "
                        "(default 2); the session model: per start of a client, each to "
                        "every member it knows (default 1)")
    add_flags(
        parser,
        fifo_network="per-pair FIFO links (default: unordered, non-duplicating)",
        dfs="depth-first (default breadth-first)",
        reduce="hash compaction: keep 64-bit digests of visited states",
        symmetry="symmetry reduction: explore states that differ only in process names (and "
        "control-message numbering) once",
        por="partial-order reduction: in each state expand only the transitions of processes "
        "that the others can no longer send to, or one arrival of a control the module "
        "declares commuting (mfss' ACK; checked with the real filters) (a persistent set; "
        "same verdicts and terminal states); combines with --symmetry and --reduce",
        plain_visited="with --reduce: keep visited digests in a Python set and the frontier "
        "as objects (the default, breadth-first on an unordered network, is compact storage: "
        "8-byte fingerprints in NumPy, the frontier packed and spilled to disk past half of "
        "--memory-budget)")
    parser.add_argument("--memory-budget", type=float, default=4.0, metavar="GB",
                        help="compact storage: memory for the frontier before it goes to "
                        "disk is half of this (default 4)")
    parser.add_argument("--memo-limit", type=int, default=500_000, metavar="N",
                        help="compact storage: empty a memo (a pure cache) past N entries; "
                        "lower saves memory and costs time (default 500000)")
    parser.add_argument("--checkpoint", metavar="DIR",
                        help="compact storage: save the search between BFS levels in DIR "
                        "(at most every --checkpoint-every seconds) and resume from the "
                        "checkpoint found there (same bounds and options)")
    parser.add_argument("--checkpoint-every", type=float, default=600.0, metavar="SECONDS",
                        help="seconds between checkpoints (default 600)")
    parser.add_argument("--spill-dir", metavar="DIR",
                        help="where a spilled frontier goes (default: the temporary directory)")
    parser.add_argument("--max-states", type=int, default=None, metavar="N",
                        help="stop after N unique states (result: incomplete)")
    parser.add_argument("--workload", metavar="FILE",
                        help='JSON {"sends": {"p1": [["p2"], ["p2","p3"]], "p2": [], ...}}: '
                        "fixed destinations (interleavings still explored)")
    parser.add_argument("--destinations", choices=DESTINATION_MODES,
                        default="auto", help="nondeterministic destinations: single other "
                        "process (unicast), all others (broadcast), every non-empty set of "
                        "others (subsets: multicasts too; many more states), or auto "
                        "(broadcast for broadcast-only modules, else unicast)")
    parser.add_argument("--unicast", dest="destinations", action="store_const",
                        const="unicast", help="same as --destinations unicast")
    parser.add_argument("--join", action="extend", nargs="+", default=[], metavar="PROCESS",
                        help="PROCESS (p1..pN) is not a member at the start and joins at some "
                        "point (every point explored); repeatable")
    parser.add_argument("--leave", action="extend", nargs="+", default=[], metavar="PROCESS",
                        help="PROCESS leaves the session at some point (every point "
                        "explored); repeatable. With --join/--leave: unordered network, no "
                        "--symmetry/--por/--workload")
    parser.add_argument("--bypass-refusal", action="store_true",
                        help="tag sends without the module's destination check (what the "
                        "filters would do with a send they refuse)")
    session = parser.add_argument_group(
        "the session model (whole clients and the session registry)")
    session.add_argument("--session", action="store_true",
                         help="explore whole clients (ClientProtocol: membership, causality "
                         "module, state transfer, frame checks) and the real session "
                         "registry exchanging signed frames; implied by the options below")
    session.add_argument("--restart", action="extend", nargs="+", default=[], metavar="P",
                         help="clients that may crash and restart under the same name (once)")
    session.add_argument("--senders", action="extend", nargs="+", metavar="P",
                         help="only these clients send (default: every one)")
    session.add_argument("--ticks", type=int, default=0,
                         help="seconds that may pass (heartbeat interval 1 s, timeout 1.5 s, "
                         "takeover wait 1 s): 1 lets heartbeats find a restarted server, 2 "
                         "allow false suspicions and takeovers")
    add_flags(session,
              server_restart="the server may restart once (what it had taken and not yet "
              "sent is lost)",
              direct="frames go straight to members (they may overtake join notices)")
    session.add_argument("--registry", default="correct", choices=sorted(REGISTRIES),
                         help="the real registry, or a known-bad variant to catch")
    session.add_argument("--state", nargs="*", metavar="P",
                         help="state transfer: every client's application gives snapshots, "
                         "and every one (or the clients named) installs them as a newcomer "
                         "(a newcomer asks a member, members mark the cut)")
    session.add_argument("--transfer", default="correct", choices=sorted(TRANSFERS),
                         help="the real state transfer, or a known-bad variant to catch "
                         "(implies --state)")
    session.add_argument("--state-timeout", type=float, metavar="SECONDS",
                         help="how long a newcomer waits for one member's snapshot before it "
                         "asks the next (default: longer than any run, so that a snapshot "
                         "that never comes is seen)")
    add_output_arguments(parser)
    parser.add_argument("--trace-dir", metavar="DIR",
                        help="write the counterexample as <process>.jsonl trace files")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return parser


#: options of the plain model only, and of the session model only
_PLAIN_ONLY = ("fifo_network", "dfs", "reduce", "symmetry", "por", "plain_visited",
               "checkpoint", "spill_dir", "workload", "destinations", "bypass_refusal",
               "trace_dir")
_SESSION_ONLY = ("session", "restart", "senders", "ticks", "server_restart", "direct",
                 "registry", "state", "transfer", "state_timeout")


def _given(args: argparse.Namespace, names: Sequence[str]) -> list[str]:
    """The flags of ``names`` given a value other than their default."""
    defaults = build_parser()
    return ["--" + name.replace("_", "-") for name in names
            if getattr(args, name) != defaults.get_default(name)]


def _run_session(args: argparse.Namespace) -> int:
    from groupcomm.check.session_rules import SessionCheckConfig, check_session
    from groupcomm.core.registry import get_module

    given = _given(args, _PLAIN_ONLY)
    if given:
        raise CliError(f"groupcomm check: {', '.join(given)} belong(s) to the plain model; "
                       "the session model explores whole clients without them")
    protocol = args.protocol or "none"
    checked_module(get_module, protocol, "groupcomm check", warn=False)
    config = SessionCheckConfig(
        processes=2 if args.processes is None else args.processes, late=tuple(args.join),
        leaving=tuple(args.leave), restarting=tuple(args.restart),
        messages=1 if args.messages is None else args.messages,
        senders=tuple(args.senders) if args.senders else None, ticks=args.ticks,
        server_restart=args.server_restart, direct=args.direct, registry=args.registry,
        protocol=protocol, state=args.state is not None or args.transfer != "correct",
        asking=tuple(args.state) if args.state else None,
        transfer=args.transfer, state_timeout=args.state_timeout,
        max_states=2_000_000 if args.max_states is None else args.max_states)
    try:
        config.validate()
    except ValueError as error:
        raise CliError(f"groupcomm check: {error}") from None
    started = time.monotonic()

    def progress(states: int, depth: int) -> None:
        if not (args.json or args.quiet):
            print(f"  {states:,} states, depth {depth} ...", file=sys.stderr, flush=True)

    result = check_session(config, progress)
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({**dataclasses.asdict(result), "seconds": round(seconds, 2)}))
    else:
        print(result.summary())
        print(f"({seconds:.1f} s)")
    return {"ok": 0, "violation": 1}.get(result.result, 3)


def _config(args: argparse.Namespace) -> Any:
    from groupcomm.check import CheckConfig, ConfigError, load_workload

    if args.protocol is None:
        raise CliError("groupcomm check: --protocol is required (a causality module, see "
                       "groupcomm filters), but for the session model (--session)")
    args.processes = 3 if args.processes is None else args.processes
    args.messages = 2 if args.messages is None else args.messages
    if args.max_states is not None and args.max_states < 1:
        raise CliError(f"groupcomm check: --max-states must be >= 1, got {args.max_states}")
    if args.processes < 2 or args.processes > 9:
        raise CliError(f"groupcomm check: --processes must be 2..9, got {args.processes}")
    if args.messages < 0:
        raise CliError(f"groupcomm check: --messages must be >= 0, got {args.messages}")
    workload = None
    if args.workload:
        try:
            workload = load_workload(args.workload)
        except ConfigError as error:
            raise CliError(f"groupcomm check: {error}") from None
    if args.memory_budget <= 0:
        raise CliError("groupcomm check: --memory-budget must be > 0 GB")
    if args.memo_limit < 1:
        raise CliError("groupcomm check: --memo-limit must be >= 1")

    def progress(info: dict[str, Any]) -> None:
        line = (f"check: {info['states']:,} states, {info['transitions']:,} transitions, "
                f"depth {info['depth']}, frontier {info['frontier']:,}, "
                f"{info['rate']:,.0f} states/s, {info['seconds']:.0f} s")
        if "level" in info:  # compact storage: the level's progress and the memory
            done, size = info["level_done"], info["level_size"]
            rate = info["level_rate"]
            left = (size - done) / rate if rate else 0.0
            line += (f"; level {info['level']}: {done:,}/{size:,} expanded, ends in "
                     f"~{left:.0f} s, next level {info['next_level']:,} so far; visited "
                     f"{info['visited_bytes'] / 2**20:,.0f} MiB, peak RSS "
                     f"{info['peak_rss_bytes'] / 2**30:.2f} GiB, P(collision) "
                     f"{info['collision_probability']:.1e}")
        print(line, file=sys.stderr, flush=True)

    return CheckConfig(
        protocol=args.protocol, processes=args.processes, messages=args.messages,
        fifo_network=args.fifo_network, dfs=args.dfs, reduce=args.reduce,
        symmetry=args.symmetry, por=args.por, compact=not args.plain_visited,
        memory_budget_gb=args.memory_budget, memo_limit=args.memo_limit,
        spill_dir=Path(args.spill_dir) if args.spill_dir else None,
        checkpoint=Path(args.checkpoint) if args.checkpoint else None,
        checkpoint_interval=args.checkpoint_every,
        max_states=args.max_states, workload=workload, destinations=args.destinations,
        bypass_refusal=args.bypass_refusal, progress=None if args.quiet else progress,
        late=tuple(args.join), leaving=tuple(args.leave),
    )


def _body(args: argparse.Namespace) -> int:
    from groupcomm.check import ConfigError, check, write_counterexample

    setup_logging(args.verbose)
    if _given(args, _SESSION_ONLY):
        return _run_session(args)
    config = _config(args)
    ensure_trace_dir(args.trace_dir, "groupcomm check")
    try:
        result = check(config, keep=cli_args.kept_until_exit)  # (it quiets the module's loggers)
    except (ConfigError, ValueError) as error:
        raise CliError(f"groupcomm check: {error}") from None
    written = []
    if args.trace_dir and result.result == "violation":
        written = [str(p) for p in write_counterexample(config, result, args.trace_dir)]
    if args.json:
        out = result.as_dict()
        out["trace_files"] = written
        print(json.dumps(out, indent=2))
    else:
        print(f"result: {result.result}")
        print(f"protocol: {result.protocol} ({result.processes} processes, "
              + (f"{result.messages} messages each" if not config.workload else "workload")
              + (", FIFO network" if config.fifo_network else "")
              + (f", {', '.join(config.late)} joining late" if config.late else "")
              + (f", {', '.join(config.leaving)} leaving" if config.leaving else "") + ")")
        if config.symmetry:
            print(f"symmetry: {result.config.get('symmetry')}")
        if config.por:
            print(f"partial-order reduction: {result.config.get('por_reduced_states', 0):,} "
                  "states expanded with a persistent set smaller than all enabled transitions")
        if result.property:
            print(f"property: {result.property}")
            print(f"detail: {result.detail}")
        print(f"states: {result.states:,} unique")
        print(f"transitions: {result.transitions:,}")
        print(f"max_depth: {result.max_depth}")
        print(f"terminal_states: {result.terminal_states:,}")
        rate = result.states / result.seconds if result.seconds else 0
        print(f"seconds: {result.seconds:.2f} ({rate:,.0f} states/s)")
        if "visited_bytes" in result.config:
            print(f"storage: {result.config['visited_bytes']:,} bytes of fingerprints "
                  f"(8 per class); probability of a fingerprint collision "
                  f"{result.config['collision_probability']:.1e}"
                  + (f"; resumed at level {result.config['resumed_at_level']}"
                     if "resumed_at_level" in result.config else "")
                  + (f"; {result.config['checkpoints_written']} checkpoint(s) written"
                     if result.config.get("checkpoints_written") else ""))
        if result.stopped:
            print(f"stopped: {result.stopped}")
        if result.counterexample:
            print(f"counterexample ({len(result.counterexample)} steps):")
            for n, step in enumerate(result.counterexample, start=1):
                print(f"  {n:3d}. {step}")
        if result.completion:
            print("then, so that the traces show both deliveries:")
            for n, step in enumerate(result.completion, start=len(result.counterexample) + 1):
                print(f"  {n:3d}. {step}")
        if written:
            print(f"trace files: {args.trace_dir} ({len(written)} files); confirm with "
                  f"groupcomm analyze {args.trace_dir} --report DIR")
    return {"ok": 0, "violation": 1}.get(result.result, 3)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``groupcomm check``."""
    given = list(sys.argv[2:] if argv is None else argv)
    if any(a == "--checkpoint" or a.startswith("--checkpoint=") for a in given) \
            and os.environ.get("PYTHONHASHSEED") in (None, "", "random"):
        # fingerprints are Python hashes, seeded per process: a run that is to be
        # resumed must hash as the one that wrote the checkpoint
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "groupcomm.cli", "check", *given],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    return run_main(build_parser, _body, argv)
