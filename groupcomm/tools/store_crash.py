"""``groupcomm store-crash``: kill the session server (SIGKILL) at random moments while
two members type, restart it on its store, and count what a newcomer gets back after
everyone left (docs/storage.md, "The durability point"). Each run: ``alice`` and ``bob``
send to each other, the server is killed and restarted once during the typing and once
after both left; then ``carol`` joins alone and gets the stored state.

Counted per run: messages sent, relayed (delivered to the other member: the server
stored them before forwarding), restored (at the newcomer), lost (relayed but not
restored), duplicated (restored twice), and those that died inside the killed server
before its commit (sent, never relayed) and that only their sender's snapshot carries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groupcomm.cli.args import ArgumentParser, run_main, setup_logging
from groupcomm.core.session_messages import Snapshot
from groupcomm.protocol import session_events as events
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection, Listeners, StateTransfer


class Log:
    """An application whose state is every message it sent or was handed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[str] = []  # message ids
        self.received: list[str] = []
        self.events: list[events.SessionEvent] = []
        self.comm: Communicator | None = None

    def on_message(self, message: Any) -> None:
        with self.lock:
            self.entries.append(message.app_message_id)
            self.received.append(message.app_message_id)

    def send(self) -> str:
        assert self.comm is not None
        with self.lock:
            message_id = self.comm.to_others("x").message_id
            self.entries.append(message_id)
        return message_id

    def provide(self) -> Snapshot:
        with self.lock:
            return Snapshot(list(self.entries), reflects=tuple(self.entries))

    def consume(self, state: list[str]) -> None:
        with self.lock:
            self.entries = list(state) + self.entries

    def settled(self) -> bool:
        return any(isinstance(e, (events.StateInstalled, events.StateUnavailable))
                   for e in list(self.events))


@dataclass
class RunCounts:
    sent: int = 0
    relayed: int = 0
    restored: int = 0
    lost: int = 0
    duplicated: int = 0
    died_in_server: int = 0
    died_but_in_a_snapshot: int = 0
    unknown: int = 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _member(group: ProcessGroup, name: str, log: Log) -> Communicator:
    assert group.server is not None
    comm = Communicator(name, "crash", server=group.server.address,
                        key_file=str(group.key_file), connection=Connection(heartbeat_interval=0.2),
                        state=StateTransfer(provider=log.provide, consumer=log.consume),
                        listeners=Listeners(message=log.on_message, event=log.events.append))
    log.comm = comm
    return comm


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _quiet(logs: Sequence[Log], timeout: float = 30.0, still: float = 1.0) -> None:
    """Until no member's log changed for ``still`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = tuple(len(log.entries) for log in logs)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still:
            return
        time.sleep(0.05)


def one_run(workdir: Path, rng: random.Random, messages: int = 300) -> RunCounts:
    """One run (see the module doc); ``messages``: each typist's."""
    port = _free_port()
    with ProcessGroup(workdir, server_bind=f"tcp://127.0.0.1:{port}", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(workdir / "store.db"),
            "--snapshot-every", "40", "--snapshot-seconds", "0.5"]) as group:
        logs = {name: Log() for name in ("alice", "bob")}
        comms = {name: _member(group, name, logs[name]) for name in logs}
        sent: dict[str, list[str]] = {name: [] for name in logs}
        try:
            _wait(lambda: all(len(c.members) == 2 for c in comms.values()), 20, "joins")

            def type_(name: str) -> None:
                for _ in range(messages):
                    try:
                        sent[name].append(logs[name].send())
                    except Exception:  # noqa: BLE001 - a send refused while away: next
                        pass
                    time.sleep(rng.uniform(0.0005, 0.003))

            typists = [threading.Thread(target=type_, args=(n,)) for n in logs]
            for thread in typists:
                thread.start()
            time.sleep(rng.uniform(0.05, 0.6))
            assert group.server is not None
            group.server.kill()  # SIGKILL, in the middle of the typing
            time.sleep(rng.uniform(0.0, 0.3))
            group.start_server()
            for thread in typists:
                thread.join(60)
            _quiet(list(logs.values()))
            if os.environ.get("GROUPCOMM_STORE_CRASH_DEBUG"):
                print({n: c.counters() for n, c in comms.items()}, file=sys.stderr)
        finally:
            for comm in comms.values():
                comm.close()
        group.server.kill()  # and again with nobody in the session
        group.start_server()
        carol = Log()
        comm = _member(group, "carol", carol)
        try:
            _wait(carol.settled, 30, "carol's state")
        finally:
            comm.close()
    everything = {i for ids in sent.values() for i in ids}
    relayed = set(logs["alice"].received) | set(logs["bob"].received)
    restored = carol.entries
    died = everything - relayed
    return RunCounts(
        sent=len(everything), relayed=len(relayed), restored=len(restored),
        lost=len(relayed - set(restored)), duplicated=len(restored) - len(set(restored)),
        died_in_server=len(died), died_but_in_a_snapshot=len(died & set(restored)),
        unknown=len(set(restored) - everything))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="groupcomm store-crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs (default 10)")
    parser.add_argument("--messages", type=int, default=300,
                        help="messages each of the two typists sends per run (default 300)")
    parser.add_argument("--seed", type=int, default=None, help="random seed")
    parser.add_argument("--json", action="store_true", help="one JSON line per run")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    rng = random.Random(args.seed)
    totals = RunCounts()
    with tempfile.TemporaryDirectory(prefix="groupcomm-store-crash-") as tmp:
        for run in range(args.runs):
            counts = one_run(Path(tmp) / f"run{run}", rng, args.messages)
            for key, value in asdict(counts).items():
                setattr(totals, key, getattr(totals, key) + value)
            print(json.dumps({"run": run, **asdict(counts)}) if args.json else
                  f"run {run}: " + ", ".join(f"{k} {v}" for k, v in asdict(counts).items()),
                  flush=True)
    print("total: " + ", ".join(f"{k} {v}" for k, v in asdict(totals).items()))
    return 1 if totals.lost or totals.duplicated or totals.unknown else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
