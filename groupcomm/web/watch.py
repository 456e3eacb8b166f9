"""``groupcomm watch --trace-dir DIR``: the live session view of a session without a
gateway, from the trace files its members write (docs/web.md, "The live session view")."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from groupcomm.cli.args import ArgumentParser, CliError, run_main, setup_logging
from groupcomm.web.gateway import static_file
from groupcomm.web.live import LiveViews
from groupcomm.web.trace_tail import TraceTail

PROG = "groupcomm watch"
log = logging.getLogger(__name__)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Follow a directory of trace files (--trace-dir of groupcomm im, edit, "
        "web, demo, ...) as the session runs, and serve the live session view on "
        "http://127.0.0.1:PORT/session: members and their clocks, the messages each holds "
        "and what they wait for, and the space-time diagram.")
    parser.add_argument("--trace-dir", required=True, metavar="DIR",
                        help="the session's trace directory (its subdirectories are views "
                        "of their own: a gateway writes DIR/im and DIR/edit)")
    parser.add_argument("--port", type=int, default=8090,
                        help="port on 127.0.0.1 to serve the page on (default 8090; 0 picks "
                        "a free one)")
    parser.add_argument("--poll", type=float, default=0.2, metavar="SECONDS",
                        help="how often to look for new trace lines (default 0.2)")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


async def page(request: web.Request) -> web.Response:
    return static_file("session.html")


async def static(request: web.Request) -> web.Response:
    return static_file(request.match_info["name"])


async def follow(tail: TraceTail, live: LiveViews, every: float) -> None:
    """Poll the directory for ever, feeding each view what was appended."""
    while True:
        try:
            batch = tail.poll()
        except OSError as error:  # the directory went away: say so and keep trying
            log.warning("cannot read %s: %s", tail.directory, error.strerror or error)
        else:
            for name, records in sorted(batch.records.items()):
                if records or name not in live.views:
                    live.feed(name, records)
            if batch.bad:
                live.counters["bad_lines"] += batch.bad
        await asyncio.sleep(every)


async def serve(args: argparse.Namespace, sock: socket.socket) -> None:
    tail = TraceTail(args.trace_dir)
    live = LiveViews(views=(".",), title=f"trace directory {args.trace_dir}")
    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/session", page)
    app.router.add_get("/static/{name}", static)
    live.add_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    port = sock.getsockname()[1]
    print(f"watching {args.trace_dir}: http://127.0.0.1:{port}/session", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    follower = asyncio.create_task(follow(tail, live, args.poll))
    try:
        await stop.wait()
    finally:
        follower.cancel()
        await runner.cleanup()
        bad = sum(tail.bad.values())
        summary = f"; {bad} bad trace lines skipped ({dict(tail.bad)})" if bad else ""
        print(f"stopped{summary}", flush=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if not Path(args.trace_dir).is_dir():
        raise CliError(f"{PROG}: --trace-dir {args.trace_dir} is not a directory")
    if not 0 <= args.port <= 65535:
        raise CliError(f"{PROG}: --port must be 0 to 65535, got {args.port}")
    if args.poll <= 0:
        raise CliError(f"{PROG}: --poll must be > 0")
    try:
        sock = socket.create_server(("127.0.0.1", args.port))
    except OSError as error:
        raise CliError(f"{PROG}: cannot listen on 127.0.0.1:{args.port}: "
                       f"{error.strerror or error}") from None
    asyncio.run(serve(args, sock))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, run, argv)


if __name__ == "__main__":
    sys.exit(main())
