"""``groupcomm store crash``: kill the session server (SIGKILL) at random moments while
two members type, restart it on its store, and count what reached whom
(docs/storage.md, "The durability point"). Each run: ``alice`` and ``bob`` send to each
other, with the ``reliable`` layer as the apps run by default (``--no-reliable``: without
it); the server is killed and restarted once during the typing and once after both left;
then ``carol`` joins alone and gets the stored state.

Counted per run, end to end: messages typed, refused (the send call failed: never sent),
reached (got by the other member in the end, after the restart and any retransmission,
delivered or in the state it installed on joining),
lost (typed, never reached the other member), duplicated (handed to it more than once),
died in the server (whose first copy never came out of a server: with the layer they
had to be retransmitted, without it they are lost); then what the newcomer restored:
restored, store_lost (reached, not restored), store_duplicated (restored twice), and
unknown (restored, never typed).
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groupcomm.cli.args import ArgumentParser, run_main, setup_logging
from groupcomm.core.filtering import FilterHost, MessageFilter, MessageFilterCreator
from groupcomm.core.messages import GroupMessage
from groupcomm.core.selection import RELIABLE, filter_creators
from groupcomm.core.session_messages import Snapshot
from groupcomm.layers.reliable import SEQ
from groupcomm.protocol import session_events as events
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection, Listeners, Pipelines, StateTransfer

#: the probe's header: which transmission of a numbered frame this copy is
ATTEMPT = "~crash-attempt"


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


class Probe:
    """Below the reliable layer (nearer the network): stamps each numbered frame with
    which transmission of it this copy is, and records which copies arrived, so that a
    frame whose first copy died (inside the killed server, or on the way to or from it)
    is told from one that merely had a retransmission too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.transmissions: Counter[tuple[str, int]] = Counter()  # (peer, seq) -> copies sent
        #: (sender, seq) -> (message id, the transmissions that arrived)
        self.arrived: dict[tuple[str, int], tuple[str, set[int]]] = {}
        self.host: FilterHost | None = None  # for the reliable layer's counters

    def stamp(self, message: GroupMessage) -> GroupMessage:
        seq = message.headers.get(SEQ)
        if not isinstance(seq, int) or not message.is_user_message():
            return message
        with self.lock:
            key = (message.destinations[0], seq)  # type: ignore[attr-defined]
            self.transmissions[key] += 1
            return message.with_headers(**{ATTEMPT: self.transmissions[key]})

    def note(self, message: GroupMessage) -> GroupMessage:
        attempt = message.headers.get(ATTEMPT)
        if not isinstance(attempt, int):
            return message
        with self.lock:
            key = (message.sender, int(message.headers[SEQ]))  # type: ignore[arg-type]
            self.arrived.setdefault(key, (message.app_message_id, set()))[1].add(attempt)
        return message.without_headers(ATTEMPT)

    def first_copy_lost(self) -> set[str]:
        """The messages that arrived, but not by their first transmission."""
        with self.lock:
            return {mid for mid, attempts in self.arrived.values() if 1 not in attempts}


class _ProbeFilter(MessageFilter[Any]):
    def __init__(self, probe: Probe, side: str) -> None:
        super().__init__()
        self.probe, self.side = probe, side

    def filter_message(self, message: Any) -> None:
        self.forward(self.probe.stamp(message) if self.side == "send"
                     else self.probe.note(message))


class _ProbeCreator(MessageFilterCreator[Any]):
    def __init__(self, probe: Probe, side: str) -> None:
        self.probe, self.side = probe, side

    def get_message_filter(self, host: FilterHost) -> MessageFilter[Any]:
        self.probe.host = host
        return _ProbeFilter(self.probe, self.side)


@dataclass
class RunCounts:
    typed: int = 0
    refused: int = 0
    reached: int = 0
    lost: int = 0
    duplicated: int = 0
    died_in_server: int = 0
    restored: int = 0
    store_lost: int = 0
    store_duplicated: int = 0
    unknown: int = 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _member(group: ProcessGroup, name: str, log: Log, probe: Probe | None = None,
            reliable: bool = True) -> Communicator:
    assert group.server is not None
    send, receive = filter_creators([RELIABLE] if reliable else [])
    if probe is not None and reliable:
        send, receive = [*send, _ProbeCreator(probe, "send")], [_ProbeCreator(probe, "receive"),
                                                                *receive]
    comm = Communicator(name, "crash", server=group.server.address,
                        key_file=str(group.key_file), connection=Connection(heartbeat_interval=0.2),
                        pipelines=Pipelines(extra_send=send, extra_receive=receive),
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


def _all_reached(sent: dict[str, list[str]], logs: dict[str, Log], timeout: float) -> None:
    """Until each member got everything the other sent (the layer's retransmissions back
    off to seconds apart), or ``timeout``: what is missing then is counted lost."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(set(sent[other]) <= set(list(logs[name].entries))
               for name in logs for other in logs if other != name):
            return
        time.sleep(0.05)


def _debug(comms: dict[str, Communicator], probes: dict[str, Probe],
           sent: dict[str, list[str]], logs: dict[str, Log]) -> None:
    """What each member counted, and what did not reach it (``GROUPCOMM_STORE_CRASH_DEBUG``)."""
    for name, comm in comms.items():
        host = probes[name].host
        layer = host.shared.get(RELIABLE) if host is not None else None
        missing = [i for other in sent if other != name for i in sent[other]
                   if i not in set(logs[name].entries)]
        print(name, comm.counters(), "reliable:", getattr(layer, "stats", None),
              "undeliverable:", comm.undeliverable(), "missing here:", missing,
              file=sys.stderr)


def one_run(workdir: Path, rng: random.Random, messages: int = 300,
            reliable: bool = True) -> RunCounts:
    """One run (see the module doc); ``messages``: each typist's."""
    port = _free_port()
    with ProcessGroup(workdir, server_bind=f"tcp://127.0.0.1:{port}", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(workdir / "store.db"),
            "--snapshot-every", "40", "--snapshot-seconds", "0.5"]) as group:
        logs = {name: Log() for name in ("alice", "bob")}
        probes = {name: Probe() for name in logs}
        comms = {name: _member(group, name, logs[name], probes[name], reliable)
                 for name in logs}
        sent: dict[str, list[str]] = {name: [] for name in logs}
        refused = 0
        try:
            _wait(lambda: all(len(c.members) == 2 for c in comms.values()), 20, "joins")

            def type_(name: str) -> None:
                nonlocal refused
                for _ in range(messages):
                    try:
                        sent[name].append(logs[name].send())
                    except Exception:  # noqa: BLE001 - a send refused while away: counted
                        refused += 1
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
            if reliable:
                _all_reached(sent, logs, 30.0)
            _quiet(list(logs.values()))
            if os.environ.get("GROUPCOMM_STORE_CRASH_DEBUG"):
                _debug(comms, probes, sent, logs)
        finally:
            for comm in comms.values():
                comm.close()
        group.server.kill()  # and again with nobody in the session
        group.start_server()
        carol = Log()
        comm = _member(group, "carol", carol, reliable=reliable)
        try:
            _wait(carol.settled, 30, "carol's state")
        finally:
            comm.close()
    return _counts(sent, logs, probes, carol, refused, reliable)


def _counts(sent: dict[str, list[str]], logs: dict[str, Log], probes: dict[str, Probe],
            carol: Log, refused: int, reliable: bool) -> RunCounts:
    everything = {i for ids in sent.values() for i in ids}
    # what each member holds of the other's messages: delivered, or in the state it
    # installed when it joined (a message the sender's snapshot reflects is not
    # delivered again)
    held: Counter[str] = Counter()
    for name, log in logs.items():
        theirs = {i for other, ids in sent.items() if other != name for i in ids}
        held.update(i for i in list(log.entries) if i in theirs)
    reached = set(held)
    if reliable:
        died = set().union(*(probe.first_copy_lost() for probe in probes.values()))
    else:
        died = everything - reached
    restored = carol.entries
    return RunCounts(
        typed=len(everything) + refused, refused=refused, reached=len(reached),
        lost=len(everything - reached),
        duplicated=sum(n - 1 for n in held.values() if n > 1),
        died_in_server=len(died & everything), restored=len(restored),
        store_lost=len(reached - set(restored)),
        store_duplicated=len(restored) - len(set(restored)),
        unknown=len(set(restored) - everything))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="groupcomm store crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs (default 10)")
    parser.add_argument("--messages", type=int, default=300,
                        help="messages each of the two typists sends per run (default 300)")
    parser.add_argument("--no-reliable", action="store_true",
                        help="members without the reliable layer (the apps' --no-reliable): "
                        "what dies in the server is lost")
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
            counts = one_run(Path(tmp) / f"run{run}", rng, args.messages,
                             reliable=not args.no_reliable)
            for key, value in asdict(counts).items():
                setattr(totals, key, getattr(totals, key) + value)
            print(json.dumps({"run": run, **asdict(counts)}) if args.json else
                  f"run {run}: " + ", ".join(f"{k} {v}" for k, v in asdict(counts).items()),
                  flush=True)
    print("total: " + ", ".join(f"{k} {v}" for k, v in asdict(totals).items()))
    bad = totals.store_lost or totals.store_duplicated or totals.unknown or totals.duplicated
    # without the layer, what died in the server is lost by design: only the store's
    # promises (and no duplicates) are checked then
    return 1 if bad or (totals.lost and not args.no_reliable) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
