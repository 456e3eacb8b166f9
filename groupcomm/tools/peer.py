"""A remote-controlled client process: JSON commands on stdin, JSON events on stdout.

The tests and the stress run start real clients with ``python -m
groupcomm.tools.peer`` and drive them with this line protocol. Commands (one JSON object
per line)::

    {"op": "send", "to": ["bob"] | "others" | "all", "payload": <json>, "label": "m1"}
    {"op": "send", "to": [...], "function": "lambda: 6 * 7"}   # a function as payload
    {"op": "delay", "peer": "carol", "ms": 300}
    {"op": "jitter", "ms": 20, "keep_fifo": true}
    {"op": "held"}          {"op": "counters"}          {"op": "members"}
    {"op": "burst", "count": 1000, "seed": 1, "rate": 0, "broadcast_only": false}
    {"op": "stats"}         {"op": "undeliverable"}     {"op": "quit"}

``burst`` sends ``count`` random messages from a thread, ``rate`` per second (0: as
fast as it can), then emits ``burst_done`` with the number sent to each destination.
With ``--count-only`` deliveries are counted per sender (reported by ``stats``).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.selection import SelectionError, filter_creators
from groupcomm.transport.communicator import Communicator, CommunicatorError
from groupcomm.transport.config import Connection, Pipelines


class _Labelled:
    """A payload with a scenario label (m1, m2, ...) that the receiver reports."""

    def __init__(self, label: str, body: Any) -> None:
        self.label = label
        self.body = body


class Peer:
    """Runs one communicator and translates the line protocol."""

    def __init__(self, communicator: Communicator, count_only: bool = False) -> None:
        self.communicator = communicator
        self._out_lock = threading.Lock()
        self.count_only = count_only
        self.delivered: dict[str, int] = {}

    def emit(self, event: str, **fields: Any) -> None:
        with self._out_lock:
            sys.stdout.write(json.dumps({"event": event, **fields}, default=repr) + "\n")
            sys.stdout.flush()

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        self.emit("joined", client=client_name, all_users=list(all_users),
                  is_new_session=is_new_session)

    def client_left(self, client_name: str, application_name: str) -> None:
        self.emit("left", client=client_name)

    def on_message(self, message: ReceivedMessage) -> None:
        if self.count_only:
            self.delivered[message.sender] = self.delivered.get(message.sender, 0) + 1
            return
        payload = message.user_message
        label = None
        if isinstance(payload, _Labelled):
            label, payload = payload.label, payload.body
        if callable(payload):
            try:
                payload = {"called": payload()}
            except Exception as error:  # report, keep running
                payload = {"call_failed": repr(error)}
        self.emit("deliver", id=message.message_id, sender=message.sender, payload=payload,
                  label=label, tag=message.tag.clock)

    def handle(self, command: dict[str, Any]) -> bool:
        op = command.get("op")
        comm = self.communicator
        if op == "send":
            to = command.get("to", "others")
            if "function" in command:
                body: Any = eval(command["function"], {"__name__": "__main__"})  # noqa: S307 - test tool input
            else:
                body = command.get("payload")
            label = command.get("label")
            payload = _Labelled(label, body) if label else body
            if to == "others":
                sent = comm.to_others(payload)
            elif to == "all":
                sent = comm.to_all(payload)
            else:
                sent = comm.to_users(list(to), payload)
            self.emit("sent", id=sent.message_id, to=list(sent.destinations), label=label)
        elif op == "delay":
            comm.set_minimum_delay_to_peer(command["peer"], float(command["ms"]))
        elif op == "jitter":
            comm.set_delay_variation(float(command["ms"]), bool(command.get("keep_fifo", True)))
        elif op == "held":
            self.emit("held", ids=[m.message_id for m in comm.held()])
        elif op == "counters":
            self.emit("counters", counters=comm.counters())
        elif op == "members":
            self.emit("members", members=comm.members)
        elif op == "undeliverable":
            self.emit("undeliverable", ids=comm.undeliverable())
        elif op == "burst":
            threading.Thread(target=self._burst, args=(command,), daemon=True).start()
        elif op == "stats":
            peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # the deliveries first: a message held when held() is read and delivered just
            # after would otherwise count both as delivered and as held at the end
            delivered = dict(self.delivered)
            held = comm.held()
            self.emit("stats", delivered=delivered, peak_rss_mb=round(peak_kb / 1024, 1),
                      counters=comm.counters(), held=len(held),
                      waiting_for=comm.waiting_for())
        elif op == "quit":
            return False
        else:
            self.emit("error", message=f"unknown op {op!r}")
        return True

    def _burst(self, command: dict[str, Any]) -> None:
        """Send random traffic (a background thread; see the module docstring)."""
        comm = self.communicator
        rng = random.Random(f"{command.get('seed', 0)}:{comm.name}")
        count = int(command.get("count", 100))
        rate = float(command.get("rate", 0))
        broadcast_only = bool(command.get("broadcast_only", False))
        sent: dict[str, int] = {}
        failed = 0
        started = time.monotonic()
        for i in range(count):
            others = comm.others
            if not others:
                break
            shape = "broadcast" if broadcast_only else rng.choice(
                ["unicast", "unicast", "multicast", "broadcast"])
            if shape == "unicast":
                dests = [rng.choice(others)]
            elif shape == "multicast":
                dests = rng.sample(others, rng.randint(1, len(others)))
            else:
                dests = others
            try:
                comm.send(dests, {"seq": i, "from": comm.name})
            except Exception as error:  # a peer left between the choice and the send
                failed += 1
                if failed <= 3:
                    self.emit("error", message=f"burst send {i}: {error}")
                continue
            for dest in dests:
                sent[dest] = sent.get(dest, 0) + 1
            if rate > 0:
                delay = started + (i + 1) / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        self.emit("burst_done", sent=sent, failed=failed,
                  seconds=round(time.monotonic() - started, 3))


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m groupcomm.tools.peer",
                            description="A client driven by JSON lines on stdin.")
    parser.add_argument("--name", required=True)
    parser.add_argument("--session", default="s")
    parser.add_argument("--application", default="default")
    parser.add_argument("--server", required=True)
    parser.add_argument("--key-file")
    parser.add_argument("--causality", default=None)
    parser.add_argument("--filter", action="append", default=[])
    parser.add_argument("--direct", action="store_true")
    parser.add_argument("--trace-dir")
    cli.add_address_arguments(parser)
    parser.add_argument("--heartbeat", type=float, default=0.5)
    parser.add_argument("--count-only", action="store_true",
                        help="count deliveries per sender instead of reporting each")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)

    try:
        extra_send, extra_receive = filter_creators(args.filter)
    except (SelectionError, LookupError) as error:
        raise cli.CliError(f"peer {args.name}: {error}") from None
    try:
        communicator = Communicator(
            args.name, args.session, server=args.server, application=args.application,
            key_file=args.key_file, causality=args.causality,
            routing="direct" if args.direct else "relayed", trace_dir=args.trace_dir,
            pipelines=Pipelines(extra_send=extra_send, extra_receive=extra_receive),
            connection=Connection(heartbeat_interval=args.heartbeat, bind_host=args.bind_host,
                                  advertise_host=args.advertise_host,
                                  curve_dir=args.curve_dir))
    except (CommunicatorError, LookupError, ValueError) as error:
        raise cli.CliError(f"peer {args.name}: {error}") from None
    peer = Peer(communicator, count_only=args.count_only)
    communicator.add_session_message_listener(peer)
    communicator.add_message_listener(peer.on_message)
    peer.emit("ready", name=args.name, member=communicator.member_id,
              members=communicator.members,
              address=communicator.direct_address)
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                command = json.loads(line)
                if not isinstance(command, dict):
                    raise ValueError("a command must be a JSON object")
                if not peer.handle(command):
                    break
            except Exception as error:  # report bad commands, keep running
                peer.emit("error", message=f"{type(error).__name__}: {error}")
    finally:
        communicator.close()
        peer.emit("bye")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
