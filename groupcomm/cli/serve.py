"""``groupcomm serve``: run a session server in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from groupcomm.cli.args import ArgumentParser, CliError, run_main, setup_logging
from groupcomm.store.backend import StoreError, open_store
from groupcomm.transport import collector
from groupcomm.transport.address import EndpointError, endpoint
from groupcomm.transport.keys import SessionKeyError, resolve_key, write_new_key
from groupcomm.transport.server import DEFAULT_HEARTBEAT_TIMEOUT, SessionServer
from groupcomm.transport.store_host import (
    DEFAULT_SNAPSHOT_EVERY,
    DEFAULT_SNAPSHOT_SECONDS,
    StorePolicy,
)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm serve",
        description=(
            "Run a session server: clients join named sessions of named applications, are "
            "told of each other's joins and leaves in the same order, and may relay messages "
            "through it. Frames are signed with HMAC-SHA256 under the session key."
        ),
    )
    parser.add_argument("--bind", default="tcp://127.0.0.1:5555",
                        help="ZeroMQ address to bind; port 0 picks a free port "
                        "(default tcp://127.0.0.1:5555); with --workers, the first of "
                        "consecutive ports, or a comma-separated list")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="run N servers, one process each (ports PORT..PORT+N-1), and "
                        "print the --servers list clients take (docs/deploy.md)")
    parser.add_argument("--key-file", help="file holding the session key (hex); default: "
                        "$GROUPCOMM_KEY / $GROUPCOMM_KEY_FILE, else a new key is generated")
    parser.add_argument("--new-key-file", help="where to write a generated key "
                        "(default: a fresh file in the temporary directory)")
    parser.add_argument("--heartbeat-timeout", type=float, default=DEFAULT_HEARTBEAT_TIMEOUT,
                        help="seconds without heartbeats before a client is reported as left "
                        f"(default {DEFAULT_HEARTBEAT_TIMEOUT})")
    parser.add_argument("--curve-dir", metavar="DIR",
                        help="per-client keys (CurveZMQ): encrypt connections, accept only "
                        "clients whose NAME.key is in DIR, under that name (see groupcomm "
                        "keys); off by default")
    parser.add_argument("--store", metavar="PATH|URL",
                        help="keep every session's state in this SQLite file (created if "
                        "missing; WAL mode), or in the PostgreSQL database at a "
                        "postgresql:// URL (docs/storage_postgresql.md), so newcomers get "
                        "it after every member left or the server restarted "
                        "(docs/storage.md); refuses direct routing")
    parser.add_argument("--snapshot-every", type=int, default=DEFAULT_SNAPSHOT_EVERY,
                        metavar="N", help="with --store: ask a member for a fresh snapshot "
                        f"every N kept messages (default {DEFAULT_SNAPSHOT_EVERY})")
    parser.add_argument("--snapshot-seconds", type=float, default=DEFAULT_SNAPSHOT_SECONDS,
                        metavar="S", help="with --store: ... or S seconds after the last one "
                        f"when messages were kept since (default {DEFAULT_SNAPSHOT_SECONDS:g})")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log joins and leaves (-v) or everything (-vv)")
    return parser


def _remove(path: Path | None) -> None:
    """Remove a key file this run wrote, when it fails before serving."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _worker_options(args: argparse.Namespace) -> list[str]:
    """The options every worker takes as this command got them (the key file aside)."""
    options = ["--heartbeat-timeout", str(args.heartbeat_timeout),
               "--snapshot-every", str(args.snapshot_every),
               "--snapshot-seconds", str(args.snapshot_seconds)]
    for flag, value in (("--key-file", args.key_file), ("--curve-dir", args.curve_dir),
                        ("--store", args.store)):
        if value:
            options += [flag, value]
    return options + ["-v"] * args.verbose


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.workers != 1 or "," in args.bind:
        if args.heartbeat_timeout <= 0:
            raise CliError("groupcomm serve: --heartbeat-timeout must be positive")
        from groupcomm.cli.workers import run_workers

        return run_workers(args, _worker_options(args))
    # every argument is checked before anything is written: a refused command line
    # leaves no key file behind
    if args.heartbeat_timeout <= 0:
        raise CliError("groupcomm serve: --heartbeat-timeout must be positive")
    try:
        key = resolve_key(args.key_file)
    except SessionKeyError as error:
        raise CliError(f"groupcomm serve: {error}") from None
    curve = None
    if args.curve_dir:
        from groupcomm.transport.curve import CurveKeyError, ServerKeys

        try:
            curve = ServerKeys.from_dir(args.curve_dir)
        except CurveKeyError as error:
            raise CliError(f"groupcomm serve: --curve-dir: {error}") from None
    try:
        bind = endpoint(args.bind, "--bind")
    except EndpointError as error:
        raise CliError(f"groupcomm serve: {error}") from None
    try:
        policy = StorePolicy(args.snapshot_every, args.snapshot_seconds)
    except ValueError as error:
        raise CliError(f"groupcomm serve: {error}") from None
    store = None
    if args.store:
        try:
            store = open_store(args.store)
        except StoreError as error:
            raise CliError(f"groupcomm serve: --store: {error}") from None
    key_path = args.key_file
    written: Path | None = None  # a key file this run created (removed if it fails)
    if key is None:
        if args.new_key_file:
            key_path = args.new_key_file
            if not Path(key_path).exists():
                written = Path(key_path)
        else:
            handle, key_path = tempfile.mkstemp(prefix="groupcomm-", suffix=".key")
            os.close(handle)
            written = Path(key_path)
        try:
            key = write_new_key(key_path)
        except OSError as error:
            _remove(written)
            if store is not None:
                store.close()
            raise CliError(f"groupcomm serve: cannot write key file {key_path}: "
                           f"{error.strerror or error}") from None
    try:
        server = SessionServer(key, bind, heartbeat_timeout=args.heartbeat_timeout,
                               curve=curve, store=store, store_policy=policy)
    except StoreError as error:
        _remove(written)
        raise CliError(f"groupcomm serve: --store: {error}") from None
    except Exception as error:  # zmq errors: address in use, unknown host
        _remove(written)
        if store is not None:
            store.close()
        raise CliError(f"groupcomm serve: cannot bind {args.bind}: {error}") from None
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    collector.settle()
    print(f"listening on {server.address}", flush=True)
    if store is not None:
        print(f"store: {store.location}", flush=True)
    if key_path:
        print(f"key file: {Path(key_path).resolve()}", flush=True)
    server.serve_forever()
    counts = server.counters()
    if counts:
        print("counters: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())),
              file=sys.stderr)
    print("server stopped", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
