"""One load-generator process of ``groupcomm member-bench``: several terminal editors'
members in one process, each a :class:`~groupcomm.transport.communicator.Communicator`
with its own ZeroMQ sockets to the session server and a
:class:`~groupcomm.apps.shared_text.SharedText` (as ``groupcomm edit --batch`` runs
it), all on one poll thread (:class:`~groupcomm.transport.host.Host`, as the web
gateway holds its tabs): the server sees one member each.

``python -m groupcomm.tools.members.load --server ADDR --key-file F NAME@SESSION ...``
joins them, says ``joined N``, then reads commands on stdin, one answer line each:

- ``ready MEMBERS TIMEOUT``: wait until each member sees its session's MEMBERS members
  (``ready``);
- ``type RATE SECONDS``: every member types RATE keys a second for SECONDS, phases
  spread over an interval (``typed {member: keys}``);
- ``drain {session: keys typed} TIMEOUT``: wait until each member applied the keys the
  others of its session typed (``result {...}``: when each own key was typed and each
  other's applied, on the machine's monotonic clock, which every process shares);
- ``quit``.

A bad command is one ``error`` line; the process goes on."""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import random
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.shared_text import SharedText
from groupcomm.core.messages import ReceivedMessage, Tag
from groupcomm.core.selection import filter_creators, with_reliable
from groupcomm.filters.latest_value import DEFAULT_HOLD, LatestValueCreator
from groupcomm.replicated.editor import presence_slot
from groupcomm.transport.config import Delivery, Listeners, Pipelines, StateTransfer
from groupcomm.transport.host import Host
from groupcomm.web.capacity import percentiles

log = logging.getLogger(__name__)

#: seconds between two looks at the members' held messages while they type
SAMPLE_EVERY = 0.5


class TimedText(SharedText):
    """A :class:`SharedText` that notes when each of its edits was typed (the id it
    went out as) and when each of the others' was applied here."""

    def __init__(self, me: str) -> None:
        # window 0: every key is one edit, sent at once (as a web tab's and a Yjs
        # client's in the same bench), so that the figure is the path, not the window
        super().__init__(me, window=0.0)
        #: when the key being typed was pressed (time.monotonic)
        self.key_at = 0.0
        #: own edit's message id -> when its key was pressed
        self.sent: dict[str, float] = {}
        #: (message id, when it was applied here) of each edit of the others
        self.arrivals: list[tuple[str, float]] = []
        self.typed = 0

    def _send(self, payload: Any) -> tuple[str, Tag]:
        message_id, tag = super()._send(payload)
        self.sent[message_id] = self.key_at
        return message_id, tag

    def on_message(self, message: ReceivedMessage) -> None:
        super().on_message(message)  # applied (the screen would redraw now)
        self.arrivals.append((message.app_message_id, time.monotonic()))

    def key(self) -> None:
        self.key_at = time.monotonic()
        self.typed += 1
        self.insert("k")


class Load:
    """The members of this process and what they measured."""

    def __init__(self, server: str, key_file: str, causality: str, reliable: bool,
                 members: Sequence[tuple[str, str]]) -> None:
        specs = with_reliable([]) if reliable else []
        extra_send, extra_receive = filter_creators(specs)
        self.host = Host(name="member-load")
        self.texts: dict[str, TimedText] = {}
        self.session_of: dict[str, str] = {}
        self.comms: dict[str, Any] = {}
        try:
            self._join(server, key_file, causality, extra_send, extra_receive, members)
        except BaseException:
            self.host.close()  # each member joined so far leaves
            raise
        self.held_max = 0
        #: how late each key was typed, seconds (0: on time)
        self.lags: list[float] = []

    def _join(self, server: str, key_file: str, causality: str, extra_send: Any,
              extra_receive: Any, members: Sequence[tuple[str, str]]) -> None:
        for name, session in members:
            text = TimedText(name)
            comm = self.host.join(
                name, session, server=server, key_file=key_file, application="edit",
                causality=causality,
                pipelines=Pipelines(extra_send=extra_send, extra_receive=[
                    LatestValueCreator(presence_slot, DEFAULT_HOLD), *extra_receive]),
                state=StateTransfer(provider=text.snapshot, consumer=text.install),
                listeners=Listeners(session=text, message=text.on_message,
                                    event=text.on_event),
                delivery=Delivery(acknowledged=True, clock_acks=True))
            comm.wait_for_state()
            text.attach(comm)
            self.texts[name], self.session_of[name], self.comms[name] = text, session, comm

    def ready(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for name, text in self.texts.items():
            while len(text.replica.members) < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} sees {len(text.replica.members)} "
                                       f"member(s), not {count}, after {timeout:g} s")
                time.sleep(0.01)

    def type(self, rate: float, seconds: float) -> dict[str, int]:
        """Every member types ``rate`` keys a second for ``seconds``, on a fixed schedule
        (a late key is typed at once, as people do); one thread types for all."""
        start = time.monotonic()
        until = start + seconds
        due = [(start + random.random() / rate, name) for name in self.texts]
        heapq.heapify(due)
        stop = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(stop,), daemon=True)
        sampler.start()
        try:
            while due and due[0][0] < until:
                at, name = heapq.heappop(due)
                pause = at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                self.lags.append(max(0.0, -pause))
                self.texts[name].key()
                heapq.heappush(due, (at + 1 / rate, name))
        finally:
            stop.set()
            sampler.join(5)
        return {name: text.typed for name, text in self.texts.items()}

    def _sample(self, stop: threading.Event) -> None:
        """The most messages one member's module held (waiting for earlier ones)."""
        while not stop.wait(SAMPLE_EVERY):
            for comm in self.comms.values():
                self.held_max = max(self.held_max, len(comm.held()))

    def drain(self, typed_in: dict[str, int], timeout: float) -> dict[str, Any]:
        """Wait until every member applied what the others of its session typed (at
        most ``timeout`` seconds); what was measured."""
        deadline = time.monotonic() + timeout
        for name, text in self.texts.items():
            wanted = typed_in.get(self.session_of[name], 0) - text.typed
            while len(text.arrivals) < wanted and time.monotonic() < deadline:
                time.sleep(0.02)
        return {"sent": {mid: at for t in self.texts.values() for mid, at in t.sent.items()},
                "arrivals": [a for t in self.texts.values() for a in t.arrivals],
                "held_max": self.held_max,
                "lag_p99_ms": percentiles([1000 * lag for lag in self.lags]).get("p99_ms", 0.0)}

    def close(self) -> None:
        self.host.close()


def serve(load: Load, lines: Any, out: Any) -> None:
    """Answer the commands on ``lines`` until ``quit`` or their end."""
    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    for line in lines:
        command, _, rest = line.strip().partition(" ")
        try:
            if command == "quit":
                return
            if command == "ready":
                count, timeout = rest.split()
                load.ready(int(count), float(timeout))
                say("ready")
            elif command == "type":
                rate, seconds = rest.split()
                say("typed " + json.dumps(load.type(float(rate), float(seconds))))
            elif command == "drain":
                typed_in, _, timeout = rest.rpartition(" ")
                say("result " + json.dumps(load.drain(json.loads(typed_in), float(timeout)),
                                           separators=(",", ":")))
            elif command:
                raise ValueError(f"unknown command {command!r} (ready, type, drain, quit)")
        except Exception as error:  # noqa: BLE001 - one line per bad command, go on
            say(f"error {command}: {error}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m groupcomm.tools.members.load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--causality", default="matrix")
    parser.add_argument("--no-reliable", action="store_true")
    parser.add_argument("members", nargs="+", metavar="NAME@SESSION")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    members = [tuple(spec.split("@", 1)) for spec in args.members]
    if any(len(m) != 2 or not all(m) for m in members):
        print("error: members are NAME@SESSION", file=sys.stderr)
        return 2
    try:
        load = Load(args.server, args.key_file, args.causality, not args.no_reliable,
                    members)  # type: ignore[arg-type]
    except Exception as error:  # noqa: BLE001 - said in one line; the bench reports it
        print(f"error join: {error}", flush=True)
        return 1
    try:
        print(f"joined {len(members)}", flush=True)
        serve(load, sys.stdin, sys.stdout)
    finally:
        load.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
