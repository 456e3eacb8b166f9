"""``groupcomm check-session``: exhaustive checking of the session protocol (the real
session registry, clients' membership and protocol nodes) under joins, departures,
crashes and restarts under the same name, false suspicions, direct frames racing join
notices, and a server restart.

Examples::

    groupcomm check-session --processes 3 --join p3 --leave p2
    groupcomm check-session --processes 2 --restart p2 --ticks 2
    groupcomm check-session --processes 2 --ticks 2            # false suspicions
    groupcomm check-session --processes 2 --server-restart --ticks 1
    groupcomm check-session --processes 2 --join p2 --direct
    groupcomm check-session --processes 2 --restart p2 --registry reuses-incarnation

Exit status: 0 ok, 1 violation, 3 incomplete (``--max-states`` reached), 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence

from groupcomm.check.session_rules import (
    REGISTRIES,
    SessionCheckConfig,
    check_session,
)
from groupcomm.cli.args import ArgumentParser, CliError, run_main


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm check-session",
        description="Explore every interleaving of clients joining, sending, leaving, "
        "crashing and restarting, heartbeats, time passing and server restarts, with the "
        "real session registry and client membership; check that every member learns "
        "joins and leaves in one order, member ids are never reused, relayed frames never "
        "reach a client before their sender's join notice, nothing owed is lost and "
        "every member's view ends as the server's.",
    )
    parser.add_argument("--processes", type=int, default=2, help="clients p1..pN (1-4)")
    parser.add_argument("--join", nargs="+", default=[], metavar="P",
                        help="clients that start after the others")
    parser.add_argument("--leave", nargs="+", default=[], metavar="P",
                        help="clients that may leave (once)")
    parser.add_argument("--restart", nargs="+", default=[], metavar="P",
                        help="clients that may crash and restart under the same name (once)")
    parser.add_argument("--messages", type=int, default=1,
                        help="frames each start of a client sends to the members it knows")
    parser.add_argument("--senders", nargs="+", metavar="P",
                        help="only these clients send (default: every one)")
    parser.add_argument("--ticks", type=int, default=0,
                        help="seconds that may pass (heartbeat timeout 1.5 s, takeover "
                        "wait 1 s): 2 allow false suspicions and takeovers")
    parser.add_argument("--server-restart", action="store_true",
                        help="the server may restart once (frames inside it are lost)")
    parser.add_argument("--direct", action="store_true",
                        help="frames go straight to members (they may overtake join notices)")
    parser.add_argument("--registry", default="correct", choices=sorted(REGISTRIES),
                        help="the real registry, or a known-bad variant to catch")
    parser.add_argument("--max-states", type=int, default=2_000_000)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def _run(args: argparse.Namespace) -> int:
    config = SessionCheckConfig(
        processes=args.processes, late=tuple(args.join), leaving=tuple(args.leave),
        restarting=tuple(args.restart), messages=args.messages,
        senders=tuple(args.senders) if args.senders else None, ticks=args.ticks,
        server_restart=args.server_restart, direct=args.direct, registry=args.registry,
        max_states=args.max_states)
    try:
        config.validate()
    except ValueError as error:
        raise CliError(f"groupcomm check-session: {error}") from None
    started = time.monotonic()

    def progress(states: int, depth: int) -> None:
        if not args.json:
            print(f"  {states:,} states, depth {depth} ...", file=sys.stderr, flush=True)

    result = check_session(config, progress)
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({**dataclasses.asdict(result), "seconds": round(seconds, 2)}))
    else:
        print(result.summary())
        print(f"({seconds:.1f} s)")
    return {"ok": 0, "violation": 1}.get(result.result, 3)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)
