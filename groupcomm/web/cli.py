"""``groupcomm web``, ``groupcomm web user add|remove`` and ``groupcomm web bench``
(docs/web.md)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from collections.abc import Sequence

from aiohttp import web

from groupcomm.apps.session_options import add_reliable_argument, session_options
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_module_arguments,
    run_main,
    setup_logging,
)
from groupcomm.filters.latest_value import DEFAULT_HOLD
from groupcomm.replicated import unsupported_reason
from groupcomm.transport import collector
from groupcomm.web.auth import Users, UsersError, login_link
from groupcomm.web.gateway import Gateway

PROG = "groupcomm web"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Serve the IM and the shared editor to browsers: each logged-in tab is "
        "a member of the session. Add people with: groupcomm web user add NAME --users "
        "FILE --url http://HOST:PORT")
    parser.add_argument("--session", required=True, action="append", metavar="NAME",
                        help="session the tabs join; repeatable: a tab names one with "
                        "?session=NAME on its page's address (the first without it)")
    parser.add_argument("--users", required=True, metavar="FILE",
                        help="users file (groupcomm web user add creates it)")
    parser.add_argument("--http", default="127.0.0.1:8080", metavar="HOST:PORT",
                        help="where to serve the pages (default 127.0.0.1:8080; port 0 "
                        "picks one)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="another origin allowed to open WebSockets (e.g. behind a "
                        "proxy: https://chat.example.org); repeatable")
    add_module_arguments(parser)
    add_reliable_argument(parser)
    parser.add_argument("--delay", action="append", default=[], metavar="PEER=MS",
                        help="minimum delay for every tab's messages to PEER (testing)")
    parser.add_argument("--jitter", type=float, default=0.0, metavar="MS",
                        help="random extra delay per message, per-peer order kept")
    parser.add_argument("--presence-hold", type=float, default=DEFAULT_HOLD * 1000,
                        metavar="MS", help="jitter buffer for the others' cursor moves")
    parser.add_argument("--trace-dir", help="write every tab member's trace here "
                        "(DIR/im, DIR/edit)")
    parser.add_argument("--thread-per-tab", action="store_true",
                        help="run each tab's member on a thread of its own instead of one "
                        "poll thread for all (for comparison)")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _user_parser(command: str, description: str, name_help: str) -> ArgumentParser:
    """The parser of ``user add`` / ``user remove``: a name and the users file."""
    parser = ArgumentParser(prog=f"{PROG} user {command}", description=description)
    parser.add_argument("name", help=name_help)
    parser.add_argument("--users", required=True, metavar="FILE", help="users file")
    return parser


def build_user_parser() -> ArgumentParser:
    parser = _user_parser("add", "Add a user (or give it a new token) and print its login "
                          "links.", "the user's name (its member name in the session)")
    parser.add_argument("--url", required=True, help="the gateway's address, e.g. "
                        "http://127.0.0.1:8080")
    parser.add_argument("--session", action="append", default=[], metavar="NAME",
                        help="print the links into this session of a gateway serving "
                        "several (repeatable; default: the gateway's first session)")
    return parser


def build_remove_parser() -> ArgumentParser:
    return _user_parser("remove", "Remove a user: its token no longer logs in, and a "
                        "running gateway closes its open tabs within seconds.",
                        "the user's name")


def _host_port(spec: str) -> tuple[str, int]:
    host, colon, port = spec.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise CliError(f"{PROG}: --http takes HOST:PORT (port 0 to 65535), got {spec!r}")
    return host.strip("[]"), int(port)


def _add_user(args: argparse.Namespace) -> int:
    if not args.url.startswith(("http://", "https://")):
        raise CliError(f"{PROG} user add: --url must start with http:// or https://, "
                       f"got {args.url!r}")
    try:
        token = Users(args.users).add(args.name)  # checks the name
    except (UsersError, OSError) as error:
        raise CliError(f"{PROG} user add: {error}") from None
    print(f"added {args.name} to {args.users}; login links (keep them private):")
    for session in args.session or [None]:
        if session is not None:
            print(f"  in session {session}:")
        for label, page in (("chat:  ", "im"), ("editor:", "edit"), ("session view:", "session")):
            print(f"  {label} {login_link(args.url, args.name, token, page, session)}")
    return 0


def _remove_user(args: argparse.Namespace) -> int:
    try:
        Users(args.users).remove(args.name)
    except (UsersError, OSError) as error:
        raise CliError(f"{PROG} user remove: {error}") from None
    print(f"removed {args.name} from {args.users}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    host, port = _host_port(args.http)
    if args.presence_hold < 0:
        raise CliError(f"{PROG}: --presence-hold must be >= 0")
    args.name, args.application, args.curve_dir = None, "web", None
    args.bind_host, args.advertise_host = "127.0.0.1", None
    options = session_options(args, PROG)
    try:
        users = Users(args.users)
    except UsersError as error:
        raise CliError(f"{PROG}: {error}") from None
    if not users.names:
        print(f"{PROG}: warning: {args.users} has no users yet (add one with {PROG} user "
              "add NAME)", file=sys.stderr)
    module = options.selection.causality or "none"
    gateway = Gateway(users, args.session, communicator_kwargs=options.communicator_kwargs,
                      inject_delays=options.inject_delays,
                      presence_hold=args.presence_hold / 1000,
                      edit_refusal=unsupported_reason(module), module=module,
                      allowed_origins=tuple(args.allow_origin),
                      share_thread=not args.thread_per_tab)
    try:
        sock = socket.create_server((host, port))
    except OSError as error:
        raise CliError(f"{PROG}: cannot listen on {args.http}: {error}") from None
    asyncio.run(_run(gateway, sock))
    return 0


async def _run(gateway: Gateway, sock: socket.socket) -> None:
    runner = web.AppRunner(gateway.app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    host, port = sock.getsockname()[:2]
    collector.settle()
    print(f"listening on http://{host}:{port} (session {', '.join(gateway.sessions)}, causality "
          f"{gateway.module})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        print("stopped", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["bench"]:
        from groupcomm.web import bench

        return run_main(bench.build_parser, bench.run, args[1:])
    if args[:2] == ["user", "add"]:
        return run_main(build_user_parser, _add_user, args[2:])
    if args[:2] == ["user", "remove"]:
        return run_main(build_remove_parser, _remove_user, args[2:])
    if args[:1] == ["user"]:
        print(f"{PROG} user: the user commands are: {PROG} user add NAME --users FILE "
              f"--url URL, and {PROG} user remove NAME --users FILE", file=sys.stderr)
        return 2
    return run_main(build_parser, _serve, args)


if __name__ == "__main__":
    sys.exit(main())
