"""``groupcomm text-bench --trace FILE --silent``: a sequential trace typed through three
members of whom one never types, each member's replica measured in a subprocess of its
own, once with the members' clock acknowledgements on the heartbeat and once with every
member's clock known at every delivery (everything stable collected: the reference);
BENCHMARKS.md, "A silent member"."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from groupcomm.apps.text_trace import (
    Trace,
    peak_memory,
    read_trace,
    reset_peak_memory,
    run_in_child,
    say,
)
from groupcomm.cli.args import CliError
from groupcomm.core.messages import Tag
from groupcomm.protocol.clock_acks import ClockAcks
from groupcomm.replicated import Stability, TextSequence
from groupcomm.replicated.editor import COLLECT_EVERY

#: a and b type the trace in turns of TURN edits; c never types
MEMBERS = ("a", "b", "c")
TURN = 1_000
#: the modes: acknowledgements on the heartbeat, every clock known at every delivery
#: (the reference), no acknowledgements (collection runs, but c holds everything unstable)
MODES = ("heartbeat", "reference", "none")


class SilentSession:
    """Three members' application clocks and their :class:`ClockAcks` (what each one's
    communicator keeps), and the replica of one of them, ``me``: the trace is sequential,
    so every edit is delivered everywhere before the next is made, and an edit made at
    ``me``'s replica is the edit its maker made (edits name visible characters only)."""

    def __init__(self, me: str, mode: str) -> None:
        self.me = me
        self.mode = mode
        self.clocks: dict[str, dict[str, int]] = {m: {} for m in MEMBERS}
        self.acks = {m: ClockAcks() for m in MEMBERS}
        self.text = TextSequence()
        self.stability = Stability(me, MEMBERS)
        self.applied = 0
        self.acknowledgements = 0

    def edit(self, sender: str, op: Any) -> None:
        clock = self.clocks[sender]
        clock[sender] = clock.get(sender, 0) + 1  # the send event
        tag = Tag(clock)
        self.acks[sender].own_send(tuple(sorted(clock.items())))
        for member in MEMBERS:  # delivered at once everywhere else
            if member != sender:
                theirs = self.clocks[member]
                for k, v in clock.items():
                    if theirs.get(k, 0) < v:
                        theirs[k] = v
                theirs[member] = theirs.get(member, 0) + 1
        self.text.effect(op, tag, f"{sender}#{clock[sender]}", sender)
        self.stability.delivered(sender, tag)
        if self.mode == "reference":
            for member in MEMBERS:
                if member not in (sender, self.me):
                    self.stability.acknowledged(member, self.clocks[member])
        self.applied += 1
        if self.applied % COLLECT_EVERY == 0:
            self.text.collect(self.stability)

    def heartbeat(self) -> None:
        """Every member's heartbeat: the acknowledgements due reach ``me`` at once (every
        edit is delivered everywhere already; the editor collects when one moves its
        stability)."""
        if self.mode != "heartbeat":
            return
        for member in MEMBERS:
            clock = self.clocks[member]
            if not self.acks[member].due(tuple(sorted(clock.items()))):
                continue
            clock[member] += 1  # tagged like a send; it moves no receiver's clock
            self.acks[member].acknowledged(tuple(sorted(clock.items())))
            if member != self.me:
                self.acknowledgements += 1
                if self.stability.acknowledged(member, clock):
                    self.text.collect(self.stability)


def replay_member(trace: Trace, me: str, mode: str, beat_every: int, channel: Any) -> None:
    """A subprocess: the session as ``me`` sees it; the result goes through ``channel``."""
    try:
        session = SilentSession(me, mode)
        before = reset_peak_memory()
        started = time.process_time()
        if trace.start:
            session.edit("a", session.text.prepare_insert(0, trace.start))
        text = session.text
        for done, (position, deleted, inserted) in enumerate(trace.edits()):
            typist = MEMBERS[(done // TURN) % 2]
            if deleted:
                session.edit(typist, text.prepare_delete(position, deleted))
            if inserted:
                session.edit(typist, text.prepare_insert(position, inserted))
            if done % beat_every == beat_every - 1:
                session.heartbeat()
        session.heartbeat()
        session.heartbeat()  # the last edits' acknowledgements (a silent typist's too)
        peak = peak_memory() - before
        channel.send(("result", {
            "member": me, "mode": mode, "peak_memory_bytes": peak,
            "cpu_seconds": round(time.process_time() - started, 3),
            "kept_characters": len(text), "characters": text.visible_length(),
            "exact": text.value == trace.end,
            "acknowledgements_received": session.acknowledgements}))
    except Exception as error:  # noqa: BLE001 - said to the parent, which reports it
        channel.send(("error", f"{type(error).__name__}: {error}"))


def run_silent(args: argparse.Namespace, data: Any) -> int:
    """``text-bench --trace FILE --silent``: each member under each mode."""
    trace = read_trace(args.trace, data)
    beat_every = args.beat_every
    if beat_every < 1:
        raise CliError("groupcomm text-bench: --beat-every is a number of edits >= 1")
    modes = ["heartbeat", "reference", *(["none"] if args.no_collect else [])]
    timeout = args.timeout or 1800.0
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in modes:
        for me in MEMBERS:
            say(f"{trace.name}: {me}'s replica, acknowledgements {mode}...")
            results.setdefault(me, {})[mode] = run_in_child(
                replay_member, (trace, me, mode, beat_every), f"{me}'s {mode} replay", timeout)
    ratios = {me: round(r["heartbeat"]["peak_memory_bytes"]
                        / max(1, r["reference"]["peak_memory_bytes"]), 2)
              for me, r in results.items()}
    exact = all(r["exact"] for by_mode in results.values() for r in by_mode.values())
    if args.json:
        print(json.dumps({"trace": trace.name, "edits": len(trace), "turn": TURN,
                          "beat_every": beat_every, "members": results,
                          "peak_ratio": ratios, "exact": exact}))
        return 0 if exact else 1
    print(f"trace {trace.name}: {len(trace):,} edits typed by a and b in turns of "
          f"{TURN:,}, c never types; a heartbeat every {beat_every} edits; collecting "
          f"every {COLLECT_EVERY} operations; final texts "
          f"{'exact' if exact else 'NOT ALL EXACT'}")
    header = ["member", *(f"peak MB {m}" for m in modes), "kept heartbeat",
              "kept reference", "heartbeat / reference"]
    print("  ".join(f"{h:>16}" for h in header))
    for me, by_mode in results.items():
        row = [me, *(f"{by_mode[m]['peak_memory_bytes'] / 1e6:.2f}" for m in modes),
               f"{by_mode['heartbeat']['kept_characters']:,}",
               f"{by_mode['reference']['kept_characters']:,}", f"{ratios[me]:.2f}"]
        print("  ".join(f"{cell:>16}" for cell in row))
    return 0 if exact else 1
