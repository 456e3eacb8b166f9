"""``groupcomm overhead``: what each causality module costs: metadata, control traffic and
CPU per application message through the real filters of the in-process network
(:class:`groupcomm.tools.localnet.LocalNetwork`), drawn with ``--plot``; with ``--pipeline``
and ``--throughput``, its own send and receive path and its rate through real processes."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.core.messages import SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import default_modules as installed
from groupcomm.core.registry import get_module
from groupcomm.tools.bench import run_communicator
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.wire.envelopes import pack_envelopes, unpack_envelopes


@contextlib.contextmanager
def _paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a measurement runs: its passes cost by
    the size of the whole heap, which depends on what ran before in the process, not on
    the module (with it running, one module's figure moved by a quarter between runs)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def default_modules() -> list[str]:
    """Every installed module but the known-bad ones (plugins' included), ``none`` first:
    what is measured without ``--modules``."""
    names = installed()
    return ["none", *[n for n in names if n != "none"]] if "none" in names else names


def measure_overhead(module: str, processes: int, messages: int, seed: int = 1) -> dict[str, Any]:
    """Metadata and control traffic of ``module`` with ``processes`` members."""
    broadcast = get_module(module).broadcast_only
    names = [f"p{i:02d}" for i in range(processes)]
    net = LocalNetwork(names, module)
    net.tracer.records.clear()  # count traffic after the joins (vector's bases) separately
    rng = random.Random(seed)
    plan = [name for name in names for _ in range(messages)]
    rng.shuffle(plan)
    others = {name: [n for n in names if n != name] for name in names}
    with _paused_gc():
        start = time.process_time()
        for sender in plan:
            if broadcast:
                net.to_others(sender, "x")
            else:
                net.send(sender, "x", [rng.choice(others[sender])])
            for _ in range(rng.randint(0, 2 * processes)):  # let some frames arrive meanwhile
                if net.in_flight:
                    net.deliver(rng.randrange(len(net.in_flight)))
        net.run(rng)
        cpu = time.process_time() - start
    app = meta = copies = control_bytes = 0
    control: Counter[str] = Counter()
    for record in net.records:
        event = record["event"]
        if event == "send":
            app += 1
        elif event == "network_send":
            meta += record["meta_bytes"]
            copies += 1
        elif event == "control_send":
            control[record["kind"]] += 1
            control_bytes += record["meta_bytes"]
    held = sum(len(net.manager(n).held()) for n in names)
    return {
        "module": module, "processes": processes, "messages_per_process": messages,
        "traffic": "broadcast" if broadcast
        else "unicast", "app_messages": app,
        "meta_bytes_per_message": round(meta / app, 1),
        # one copy per destination: what each frame on the wire carries
        "meta_bytes_per_copy": round(meta / max(copies, 1), 1),
        "control_per_message": {k: round(v / app, 3) for k, v in sorted(control.items())},
        "control_bytes_per_message": round(control_bytes / app, 1),
        "held_at_end": held,
        # all members' CPU per application message, the in-process network's included
        "cpu_us_per_message": round(cpu / app * 1e6, 1),
    }


def measure_throughput(modules: list[str], messages: int, repeat: int) -> list[dict[str, Any]]:
    """Each module through the real communicator (``groupcomm bench``'s set-up), the
    modules taking turns in each repeat so that a disturbance of the machine spreads over
    all of them. Per module: the best rate, and the least CPU per message of the busier
    process (the sender or the receiver, all threads); both relative to the first module
    (``none``). The CPU figure is the steadier one on a shared machine."""
    runs: dict[str, list[dict[str, float]]] = {module: [] for module in modules}
    for turn in range(repeat):
        for module in modules:
            print(f"throughput: {module} ({turn + 1}/{repeat})...", file=sys.stderr,
                  flush=True)
            runs[module].append(run_communicator(messages, 32, module))
    rows = []
    for module in modules:
        rate = max(r["rate"] for r in runs[module])
        cpu = min(max(r["sender_cpu_us"], r["receiver_cpu_us"]) for r in runs[module])
        rows.append({"module": module, "msgs_per_s": round(rate),
                     "busier_cpu_us_per_msg": round(cpu, 2)})
    base_rate, base_cpu = rows[0]["msgs_per_s"], rows[0]["busier_cpu_us_per_msg"]
    for row in rows:
        row["relative_to_none"] = round(row["msgs_per_s"] / base_rate, 3)
        row["cpu_relative_to_none"] = round(base_cpu / row["busier_cpu_us_per_msg"], 3)
    return rows


BATCH = 32
#: a P body's size limit here: large enough that a batch of small messages is one body
_BUDGET = 1 << 20
SENDER, RECEIVER = "sender", "receiver"


def _pair(module: str) -> tuple[ProtocolNode, ProtocolNode, list, list, list]:
    mod = get_module(module)
    outboxes: dict[str, list[SentMessage]] = {SENDER: [], RECEIVER: []}
    delivered: list[int] = [0]

    def node(name: str) -> ProtocolNode:
        out = outboxes[name]
        return ProtocolNode(name, application="bench", session="bench",
                            transmit=lambda message, _dests: out.append(message),
                            clock=lambda: 0.0, send_creators=[mod.send_creator()],
                            receive_creators=[mod.receive_creator()])

    sender, receiver = node(SENDER), node(RECEIVER)

    def count(_message: Any) -> None:
        delivered[0] += 1

    receiver.message_listeners.append(count)
    for member in (sender, receiver):
        member.client_joined(SENDER, is_new_session=True, all_users=(SENDER,))
        member.client_joined(RECEIVER, all_users=(SENDER, RECEIVER))
    return sender, receiver, outboxes[SENDER], outboxes[RECEIVER], delivered


def _hand_over(out: list[SentMessage], to: ProtocolNode) -> tuple[float, float]:
    """Pack what ``out`` holds (CPU charged to its side) and deliver it at ``to``
    (charged to the other); the two CPU times."""
    if not out:
        return 0.0, 0.0
    clock = time.process_time
    start = clock()
    bodies = list(pack_envelopes(out, _BUDGET))
    out.clear()
    packed = clock()
    for body in bodies:
        messages = unpack_envelopes(body, to.name)[3]
        to.arrived_many(messages)
        to.drain()
    return packed - start, clock() - packed


@_paused_gc()
def measure_pipeline(module: str, messages: int) -> dict[str, float]:
    """``--pipeline``: CPU µs per message of the sending and the receiving side of
    ``module``'s own code: two nodes in one process, batches of :data:`BATCH` packed into
    frame bodies and back, each side's CPU summed apart. Signing, sockets and wake-ups
    are left out for every module alike, so the differences are the modules' own (and
    sender-side modules get each ACK at once: their CPU, not their round trip)."""
    gc.collect()  # works with the collector paused
    sender, receiver, sender_out, receiver_out, delivered = _pair(module)
    # the join's own control traffic (vector's bases) settles before the clock starts
    while sender_out or receiver_out:
        _hand_over(sender_out, receiver)
        _hand_over(receiver_out, sender)
    delivered[0] = 0
    clock = time.process_time
    send = receive = 0.0
    payloads = [{"i": i, "text": "x" * 32} for i in range(BATCH)]
    sent = 0
    while sent < messages:
        batch = min(BATCH, messages - sent)
        start = clock()
        for payload in payloads[:batch]:
            sender.submit(sender.tag_unicast(payload, RECEIVER))
        send += clock() - start
        sent += batch
        # until nothing is in flight (ACK-waiting modules send one at a time)
        while sender_out or receiver_out:
            packing, arriving = _hand_over(sender_out, receiver)
            send, receive = send + packing, receive + arriving
            packing, arriving = _hand_over(receiver_out, sender)
            receive, send = receive + packing, send + arriving
    if delivered[0] != messages:
        raise RuntimeError(f"{module}: {delivered[0]} of {messages} messages delivered")
    return {"send_us": send / messages * 1e6, "receive_us": receive / messages * 1e6}


def measure_pipelines(modules: list[str], messages: int, repeat: int) -> list[dict[str, Any]]:
    """Each module's :func:`measure_pipeline`, the modules taking turns in each repeat,
    the least CPU of each side kept; ratios against the first module (``none``) of the
    busier side's CPU (``cost_relative_to_none``: none's CPU divided by the module's)."""
    best: dict[str, dict[str, float]] = {}
    for turn in range(repeat):
        for module in modules:
            print(f"pipeline: {module} ({turn + 1}/{repeat})...", file=sys.stderr, flush=True)
            run = measure_pipeline(module, messages)
            kept = best.setdefault(module, run)
            for side in ("send_us", "receive_us"):
                kept[side] = min(kept[side], run[side])
    rows = []
    for module in modules:
        send, receive = best[module]["send_us"], best[module]["receive_us"]
        rows.append({"module": module, "send_us_per_msg": round(send, 2),
                     "receive_us_per_msg": round(receive, 2),
                     "busier_us_per_msg": round(max(send, receive), 2)})
    base = rows[0]
    for row in rows:
        # the module's own cost: what it adds to none's path on each side
        row["send_extra_us"] = round(row["send_us_per_msg"] - base["send_us_per_msg"], 2)
        row["receive_extra_us"] = round(
            row["receive_us_per_msg"] - base["receive_us_per_msg"], 2)
        row["send_relative_to_none"] = round(base["send_us_per_msg"] / row["send_us_per_msg"], 3)
        row["receive_relative_to_none"] = round(
            base["receive_us_per_msg"] / row["receive_us_per_msg"], 3)
        row["cost_relative_to_none"] = round(
            base["busier_us_per_msg"] / row["busier_us_per_msg"], 3)
    return rows


#: the share of matrix's metadata the relative panel marks
QUARTER = 0.25

_STYLES = {"matrix": ("tab:red", "-"), "matrix-delta": ("tab:purple", "--"),
           "ks": ("tab:green", "-"), "vector": ("tab:blue", ":"), "fifo": ("tab:grey", ":")}


def plot_metadata(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """``--plot``: the metadata bytes per application message of the rows of
    :func:`measure_overhead`, against the messages per process (or, given one length,
    the group size), and relative to matrix's, drawn to ``path``.

    Modules that carry no stamp (``none``, ``mfss``; ``cykas`` nearly none) cannot sit on
    a logarithmic axis and are named in the title instead. Raises ``ValueError`` when no
    measured module carries metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stamped = [m for m in dict.fromkeys(r["module"] for r in rows)
               if any(r["meta_bytes_per_message"] > 0 for r in rows if r["module"] == m)]
    if not stamped:
        raise ValueError("nothing to plot: none of the measured modules carries metadata")
    unstamped = [m for m in dict.fromkeys(r["module"] for r in rows) if m not in stamped]
    lengths = sorted({r["messages_per_process"] for r in rows})
    sizes = sorted({r["processes"] for r in rows})
    by_length = len(lengths) > 1
    panels = sizes if by_length else [None]
    relative = "matrix" in stamped and len(stamped) > 1
    figure, axes = plt.subplots(2 if relative else 1, len(panels), squeeze=False,
                                figsize=(5.2 * len(panels), 7.5 if relative else 4.2))
    matrix = {(r["processes"], r["messages_per_process"]): r["meta_bytes_per_message"]
              for r in rows if r["module"] == "matrix"}
    for column, size in enumerate(panels):
        top = axes[0][column]
        for module in stamped:
            part = sorted((r for r in rows if r["module"] == module
                           and (size is None or r["processes"] == size)),
                          key=lambda r: (r["messages_per_process"], r["processes"]))
            part = [r for r in part if r["meta_bytes_per_message"] > 0]
            if not part:
                continue
            xs = [r["messages_per_process" if by_length else "processes"] for r in part]
            colour, line = _STYLES.get(module, (None, "-"))
            top.plot(xs, [r["meta_bytes_per_message"] for r in part], marker="o",
                     markersize=4, color=colour, linestyle=line, label=module)
            if relative and module != "matrix":
                ratios = [(x, r["meta_bytes_per_message"]
                           / matrix[(r["processes"], r["messages_per_process"])])
                          for x, r in zip(xs, part, strict=True)
                          if matrix.get((r["processes"], r["messages_per_process"]))]
                if ratios:
                    axes[1][column].plot(*zip(*ratios, strict=True), marker="o", markersize=4,
                                         color=colour, linestyle=line, label=module)
        top.set_yscale("log")
        top.set_ylabel("metadata bytes per application message")
        top.set_title(f"{size} processes" if by_length
                      else f"{lengths[0]} messages per process")
        top.grid(True, which="both", alpha=0.3)
        top.legend(fontsize="small")
        bottom = axes[-1][column]
        if relative:
            bottom.axhline(QUARTER, color="grey", linewidth=0.8, linestyle=":",
                           label="a quarter of matrix's")
            bottom.set_ylim(0, 1.05)
            bottom.set_ylabel("relative to matrix's")
            bottom.grid(True, alpha=0.3)
            bottom.legend(fontsize="small")
        for ax in axes[:, column]:
            if by_length:  # the measured lengths as plain ticks on a log axis
                ax.set_xscale("log")
                ax.set_xticks(lengths, [str(n) for n in lengths])
                ax.minorticks_off()
        bottom.set_xlabel("messages per process (session length)" if by_length
                          else "processes")
    title = "Causal metadata per message, uniform random traffic"
    if unstamped:
        title += f" (no stamp: {', '.join(unstamped)})"
    figure.suptitle(title)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _check_writable(path: str) -> None:
    folder = Path(path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise cli.CliError(f"groupcomm overhead: --plot {path}: {error}") from None
    if Path(path).is_dir() or not os.access(folder, os.W_OK):
        raise cli.CliError(f"groupcomm overhead: --plot {path}: not a file that can be written")


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    modules = args.modules or default_modules()
    for name in modules:
        cli.checked_module(get_module, name, "groupcomm overhead", warn=False)
    if any(n < 2 for n in args.sizes) or any(m < 1 for m in args.messages):
        raise cli.CliError("groupcomm overhead: --sizes must be >= 2 and --messages >= 1")
    if args.pipeline < 0 or args.throughput < 0 or args.repeat < 1:
        raise cli.CliError("groupcomm overhead: --pipeline and --throughput must be >= 0 and "
                       "--repeat >= 1")
    if args.plot:  # before minutes of measuring, not after
        _check_writable(args.plot)
    rows = []
    for size in args.sizes:
        for messages in args.messages:
            for module in modules:
                print(f"overhead: {module} at n={size}, {messages} messages per process...",
                      file=sys.stderr, flush=True)
                rows.append(measure_overhead(module, size, messages, args.seed))
    if args.plot:
        try:
            path = plot_metadata(rows, args.plot)
        except (ValueError, OSError) as error:
            raise cli.CliError(f"groupcomm overhead: --plot {args.plot}: {error}") from None
        print(f"overhead: metadata plot written to {path}", file=sys.stderr)
    base = {(r["processes"], r["messages_per_process"]): r["cpu_us_per_message"]
            for r in rows if r["module"] == "none"}
    for row in rows:  # what the module adds to the same traffic without causality
        cpu = base.get((row["processes"], row["messages_per_process"]))
        row["cpu_extra_us"] = None if cpu is None else round(row["cpu_us_per_message"] - cpu, 1)
    ordered = ["none", *[m for m in modules if m != "none"]]
    pipeline = measure_pipelines(ordered, args.pipeline, args.repeat) if args.pipeline else []
    throughput = (measure_throughput(ordered, args.throughput, args.repeat)
                  if args.throughput else [])
    if args.json:
        print(json.dumps({"overhead": rows, "pipeline": pipeline, "throughput": throughput}))
        return 0
    width = max(len("module"), *(len(row["module"]) for row in rows))
    print(f"{'module':{width}} {'n':>4} {'msgs':>5} {'traffic':9} {'meta B/msg':>10} "
          f"{'B/copy':>7} {'ctrl/msg':>9} {'ctrl B/msg':>10} {'CPU us/msg':>10} "
          f"{'(+ on none)':>11}  control by kind")
    for row in rows:
        total = sum(row["control_per_message"].values())
        kinds = ", ".join(f"{k} {v}" for k, v in row["control_per_message"].items())
        extra = "" if row["cpu_extra_us"] is None else f"{row['cpu_extra_us']:+.1f}"
        print(f"{row['module']:{width}} {row['processes']:>4} {row['messages_per_process']:>5} "
              f"{row['traffic']:9} {row['meta_bytes_per_message']:>10} "
              f"{row['meta_bytes_per_copy']:>7} {total:>9.3f} "
              f"{row['control_bytes_per_message']:>10} {row['cpu_us_per_message']:>10.1f} "
              f"{extra:>11}  {kinds}")
    # the tables' first column as wide as the longest name (a plugin's may be long)
    name_width = max(13, *(len(m) for m in ordered))
    if pipeline:
        print(f"\n{'module':{name_width}} {'send us/msg':>12} {'(+ on none)':>11} "
              f"{'receive us/msg':>15} {'(+ on none)':>11} {'busier vs none':>15}")
        for row in pipeline:
            print(f"{row['module']:{name_width}} {row['send_us_per_msg']:>12.2f} "
                  f"{row['send_extra_us']:>+11.2f} {row['receive_us_per_msg']:>15.2f} "
                  f"{row['receive_extra_us']:>+11.2f} {row['cost_relative_to_none']:>15.3f}")
    if throughput:
        print(f"\n{'module':{name_width}} {'msg/s':>9} {'vs none':>8} {'CPU us/msg':>11} "
              f"{'CPU vs none':>12}")
        for row in throughput:
            print(f"{row['module']:{name_width}} {row['msgs_per_s']:>9,} {row['relative_to_none']:>8.3f} "
                  f"{row['busier_cpu_us_per_msg']:>11.2f} {row['cpu_relative_to_none']:>12.3f}")
    return 0


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm overhead",
        description="Metadata bytes, control messages and CPU per application message of "
        "each causality module at several group sizes and session lengths, and "
        "(--throughput N) each module's throughput through the real communicator relative "
        "to none in the same run.",
    )
    parser.add_argument("--modules", nargs="+",
                        help="default: every installed module that is not known-bad "
                        "(groupcomm filters), plugins' included")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 10, 50])
    parser.add_argument("--messages", type=int, nargs="+", default=[20],
                        help="messages per process; several values measure each")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--throughput", type=int, default=0, metavar="N",
                        help="also measure throughput with N messages per module")
    parser.add_argument("--pipeline", type=int, default=0, metavar="N",
                        help="also measure the CPU per message of each module's send and "
                        "receive path in one process, without sockets, with N messages")
    parser.add_argument("--repeat", type=int, default=1,
                        help="throughput and pipeline runs (least CPU and best rate kept)")
    parser.add_argument("--plot", metavar="PNG",
                        help="draw metadata bytes per message against messages per process "
                        "(or group size, given one --messages value), and relative to "
                        "matrix's when matrix is measured")
    cli.add_output_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
