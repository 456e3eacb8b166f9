"""``groupcomm text-bench``: how fast the shared text is, alone and through three editor
processes, and how much it keeps with and without collection (BENCHMARKS.md); with
``--trace FILE``, :mod:`groupcomm.apps.text_trace`."""

from __future__ import annotations

import argparse
import json
import pickle
import random
import time
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.batch_editors import EditorSession
from groupcomm.apps.text_concurrent import is_concurrent, run_concurrent
from groupcomm.apps.text_silent import run_silent
from groupcomm.apps.text_trace import TRACE_HELP, load_trace, run_trace, say
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_output_arguments,
    checked_module,
    run_main,
    setup_logging,
)
from groupcomm.core.messages import Tag
from groupcomm.core.registry import get_module
from groupcomm.replicated import Stability, TextSequence
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.tools.procs import ProcessError

NAMES = ("p1", "p2", "p3")


def record_session(edits: int, collect_every: int | None, seed: int = 7,
                   module: str = "matrix") -> dict[str, Any]:
    """Three editors on the in-process network; returns p1's deliveries (op, tag, id,
    sender), the final text, its state size and the characters kept every 100 edits."""
    net = LocalNetwork(list(NAMES), module, trace=False)
    texts = {n: TextSequence() for n in NAMES}
    stability = {n: Stability(n, NAMES) for n in NAMES}
    stream: list[tuple[Any, Tag, str, str]] = []

    def apply(who: str, op: Any, tag: Tag, op_id: str, sender: str) -> None:
        texts[who].effect(op, tag, op_id, sender)
        stability[who].delivered(sender, tag)
        if who == "p1":
            stream.append((op, tag, op_id, sender))

    for name in NAMES:
        net.reactions[name].append(lambda _net, who, m: apply(
            who, m.user_message, m.app_tag, m.app_message_id, m.sender))
    rng = random.Random(seed)
    kept: list[tuple[int, int]] = []
    for step in range(edits):
        who = NAMES[step % 3]
        text = texts[who]
        length = text.visible_length()
        if length > 200 or (length and rng.random() < 0.3):
            op = text.prepare_delete(rng.randrange(length))
        else:
            op = text.prepare_insert(rng.randint(0, length), "abc"[:rng.randint(1, 3)])
        sent = net.send(who, op, [n for n in NAMES if n != who])
        apply(who, op, Tag(sent.vc), sent.message_id, who)
        for _ in range(rng.randint(0, 4)):
            if net.in_flight:
                net.deliver(rng.choice(net.arrivable()))
        if collect_every and step % collect_every == collect_every - 1:
            for name in NAMES:
                texts[name].collect(stability[name])
        if step % 100 == 99:
            kept.append((step + 1, len(texts["p1"])))
    net.run(rng)
    if collect_every:
        texts["p1"].collect(stability["p1"])
    final = texts["p1"]
    assert len({t.value for t in texts.values()}) == 1, "replicas diverged"
    return {"stream": stream, "text": final.value, "kept": kept,
            "characters_kept": len(final),
            "state_bytes": len(pickle.dumps(final.state(), pickle.HIGHEST_PROTOCOL))}


def local_rate(stream: list[tuple[Any, Tag, str, str]], repeat: int = 3) -> float:
    """Edits per second replaying ``stream`` into a fresh text (best of ``repeat``)."""
    best = float("inf")
    for _ in range(repeat):
        text = TextSequence()
        started = time.perf_counter()
        for op, tag, op_id, sender in stream:
            text.effect(op, tag, op_id, sender)
        best = min(best, time.perf_counter() - started)
    return len(stream) / best


def through_communicator(module: str, edits: int, timeout: float) -> dict[str, Any]:
    """Three batch editors making ``edits`` random edits each at once."""
    # without the reliable layer: this measures the module and the text type (the
    # layer's cost is text-wire's and web bench's to show)
    with EditorSession(NAMES, module, "--allow-divergence", "--no-reliable", session="bench",
                       timeout=timeout) as editors:
        started = time.time()
        total = edits * len(NAMES)
        for k, editor in enumerate(editors.editors):
            editor.type(f"random {edits} {k}")
        ends = [float(line.rpartition(" at ")[2]) for line in editors.ask_all(
            [f"wait-applied {total} {timeout:g}"] * len(NAMES), ("applied",), timeout * 2,
            "every edit applied")]
        texts = editors.states(timeout)
    elapsed = max(ends) - started
    return {"module": module, "edits": total, "seconds": round(elapsed, 3),
            "edits_per_second": round(total / elapsed),
            "identical": len({t["text"] for t in texts}) == 1,
            "failed_edits": sum(t["failures"] for t in texts)}


def plot_kept(with_collection: list, without: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(*zip(*without, strict=True), label="without collection")
    axes.plot(*zip(*with_collection, strict=True), label="collecting stable tombstones")
    axes.set_xlabel("edits (three editors)")
    axes.set_ylabel("characters kept (visible + tombstones)")
    axes.set_title("Shared text: metadata kept under causal stability")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm text-bench",
        description="Edits per second of the shared text (alone and through the "
        "communicator with three editor processes) and the metadata it keeps with and "
        "without causal-stability collection.")
    parser.add_argument("--edits", type=int, default=2000,
                        help="edits per editor through the communicator (default 2000)")
    parser.add_argument("--local-edits", type=int, default=20_000,
                        help="edits of the recorded session (default 20000)")
    parser.add_argument("--causality", action="append", metavar="NAME",
                        help="module(s) for the communicator run (repeatable; default "
                        "matrix and cykas)")
    parser.add_argument("--collect-every", type=int, default=None, metavar="N",
                        help="collect every N edits (default 50; with a concurrent "
                        "--trace, every N operations each replica applies, default 64, "
                        "0: never)")
    parser.add_argument("--plot", metavar="PNG", help="draw the characters kept over time")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds for each run (default 120; with --trace, 1800)")
    parser.add_argument("--trace", metavar="FILE", help=TRACE_HELP)
    parser.add_argument("--no-collect", action="store_true",
                        help="with --trace: never collect causally stable metadata "
                        "(keep every tombstone and tag); with --silent, also measure "
                        "each member without acknowledgements (collecting, but the silent "
                        "member holds everything unstable)")
    parser.add_argument("--silent", action="store_true",
                        help="with a sequential --trace: type it through three members of "
                        "whom one never types, and compare each member's peak memory "
                        "with clock acknowledgements on the heartbeat to that with every "
                        "member's clock known at every delivery")
    parser.add_argument("--beat-every", type=int, default=100, metavar="EDITS",
                        help="with --silent: edits typed between two heartbeats "
                        "(default 100: 200 keys a second against the 0.5 s heartbeat)")
    add_output_arguments(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.collect_every is None and not args.trace:
        args.collect_every = 50
    if args.edits < 1 or args.local_edits < 100 or (
            args.collect_every is not None and args.collect_every < (0 if args.trace else 1)):
        raise CliError("groupcomm text-bench: --edits >= 1, --local-edits >= 100 and "
                       "--collect-every >= 1 (>= 0 with --trace)")
    if args.timeout is not None and not args.timeout > 0:
        raise CliError(f"groupcomm text-bench: --timeout is a number of seconds > 0, got "
                       f"{args.timeout:g}")
    modules = args.causality or ["matrix", "cykas"]
    for module in modules:
        checked_module(get_module, module, "groupcomm text-bench")
    if args.silent and not args.trace:
        raise CliError("groupcomm text-bench: --silent replays a --trace FILE")
    if args.trace:
        data = load_trace(args.trace)
        if args.silent:
            if is_concurrent(data):
                raise CliError("groupcomm text-bench: --silent replays a sequential trace "
                               "(its edits are split between two typists)")
            return run_silent(args, data)
        if is_concurrent(data):
            return run_concurrent(args, data)
        return run_trace(args, data)

    say(f"recording a {args.local_edits}-edit session of three editors, twice...")
    collected = record_session(args.local_edits, args.collect_every)
    plain = record_session(args.local_edits, None)
    result: dict[str, Any] = {
        "local": {"edits": len(collected["stream"]),
                  "edits_per_second": round(local_rate(plain["stream"]))},
        "metadata": {
            "visible_characters": len(plain["text"]),
            "bytes_per_character_collected": round(
                collected["state_bytes"] / max(1, len(collected["text"])), 1),
            "bytes_per_character_without": round(
                plain["state_bytes"] / max(1, len(plain["text"])), 1),
            "kept_collected": collected["characters_kept"],
            "kept_without": plain["characters_kept"]},
        "communicator": []}
    if args.plot:
        plot_kept(collected["kept"], plain["kept"], args.plot)
    for module in modules:
        say(f"three editors, {args.edits} edits each, under {module}...")
        try:
            result["communicator"].append(through_communicator(module, args.edits,
                                                               args.timeout or 120.0))
        except ProcessError as error:
            raise CliError(f"groupcomm text-bench: {error}") from None
    if args.json:
        print(json.dumps(result))
        return 0
    local, meta = result["local"], result["metadata"]
    print(f"text type alone: {local['edits_per_second']:,} edits/s "
          f"(replaying {local['edits']:,} edits of three editors)")
    print(f"metadata after {args.local_edits:,} edits ({meta['visible_characters']} visible "
          f"characters): {meta['bytes_per_character_collected']} B/char collecting stable "
          f"tombstones every {args.collect_every} edits ({meta['kept_collected']:,} "
          f"characters kept), {meta['bytes_per_character_without']} B/char without "
          f"({meta['kept_without']:,} kept)")
    for run in result["communicator"]:
        same = "identical" if run["identical"] else (
            f"DIFFERENT ({run['failed_edits']} edit(s) failed)")
        print(f"through the communicator, {run['module']}: {run['edits_per_second']:,} "
              f"edits/s ({run['edits']:,} edits in {run['seconds']} s), copies {same}")
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)
