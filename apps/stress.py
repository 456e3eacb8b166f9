"""``groupcomm stress``: a session server and N client processes
(:mod:`groupcomm.tools.peer`) send random traffic while faults are injected; then Spark
analyses the traces. The accounting is in docs/commands.md ("stress")."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.apps.session_options import parse_jitter
from groupcomm.core.registry import get_module
from groupcomm.tools.procs import PeerProcess, ProcessError, ProcessGroup
from groupcomm.transport.server import DEFAULT_HEARTBEAT_TIMEOUT

#: with --churn, the server declares a silent client gone after this many seconds (the
#: frozen client is stopped past it); well under the default, so a run stays short
CHURN_HEARTBEAT_TIMEOUT = min(DEFAULT_HEARTBEAT_TIMEOUT, 5.0)


def _kill_spec(text: str) -> tuple[str, float]:
    name, sep, seconds = text.partition("@")
    try:
        value = float(seconds)
    except ValueError:
        value = -1.0
    if not sep or not name or value < 0:
        raise argparse.ArgumentTypeError(f"expected NAME@SECONDS, got {text!r}")
    return name, value


def _seconds(text: str) -> float:
    value = float(text.lstrip("@"))
    if value < 0:
        raise argparse.ArgumentTypeError("seconds must be >= 0")
    return value


def _probability(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a probability in [0, 1) is needed, got {text}")
    return value


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm stress",
        description="Start a session server and N client processes sending random "
        "unicast, multicast and broadcast traffic with injected faults; analyse the traces "
        "with Spark and report losses, duplicates, causal violations, throughput and memory.",
    )
    parser.add_argument("--processes", type=int, default=4, help="clients (default 4)")
    parser.add_argument("--messages", type=int, default=2000,
                        help="application messages in all, spread over the clients "
                        "(default 2000)")
    parser.add_argument("--causality", default="matrix", help="module (default matrix)")
    parser.add_argument("--rate", type=float, default=0,
                        help="messages per second per client (default: as fast as possible)")
    parser.add_argument("--jitter", type=float, default=0, metavar="MS",
                        help="random extra delay per frame, up to MS ms")
    parser.add_argument("--drop", type=_probability, default=0, metavar="P",
                        help="drop each outgoing frame with probability P")
    parser.add_argument("--duplicate", type=_probability, default=0, metavar="P",
                        help="send each outgoing frame twice with probability P")
    cli.add_flags(parser, no_reliable="do not put the reliable layer under the module",
              reliable="put the reliable layer under the module even without drops (it "
              "recovers relayed frames lost in a server restart)")
    parser.add_argument("--kill", type=_kill_spec, action="append", default=[],
                        metavar="NAME@SECONDS", help="kill client NAME (p1, p2, ...) after "
                        "SECONDS of traffic")
    parser.add_argument("--restart-server", type=_seconds, metavar="SECONDS",
                        help="stop the session server after SECONDS and start it again")
    cli.add_flags(parser, churn="change the session during the traffic: a late joiner, a leave, "
              "a kill and restart under the same name, a freeze past the heartbeat timeout "
              "(needs at least 5 processes)",
              direct="send directly between clients instead of through the server")
    parser.add_argument("--trace-dir", help="keep the traces here (default: a temp dir)")
    parser.add_argument("--master", help="Spark master URL (default local[2])")
    cli.add_flags(parser, no_analysis="skip the Spark analysis")
    parser.add_argument("--timeout", type=float, default=180,
                        help="seconds to wait for the traffic to settle (default 180)")
    parser.add_argument("--seed", type=int, default=1)
    cli.add_output_arguments(parser)
    return parser


def _normalise(argv: Sequence[str] | None) -> list[str] | None:
    """Accept ``--restart-server@5`` as well as ``--restart-server 5``."""
    if argv is None:
        argv = sys.argv[1:]
    out: list[str] = []
    for arg in argv:
        if arg.startswith("--restart-server@"):
            out += ["--restart-server", arg.split("@", 1)[1]]
        else:
            out.append(arg)
    return out


class StressRun:
    def __init__(self, args: argparse.Namespace, workdir: Path, trace_dir: Path) -> None:
        self.args = args
        self.names = [f"p{i}" for i in range(1, args.processes + 1)]
        self.workdir = workdir
        self.trace_dir = trace_dir
        self.killed: set[str] = set()
        self.say = (lambda m: print(f"[stress] {m}", file=sys.stderr, flush=True))
        #: --churn: the clients that leave, are restarted or frozen (never "stable"), the
        #: late joiner, and what is still to happen: (second, what, client)
        self.churned: set[str] = set()
        self.late = "late"
        self.plan: list[tuple[float, str, str]] = []
        if args.churn:
            leaver, restarted, frozen = self.names[-3:]
            self.churned = {leaver, restarted, frozen}
            # early in the traffic, so that it all happens while messages flow; a
            # restart and a resume wait until the server has declared the client gone
            self.plan = [(0.5, "join", self.late), (1.0, "leave", leaver),
                         (1.5, "kill", restarted), (2.0, "freeze", frozen),
                         (2.5, "restart", restarted), (3.0, "resume", frozen)]
        self._broadcast_only = get_module(args.causality).broadcast_only

    def filters(self) -> list[str]:
        specs = []
        faults = self.args.drop > 0 or self.args.duplicate > 0
        if (faults or self.args.reliable) and not self.args.no_reliable:
            specs.append("reliable")
        if self.args.drop > 0:
            specs.append(f"drop:p={self.args.drop},seed={self.args.seed}")
        if self.args.duplicate > 0:
            specs.append(f"duplicate:p={self.args.duplicate},seed={self.args.seed}")
        return specs

    def execute(self) -> dict[str, Any]:
        args = self.args
        server_extra = (["--heartbeat-timeout", str(CHURN_HEARTBEAT_TIMEOUT)]
                        if args.churn else [])
        with ProcessGroup(self.workdir, server_extra=server_extra) as group:
            self.say(f"starting {len(self.names)} clients ({args.causality}"
                     f"{', ' + ', '.join(self.filters()) if self.filters() else ''})")
            for name in self.names:
                self._start(group, name)
            group.wait_members(self.names)
            peers = group.peers
            if args.jitter:
                for peer in peers.values():
                    peer.command(op="jitter", ms=args.jitter, keep_fifo=False)
            share, extra = divmod(args.messages, len(self.names))
            started = time.monotonic()
            for index, peer in enumerate(peers.values()):
                self._burst(peer, share + (1 if index < extra else 0))
            sent = self._wait_for_senders(group, started)
            settled, stats = self._wait_for_deliveries(peers, sent, started)
            elapsed = (settled or time.monotonic()) - started
            for name, peer in peers.items():
                if name not in self.killed:
                    peer.quit()
        result = self._result(sent, stats, elapsed, settled is not None)
        if args.churn:
            result["churn"] = self._churn_counts(sent, stats)
        return result

    def _start(self, group: ProcessGroup, name: str) -> PeerProcess:
        return group.start_peer(name, causality=self.args.causality, direct=self.args.direct,
                                trace_dir=str(self.trace_dir), filters=self.filters(),
                                extra=["--count-only"])

    def _burst(self, peer: PeerProcess, count: int) -> None:
        peer.command(op="burst", count=count, seed=self.args.seed, rate=self.args.rate,
                     broadcast_only=self._broadcast_only)

    def _churn_due(self, group: ProcessGroup, now: float) -> None:
        """Carry out the --churn plan's steps that are due."""
        while self.plan and now >= self.plan[0][0]:
            _, what, name = self.plan.pop(0)
            if what in ("restart", "resume") and not self._seen_gone(group, name):
                # the server has not declared it gone yet (its heartbeat timeout): a
                # restart would be refused as a duplicate name, and a freeze not be one
                self.plan.insert(0, (now + 0.25, what, name))
                return
            self.say(f"churn at {now:.1f} s: {what} {name}")
            share = max(1, self.args.messages // len(self.names))
            if what == "join":
                self.names.append(name)
                self._burst(self._start(group, name), share)
            elif what == "leave":
                group.peers[name].command(op="quit")  # it closes; reaped at the end
                self.killed.add(name)
            elif what == "kill":
                group.peers[name].kill()
                self.killed.add(name)
            elif what == "restart":
                self._burst(self._start(group, name), max(1, share // 10))
                self.killed.discard(name)
            elif what == "freeze":
                group.peers[name].process.send_signal(signal.SIGSTOP)
            elif what == "resume":
                group.peers[name].process.send_signal(signal.SIGCONT)

    def _seen_gone(self, group: ProcessGroup, name: str) -> bool:
        """True once the first client has been told that ``name`` left."""
        witness = group.peers[self.names[0]]
        return any(e.get("event") == "left" and e.get("client") == name
                   for e in list(witness.events))

    def _churn_counts(self, sent: dict[str, dict[str, int]],
                      stats: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What the stable members sent to the churning clients (any incarnation), what
        they delivered from them, and what senders were told could not be delivered."""
        def churning(member: str) -> bool:
            return member.split("~")[0] in self.churned

        stable = [n for n in sent if not churning(n)]
        return {
            "clients": sorted(self.churned),
            "late_joiner": self.late,
            "sent_to_churning": sum(c for n in stable for d, c in sent[n].items()
                                    if churning(d)),
            "delivered_from_churning": sum(c for n, s in stats.items() if not churning(n)
                                           for d, c in s.get("delivered", {}).items()
                                           if churning(d)),
            "reported_undeliverable": sum(s.get("counters", {}).get("undeliverable", 0)
                                          for s in stats.values()),
            "stale_frames_refused": sum(
                s.get("counters", {}).get("rejected_stale_incarnation", 0)
                for s in stats.values()),
        }

    def _faults_due(self, group: ProcessGroup, started: float, state: dict[str, Any]) -> None:
        now = time.monotonic() - started
        if self.plan:
            self._churn_due(group, now)
        for name, when in self.args.kill:
            if name not in self.killed and now >= when:
                self.say(f"killing {name} at {now:.1f} s")
                group.peers[name].kill()
                self.killed.add(name)
        restart = self.args.restart_server
        if restart is not None and not state.get("restarted") and now >= restart:
            self.say(f"restarting the session server at {now:.1f} s")
            group.stop_server()
            group.start_server()
            state["restarted"] = True

    def _wait_for_senders(self, group: ProcessGroup, started: float) -> dict[str, dict[str, int]]:
        sent: dict[str, dict[str, int]] = {}
        state: dict[str, Any] = {}
        deadline = started + self.args.timeout
        last_report = 0.0
        while time.monotonic() < deadline:
            self._faults_due(group, started, state)
            for name, peer in group.peers.items():
                if name in sent or name in self.killed:
                    continue
                done = next((e for e in list(peer.events) if e.get("event") == "burst_done"), None)
                if done:
                    sent[name] = done["sent"]
            if len(sent) + len(self.killed - set(sent)) >= len(self.names):
                # kills scheduled after the senders finished still happen
                pending = [w for n, w in self.args.kill if n not in self.killed]
                if not pending and not self.plan and (
                        self.args.restart_server is None or state.get("restarted")):
                    return sent
            if time.monotonic() - last_report > 5:
                last_report = time.monotonic()
                self.say(f"{len(sent)}/{len(self.names)} clients done sending "
                         f"({time.monotonic() - started:.0f} s)")
            time.sleep(0.05)
        raise ProcessError(f"senders not done within {self.args.timeout:g} s "
                           f"({sorted(sent)} finished)")

    def _wait_for_deliveries(self, peers: dict[str, PeerProcess], sent: dict[str, dict[str, int]],
                             started: float) -> tuple[float | None, dict[str, dict[str, Any]]]:
        expected = self._expected(sent)
        deadline = started + self.args.timeout
        stats: dict[str, dict[str, Any]] = {}
        last_report = 0.0
        while True:
            stats = self._stats(peers)
            complete = all(
                sum(stats[n]["delivered"].get(s, 0) for s in expected[n])
                >= sum(expected[n].values()) for n in expected if n in stats
            )
            if complete:
                return time.monotonic(), stats
            if time.monotonic() > deadline:
                self.say("timed out waiting for deliveries")
                return None, stats
            if time.monotonic() - last_report > 5:
                last_report = time.monotonic()
                got = sum(sum(s["delivered"].values()) for s in stats.values())
                want = sum(sum(e.values()) for e in expected.values())
                self.say(f"delivered {got:,}/{want:,} ({time.monotonic() - started:.0f} s)")
            time.sleep(0.3)

    def _stats(self, peers: dict[str, PeerProcess]) -> dict[str, dict[str, Any]]:
        out = {}
        for name, peer in peers.items():
            if name not in self.killed:
                before = sum(e.get("event") == "stats" for e in peer.events)
                peer.command(op="stats")
                out[name] = peer.wait_count("stats", before + 1, timeout=30)[-1]
        return out

    def _expected(self, sent: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """destination -> sender -> messages expected (live senders, live destinations;
        with --churn, only the members present from their join to the end)."""
        out = self.killed | self.churned
        expected: dict[str, dict[str, int]] = {n: {} for n in self.names if n not in out}
        for sender, per_dest in sent.items():
            if sender in out:
                continue
            for dest, count in per_dest.items():
                if dest in expected:
                    expected[dest][sender] = count
        return expected

    def _result(self, sent: dict[str, dict[str, int]], stats: dict[str, dict[str, Any]],
                elapsed: float, settled: bool) -> dict[str, Any]:
        expected = self._expected(sent)
        lost = duplicated = delivered = 0
        for name, per_sender in expected.items():
            got = stats.get(name, {}).get("delivered", {})
            for sender, count in per_sender.items():
                have = got.get(sender, 0)
                delivered += min(have, count)
                lost += max(0, count - have)
                duplicated += max(0, have - count)
        to_killed = sum(c for per in sent.values() for d, c in per.items() if d in self.killed)
        counters = {n: s.get("counters", {}) for n, s in stats.items()}
        return {
            "causality": self.args.causality,
            "processes": len(self.names),
            "filters": self.filters(),
            "sent": sum(sum(per.values()) for per in sent.values()),
            "expected": sum(sum(e.values()) for e in expected.values()),
            "delivered": delivered,
            "lost": lost,
            "duplicated": duplicated,
            "to_killed": to_killed,
            "killed": sorted(self.killed),
            "settled": settled,
            "seconds": round(elapsed, 2),
            "deliveries_per_s": round(delivered / elapsed) if elapsed > 0 else None,
            "peak_rss_mb": {n: s.get("peak_rss_mb") for n, s in stats.items()},
            "held_at_end": {n: s.get("held", 0) for n, s in stats.items()},
            "protocol_errors": sum(c.get("protocol_errors", 0) for c in counters.values()),
            "rejected_frames": sum(v for c in counters.values() for k, v in c.items()
                                   if k.startswith("rejected_")),
        }


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    if args.processes < 2 or args.messages < 1:
        raise cli.CliError("groupcomm stress: --processes must be >= 2 and --messages >= 1")

    module = cli.checked_module(get_module, args.causality, "groupcomm stress", warn=False)
    parse_jitter(args.jitter, "groupcomm stress")
    cli.warn_if_known_bad(module, "groupcomm stress")
    if args.churn and args.processes < 5:
        raise cli.CliError("groupcomm stress: --churn needs at least 5 processes (three churn, "
                       "the others stay)")
    names = {f"p{i}" for i in range(1, args.processes + 1)}
    for name, _ in args.kill:
        if name not in names:
            raise cli.CliError(f"groupcomm stress: --kill {name}: clients are "
                               f"p1..p{args.processes}")
    cli.ensure_trace_dir(args.trace_dir, "groupcomm stress")
    keep = args.trace_dir is not None
    trace_dir = Path(args.trace_dir) if keep else Path(tempfile.mkdtemp(prefix="groupcomm-st-"))
    if keep and trace_dir.exists():
        shutil.rmtree(trace_dir)
    workdir = Path(tempfile.mkdtemp(prefix="groupcomm-stress-"))
    try:
        try:
            result = StressRun(args, workdir, trace_dir).execute()
        except ProcessError as error:
            raise cli.CliError(f"groupcomm stress: {error}") from None
        if not args.no_analysis:
            from trace_analysis import analyze
            from trace_analysis.session import SparkUnavailableError

            print("[stress] analysing the traces with Spark...", file=sys.stderr, flush=True)
            try:
                analysis = analyze(trace_dir, master=args.master)
            except SparkUnavailableError as error:
                raise cli.CliError(f"groupcomm stress: {error}") from None
            result["analysis"] = {k: analysis[k] for k in (
                "events", "messages", "causal_violations", "fifo_violations", "undelivered",
                "duplicates", "malformed_lines", "latency_ms", "undelivered_to_departed",
                "undelivered_from_departed", "undelivered_present", "abrupt_endings")}
            result["causal_violations"] = analysis["causal_violations"]
            result["duplicates_in_trace"] = analysis["duplicates"]
            if result["killed"] or args.churn:
                result["analysis"]["note"] = (
                    "undelivered includes messages to and from the clients that left, were "
                    "killed or were declared gone")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if not keep:
            shutil.rmtree(trace_dir, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for key in ("causality", "processes", "filters", "sent", "expected", "delivered",
                    "lost", "duplicated", "to_killed", "causal_violations", "seconds",
                    "deliveries_per_s", "peak_rss_mb", "held_at_end", "protocol_errors"):
            if key in result:
                print(f"{key:18} {result[key]}")
    bad = result["lost"] or result["duplicated"] or result.get("causal_violations")
    return 1 if bad and not args.no_reliable else 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, _normalise(argv))
