"""``groupcomm store bench``: what the session store's durability point costs. One
member sends small messages to another through a session server (in this process, on
its own thread) without a store, and with a SQLite store committing once per turn of
the server's loop before it forwards (``synchronous`` FULL, then NORMAL); prints
messages per second, commits and messages per commit (docs/storage.md)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from groupcomm.cli.args import ArgumentParser, run_main, setup_logging
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners
from groupcomm.transport.keys import write_new_key
from groupcomm.transport.server import SessionServer


def one(workdir: Path, messages: int, store: str | None, pace: float) -> dict[str, float]:
    """Messages a second from alice to bob, and the server's store counters."""
    key_path = workdir / "k"
    key = write_new_key(key_path)
    backend = None if store is None else SQLiteStore(workdir / f"{store}.db",
                                                     synchronous=store)
    server = SessionServer(key, store=backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    done = threading.Event()
    got = [0]

    def on_message(_message: object) -> None:
        got[0] += 1
        if got[0] == messages:
            done.set()

    alice = Communicator("alice", "bench", server=server.address, key_file=str(key_path))
    bob = Communicator("bob", "bench", server=server.address, key_file=str(key_path),
                       listeners=Listeners(message=on_message))
    try:
        deadline = time.monotonic() + 20
        while len(alice.members) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.perf_counter()
        for i in range(messages):
            alice.to_user("bob", f"key {i}")
            if pace:
                time.sleep(pace)
        if not done.wait(120):
            raise TimeoutError(f"{got[0]} of {messages} messages arrived")
        elapsed = time.perf_counter() - start
        counters = server.counters()
    finally:
        alice.close()
        bob.close()
        server.stop()
        thread.join(10)
    commits = counters.get("store_commits", 0)
    return {"messages_per_s": messages / elapsed, "commits": commits,
            "per_commit": counters.get("store_messages", 0) / commits if commits else 0.0,
            "commit_us": counters.get("store_commit_us", 0) / commits if commits else 0.0}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="groupcomm store bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds between sends (0: as fast as they go)")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    with tempfile.TemporaryDirectory(prefix="groupcomm-store-bench-") as tmp:
        for store in (None, "FULL", "NORMAL"):
            workdir = Path(tmp) / (store or "none")
            workdir.mkdir()
            result = one(workdir, args.messages, store, args.pace)
            label = "no store" if store is None else f"store, synchronous={store}"
            print(f"{label:28} {result['messages_per_s']:9,.0f} messages/s  "
                  f"{result['commits']:6.0f} commits  {result['per_commit']:6.1f} "
                  f"messages/commit  {result['commit_us']:7.0f} us/commit", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
