"""``groupcomm member-bench``: how many terminal editors one session server holds.
Sessions × members per session × typing rate of real member processes (each member a
communicator with the shared text, as ``groupcomm edit`` runs it; several members in
each load process), through one ``groupcomm serve`` process, growing until a limit is
crossed, with the reason it stopped; then the same load against pycrdt-websocket's
server with Yjs clients, in the same run (BENCHMARKS.md, "Capacity of one session
server")."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groupcomm.cli.args import ArgumentParser, CliError, checked_module, run_main
from groupcomm.core.registry import get_module
from groupcomm.replicated import supported_modules, unsupported_reason
from groupcomm.tools.members import step as member_step
from groupcomm.tools.members.step import Limits, from_peer, verdict
from groupcomm.web import capacity as web_capacity

PROG = "groupcomm member-bench"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--causality", default="matrix", help="causality module (default matrix)")
    parser.add_argument("--no-reliable", action="store_true",
                        help="members without the reliable layer under the module")
    web_capacity.add_load_arguments(
        parser, "members", queue_help="... or a member's module holding more messages "
        "than this", queue_unit="MESSAGES", memory_of="the server")
    parser.add_argument("--members-per-process", type=int, default=20, metavar="N",
                        help="members in each load process, each with its own connection "
                        "to the server (default 20)")
    parser.add_argument("--plot", metavar="PNG", help="write p99 against members here, "
                        "with the peer's")
    parser.add_argument("--skip", action="append", default=[], choices=["peer"],
                        help="leave the pycrdt-websocket peer out")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def check(args: argparse.Namespace) -> list[int]:
    """The steps' numbers of sessions; a clear error for arguments no run can take (the
    web capacity bench's checks, in this command's words; the module as ``edit``'s)."""
    if args.members_per_process < 1:
        raise CliError(f"{PROG}: --members-per-process must be at least 1")
    # the members run the shared text: a module it cannot run on is refused, as by edit
    reason = unsupported_reason(checked_module(get_module, args.causality, PROG, warn=False))
    if reason:
        raise CliError(f"{PROG}: refusing {reason} (the shared text runs on "
                       f"{', '.join(supported_modules())})")
    return web_capacity.check_load(
        PROG, rate=args.rate, seconds=args.seconds, p99_limit=args.p99_limit,
        queue_limit=args.queue_limit, mb_limit=args.mb_per_member,
        per_session=args.members_per_session, most_total=args.max_members,
        sessions=args.sessions, noun="members")


def capacity(args: argparse.Namespace, plan: list[int],
             progress: web_capacity.Progress) -> dict[str, Any]:
    """The steps, each with a fresh server, until one crosses a limit; then the peer's."""
    limits = Limits(args.p99_limit, args.queue_limit, args.mb_per_member)
    rows: list[dict[str, Any]] = []
    reason = None
    for number, sessions in enumerate(plan, 1):
        load = member_step.Load(sessions, args.members_per_session, args.rate, args.seconds,
                                args.members_per_process, args.causality,
                                not args.no_reliable)
        progress(f"step {number}/{len(plan)}: {sessions} session(s) × "
                 f"{args.members_per_session} members, {args.rate:g} keys/s each")
        row = member_step.run_step(load, progress)
        rows.append(row)
        progress(f"  {row['members']} members: p50 {row.get('p50_ms')} ms, p99 "
                 f"{row.get('p99_ms')} ms, server CPU {row.get('server_cpu_percent')}% "
                 f"({row.get('server_cpu_percent_per_member')}% per member), "
                 f"{row.get('server_mb_per_member')} MB per member, waiting for a core "
                 f"{row.get('server_waited_percent')}%, load processes' CPU "
                 f"{row.get('load_cpu_percent')}%"
                 + (f"; {row['error']}" if "error" in row else ""))
        reason = verdict(row, limits)
        if reason:
            break
    result: dict[str, Any] = {
        "causality": args.causality, "reliable": not args.no_reliable,
        "rate_per_member": args.rate, "members_per_session": args.members_per_session,
        "members_per_process": args.members_per_process, "seconds": args.seconds,
        "p99_limit_ms": args.p99_limit, "steps": rows,
        "stopped": reason or _held(rows, limits)}
    if "peer" not in args.skip:
        result["peer"] = _peer(args, plan, limits, progress)
    if args.plot:
        plot(rows, result.get("peer", {}).get("steps", []), Path(args.plot),
             f"{args.members_per_session} members per session, {args.rate:g} keys/s each; "
             f"{args.causality}", args.p99_limit)
        result["plot"] = args.plot
    return result


def _held(rows: list[dict[str, Any]], limits: Limits) -> str:
    return (f"held at every step up to {rows[-1]['members']} members (p99 within "
            f"{limits.p99_ms:g} ms; raise --max-members to find the limit)")


def _peer(args: argparse.Namespace, plan: list[int], limits: Limits,
          progress: web_capacity.Progress) -> dict[str, Any]:
    """The same steps against pycrdt-websocket's server, if it is installed."""
    try:
        import pycrdt.websocket  # noqa: F401
    except ImportError:
        return {"stopped": "not run: pycrdt-websocket is not installed (pip install "
                "pycrdt-websocket, or --skip peer)", "steps": []}
    from groupcomm.web import crdt_peer

    rows, reason = crdt_peer.peer_steps(
        plan, args.members_per_session, args.rate, args.seconds,
        lambda row: verdict(from_peer(row), limits), progress)
    converted = [from_peer(row) for row in rows]
    return {"steps": converted, "stopped": reason or _held(converted, limits)}


def table(rows: list[dict[str, Any]], server: str = "server") -> list[str]:
    """The steps as a text table (``server``: what the members connect to)."""
    lines = [f"  sessions × members  members  keys/s   p50 ms   p99 ms  {server + ' CPU':>11}"
             "  RSS MB  MB/member  CPU µs/delivery  load CPU (processes)"]
    for row in rows:
        load = ("-" if "load_cpu_percent" not in row else
                f"{row['load_cpu_percent']:g}% ({row.get('load_processes', 1)})")
        lines.append(
            f"  {row['sessions']:8} × {row['members_per_session']:<7} {row['members']:7}  "
            f"{row['rate']:6g} {_num(row.get('p50_ms')):>8} {_num(row.get('p99_ms')):>8}  "
            f"{_num(row.get('server_cpu_percent'), '%'):>11} "
            f"{_num(row.get('server_rss_mb')):>7} {_num(row.get('server_mb_per_member')):>10}"
            f"  {_num(row.get('server_cpu_us_per_delivery')):>15}  {load}")
    return lines


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def plot(rows: list[dict[str, Any]], peer: list[dict[str, Any]], path: Path, title: str,
         limit_ms: float) -> None:
    """p99 (and p50) against members, as a PNG, with pycrdt-websocket's p99."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    measured = [r for r in rows if "p99_ms" in r]
    axes.plot([r["members"] for r in measured], [r["p99_ms"] for r in measured], "o-",
              label="p99, groupcomm serve")
    axes.plot([r["members"] for r in measured], [r["p50_ms"] for r in measured], "s--",
              label="p50, groupcomm serve")
    peer = [r for r in peer if "p99_ms" in r]
    if peer:
        axes.plot([r["members"] for r in peer], [r["p99_ms"] for r in peer], "^-",
                  label="p99, pycrdt-websocket")
    highest = max([r["p99_ms"] for r in measured + peer] or [limit_ms])
    if limit_ms <= 10 * highest:  # a limit far above every step would flatten the curves
        axes.axhline(limit_ms, color="grey", linestyle=":", label=f"limit {limit_ms:g} ms")
    axes.set_yscale("log")  # from milliseconds to seconds
    axes.set_xlabel("members on one session server")
    axes.set_ylabel("keystroke to another member's text (ms)")
    axes.set_title(title, fontsize=9)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _run(args: argparse.Namespace) -> int:
    plan = check(args)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    progress(f"{PROG}: {len(plan)} step(s) up to {plan[-1] * args.members_per_session} "
             f"members, {args.members_per_process} per load process")
    result = capacity(args, plan, progress)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"capacity of one session server: causality {args.causality}"
          f"{'' if args.no_reliable else ' over the reliable layer'}, "
          f"{args.members_per_session} members per session, each typing {args.rate:g} keys/s "
          f"for {args.seconds:g} s; keystroke to every other member of its session")
    for line in table(result["steps"]):
        print(line)
    print(f"  {result['stopped']}")
    if "peer" in result:
        print("the same load against pycrdt-websocket (its server, one process; scripted Yjs "
              "clients, all in this process):")
        for line in table(result["peer"]["steps"], "peer server"):
            print(line)
        print(f"  {result['peer']['stopped']}")
    if "plot" in result:
        print(f"plot: {result['plot']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
