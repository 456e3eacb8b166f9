"""``groupcomm bench``: the communicator against the fastest plain pyzmq code (signed
pickles over PUSH/PULL) in the same run, rates at the receiver and CPU per message of
each process; for modules whose senders wait for acknowledgements, the plain pyzmq round
trip too. BENCHMARKS.md says what each figure means."""

from __future__ import annotations

import argparse
import hmac
import json
import multiprocessing as mp
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.core.registry import get_module
from groupcomm.tools.critical_path import describe, handling_bound, summarize
from groupcomm.transport.config import Connection


def _payload(i: int, size: int) -> dict[str, Any]:
    return {"seq": i, "text": "x" * size}


def _raw_receiver(address_q: Any, result_q: Any, count: int, key: bytes) -> None:
    import zmq

    socket = zmq.Context.instance().socket(zmq.PULL)
    port = socket.bind_to_random_port("tcp://127.0.0.1")
    address_q.put(f"tcp://127.0.0.1:{port}")
    received = 0
    first = cpu_first = 0.0
    while received < count:
        frame = socket.recv()
        signature, body = frame[:32], frame[32:]
        if not hmac.compare_digest(signature, hmac.digest(key, body, "sha256")):
            continue
        pickle.loads(body)
        received += 1
        if received == 1:
            first, cpu_first = time.perf_counter(), time.process_time()
    result_q.put((first, time.perf_counter(), received, time.process_time() - cpu_first))
    socket.close(linger=0)


def _raw_sender(address: str, count: int, size: int, key: bytes, cpu_q: Any) -> None:
    import zmq

    socket = zmq.Context.instance().socket(zmq.PUSH)
    socket.connect(address)
    # the fastest plain code: one-shot C HMAC, standard pickle, one frame per message
    dumps, digest = pickle.dumps, hmac.digest
    cpu = time.process_time()
    for i in range(count):
        body = dumps(_payload(i, size), protocol=pickle.HIGHEST_PROTOCOL)
        socket.send(digest(key, body, "sha256") + body)
    socket.close(linger=-1)
    cpu_q.put(time.process_time() - cpu)


def _measured(count: int, first: float, last: float, received: int, receiver_cpu: float,
              sender_cpu: float) -> dict[str, float]:
    return {
        "rate": (received - 1) / max(last - first, 1e-9),
        "sender_cpu_us": 1e6 * sender_cpu / count,
        "receiver_cpu_us": 1e6 * receiver_cpu / max(received - 1, 1),
    }


#: the start method of every measured process: a fresh interpreter, nothing inherited
_SPAWN = mp.get_context("spawn")


def _pair(first: Any, first_args: tuple, ready_q: Any, second: Any,
          second_args: Callable[[Any], tuple], collect: Callable[[], Any],
          ready_timeout: float = 30) -> Any:
    """Start ``first``; once it puts what ``second`` needs on ``ready_q``, start
    ``second`` with ``second_args(that)``; returns ``collect()``. Both are reaped."""
    one = _SPAWN.Process(target=first, args=first_args)
    one.start()
    two = None
    try:
        ready = ready_q.get(timeout=ready_timeout)
        two = _SPAWN.Process(target=second, args=second_args(ready))
        two.start()
        return collect()
    finally:
        _reap(two, one)


def run_raw(count: int, size: int) -> dict[str, float]:
    """Rate and CPU per message of the plain pyzmq baseline."""
    key = os.urandom(32)
    address_q, result_q, cpu_q = _SPAWN.Queue(), _SPAWN.Queue(), _SPAWN.Queue()

    def collect() -> dict[str, float]:
        first, last, received, receiver_cpu = result_q.get(timeout=300)
        return _measured(count, first, last, received, receiver_cpu, cpu_q.get(timeout=60))

    return _pair(_raw_receiver, (address_q, result_q, count, key), address_q, _raw_sender,
                 lambda address: (address, count, size, key, cpu_q), collect)


def _reap(*processes: Any) -> None:
    """Wait a moment for each started process (None: never started), then kill it."""
    for process in processes:
        if process is not None:
            process.join(10)
            if process.is_alive():
                process.kill()


ROUND_TRIP_WARMUP = 200
#: the fraction of one message per round trip the sender-side modules aim at
#: (BENCHMARKS.md); ``--critical-path`` says how much handling that leaves
ROUND_TRIP_TARGET = 0.7


def _signed(key: bytes, value: Any) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return hmac.digest(key, body, "sha256") + body


def _opened(key: bytes, frame: bytes) -> Any:
    signature, body = frame[:32], frame[32:]
    if not hmac.compare_digest(signature, hmac.digest(key, body, "sha256")):
        raise RuntimeError("round trip: a frame failed verification")
    return pickle.loads(body)


def _receiver(pull: Any, polled: bool) -> Any:
    """``recv`` of ``pull``: blocking in libzmq, or (``polled``) waiting in a
    ``zmq.Poller`` beside a pipe, as an event loop that has more than one input does."""
    if not polled:
        return pull.recv
    import zmq

    read_end, _ = os.pipe()
    poller = zmq.Poller()
    poller.register(read_end, zmq.POLLIN)
    poller.register(pull, zmq.POLLIN)

    def recv() -> bytes:
        while True:
            try:
                return pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                poller.poll(1000)

    return recv


def _ends(ready_q: Any, peer: Callable[[], str], polled: bool) -> tuple[Any, Any, Any]:
    """A PULL socket bound to a free port (its address put on ``ready_q``), a PUSH
    connected to ``peer()``, and the PULL's ``recv`` (:func:`_receiver`)."""
    import zmq

    context = zmq.Context.instance()
    pull = context.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    ready_q.put(f"tcp://127.0.0.1:{port}")
    push = context.socket(zmq.PUSH)
    push.connect(peer())
    return push, pull, _receiver(pull, polled)


def _ponger(address_q: Any, peer_q: Any, exchanges: int, key: bytes, polled: bool) -> None:
    push, pull, recv = _ends(address_q, lambda: peer_q.get(timeout=30), polled)
    for _ in range(exchanges):
        message = _opened(key, recv())
        push.send(_signed(key, {"ack": message["seq"]}))
    push.close(linger=-1)
    pull.close(linger=0)


def _pinger(address: str, peer_q: Any, result_q: Any, count: int, size: int,
            key: bytes, polled: bool) -> None:
    push, pull, recv = _ends(peer_q, lambda: address, polled)
    start = 0.0
    for i in range(ROUND_TRIP_WARMUP + count):
        if i == ROUND_TRIP_WARMUP:
            start = time.perf_counter()
        push.send(_signed(key, _payload(i, size)))
        if _opened(key, recv())["ack"] != i:
            raise RuntimeError("round trip: a reply out of turn")
    result_q.put((time.perf_counter() - start) / count)
    push.close(linger=0)
    pull.close(linger=0)


def run_round_trip(count: int, size: int, polled: bool = False) -> float:
    """The mean time, in seconds, of one plain pyzmq request/response between two
    processes (signed pickle each way); ``polled``: each side waits in a ``zmq.Poller``
    instead of a blocking ``recv``."""
    key = os.urandom(32)
    address_q, peer_q, result_q = _SPAWN.Queue(), _SPAWN.Queue(), _SPAWN.Queue()
    return _pair(_ponger, (address_q, peer_q, ROUND_TRIP_WARMUP + count, key, polled),
                 address_q, _pinger,
                 lambda address: (address, peer_q, result_q, count, size, key, polled),
                 lambda: float(result_q.get(timeout=300)))


def waits_for_acknowledgements(causality: str) -> bool:
    """Whether ``causality``'s senders wait for acknowledgements (bounded by round
    trips)."""
    return get_module(causality).acknowledged_sends


def _member(name: str, server: str, key_file: str, causality: str, routing: str,
            compress: bool | None, reliable: bool = False) -> Any:
    from groupcomm.core.selection import RELIABLE, filter_creators
    from groupcomm.transport.communicator import Communicator
    from groupcomm.transport.config import Pipelines

    send, receive = filter_creators([RELIABLE] if reliable else [])
    return Communicator(name, "bench", server=server, key_file=key_file, routing=routing,
                        causality=causality, connection=Connection(compress_frames=compress),
                        pipelines=Pipelines(extra_send=send, extra_receive=receive))


def _comm_receiver(member: tuple, ready_q: Any, result_q: Any, count: int,
                   timeline: bool) -> None:
    import threading

    done = threading.Event()
    state = {"n": 0, "first": 0.0, "last": 0.0, "cpu_first": 0.0, "cpu": 0.0}

    def on_message(_message: Any) -> None:
        state["n"] += 1
        if state["n"] == 1:
            state["first"], state["cpu_first"] = time.perf_counter(), time.process_time()
        if state["n"] == count:
            state["last"] = time.perf_counter()
            state["cpu"] = time.process_time() - state["cpu_first"]
            done.set()

    with _member("receiver", *member) as comm:
        comm.add_message_listener(on_message)
        if timeline:
            comm.frame_timeline = []
        ready_q.put("ready")
        done.wait(600)
        # the last ACK leaves in the I/O thread's turn after the last delivery
        deadline = time.monotonic() + 5
        while comm.frame_timeline is not None and time.monotonic() < deadline and not (
                comm.frame_timeline and comm.frame_timeline[-1][0] == "sent"):
            time.sleep(0.01)
        counters = comm.counters()
        result_q.put((state["first"], state["last"], state["n"], state["cpu"],
                      list(comm.frame_timeline or ()),
                      {key: value for key, value in counters.items()
                       if key.startswith("reliable_")}))


def _comm_sender(member: tuple, count: int, size: int, cpu_q: Any, timeline: bool) -> None:
    with _member("sender", *member) as comm:
        deadline = time.monotonic() + 30
        while "receiver" not in comm.members and time.monotonic() < deadline:
            time.sleep(0.01)
        if timeline:
            comm.frame_timeline = []
        cpu = time.process_time()
        for i in range(count):
            comm.to_user("receiver", _payload(i, size))
        # sender-side modules hold messages until ACKs come back: wait for all to leave
        comm.flush(timeout=600)
        cpu_q.put((time.process_time() - cpu, list(comm.frame_timeline or ())))
        time.sleep(0.5)


#: ``--compress-frames`` -> the communicators' ``compress_frames``
COMPRESS: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


def run_communicator(count: int, size: int, causality: str = "none",
                     routing: str = "direct", timeline: bool = False,
                     compress: bool | None = None, reliable: bool = False) -> dict[str, Any]:
    """Rate and CPU per message through two communicators with forwarding pipelines;
    with ``timeline``, also where one message's time goes (``critical_path``, see
    :mod:`groupcomm.tools.critical_path`); ``compress``: the communicators'
    ``compress_frames`` (None: their default for the routing); ``reliable``: with the
    reliable layer under the module, and the receiver's counts of it
    (``reliable_frames_received``, ``reliable_acks_sent``, ...) in the result."""
    from groupcomm.tools.procs import ProcessGroup

    with tempfile.TemporaryDirectory() as workdir, ProcessGroup(Path(workdir)) as group:
        assert group.server is not None
        member = (group.server.address, str(group.key_file), causality, routing, compress,
                  reliable)
        ready_q, result_q, cpu_q = _SPAWN.Queue(), _SPAWN.Queue(), _SPAWN.Queue()
        received_at, sent_by = _pair(
            _comm_receiver, (member, ready_q, result_q, count, timeline), ready_q,
            _comm_sender, lambda _: (member, count, size, cpu_q, timeline),
            lambda: (result_q.get(timeout=600), cpu_q.get(timeout=600)), ready_timeout=60)
    first, last, received, receiver_cpu, receiver_timeline, layer = received_at
    sender_cpu, sender_timeline = sent_by
    if received < count:
        raise RuntimeError(f"only {received}/{count} messages arrived")
    result: dict[str, Any] = _measured(count, first, last, received, receiver_cpu, sender_cpu)
    if timeline:
        result["critical_path"] = summarize(sender_timeline, receiver_timeline)
    if reliable:
        result["receiver_reliable"] = layer
    return result


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm bench",
        description=(
            "Measure, in one run and for the same messages, raw pyzmq PUSH/PULL with signed "
            "pickle frames (the baseline) and the communicator with forwarding pipelines "
            "between two processes; print both rates and their ratio."
        ),
    )
    parser.add_argument("--messages", type=int, default=50_000, help="messages per run")
    parser.add_argument("--size", type=int, default=32, help="payload text bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; best is kept")
    parser.add_argument("--causality", default="none",
                        help="module for the communicator run (default none)")
    parser.add_argument("--reliable", action="store_true",
                        help="the communicators with the reliable layer under the module "
                             "(the apps' default); prints the receiver's acknowledgements")
    parser.add_argument("--routing", choices=("direct", "relayed"), default="direct",
                        help="communicator routing: peer to peer (default) or through the "
                             "session server")
    parser.add_argument("--compress-frames", choices=tuple(COMPRESS), default="auto",
                        help="the communicators' compress_frames: on, off, or auto (their "
                             "default: compressed with relayed routing, not with direct)")
    parser.add_argument("--round-trip", choices=("auto", "yes", "no"), default="auto",
                        help="also measure the plain pyzmq round trip and the module's "
                             "rate as a fraction of one message per round trip (auto: for "
                             "modules whose senders wait for acknowledgements)")
    parser.add_argument("--round-trips", type=int, default=5000,
                        help="exchanges per round-trip measurement (default 5000)")
    parser.add_argument("--critical-path", action="store_true",
                        help="record when each frame is taken up and sent in both "
                             "processes and split one message's time into turnaround "
                             "in each process and transfer each way (modules whose "
                             "senders wait for acknowledgements: mfss, cykas)")
    cli.add_output_arguments(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    if args.messages < 2 or args.repeat < 1 or args.size < 0 or args.round_trips < 1:
        raise cli.CliError("groupcomm bench: --messages >= 2, --repeat >= 1, --size >= 0, "
                       "--round-trips >= 1")
    acknowledged = cli.checked_module(get_module, args.causality,
                                      "groupcomm bench").acknowledged_sends
    round_trip = args.round_trip == "yes" or args.round_trip == "auto" and acknowledged
    if args.critical_path and not acknowledged:
        raise cli.CliError(f"groupcomm bench: --critical-path needs a module whose senders wait "
                       f"for acknowledgements (mfss, cykas); {args.causality} does not, so "
                       "its frames are not answered one by one")
    raw_runs: list[dict[str, float]] = []
    comm_runs: list[dict[str, Any]] = []
    round_trips: list[float] = []
    polled_trips: list[float] = []
    for run in range(args.repeat):
        print(f"run {run + 1}/{args.repeat}: baseline...", file=sys.stderr, flush=True)
        raw_runs.append(run_raw(args.messages, args.size))
        if round_trip:
            print(f"run {run + 1}/{args.repeat}: round trip...", file=sys.stderr, flush=True)
            round_trips.append(run_round_trip(args.round_trips, args.size))
            polled_trips.append(run_round_trip(args.round_trips, args.size, polled=True))
        print(f"run {run + 1}/{args.repeat}: communicator...", file=sys.stderr, flush=True)
        comm_runs.append(run_communicator(args.messages, args.size, args.causality,
                                          args.routing, timeline=args.critical_path,
                                          compress=COMPRESS[args.compress_frames],
                                          reliable=args.reliable))
    raw = max(r["rate"] for r in raw_runs)
    comm = max(r["rate"] for r in comm_runs)
    # each side's CPU in the least disturbed run
    cpu = {name: {side: round(min(r[f"{side}_cpu_us"] for r in runs), 2)
                  for side in ("sender", "receiver")}
           for name, runs in (("baseline", raw_runs), ("communicator", comm_runs))}
    cpu_ratio = max(cpu["baseline"].values()) / max(max(cpu["communicator"].values()), 1e-9)
    result = {
        "messages": args.messages,
        "payload_bytes": args.size,
        "causality": args.causality,
        "routing": args.routing,
        "compress_frames": (args.routing == "relayed" if args.compress_frames == "auto"
                            else args.compress_frames == "on"),
        "baseline_msgs_per_s": round(raw),
        "communicator_msgs_per_s": round(comm),
        "ratio": round(comm / raw, 3),
        "baseline_runs": [round(r["rate"]) for r in raw_runs],
        "communicator_runs": [round(r["rate"]) for r in comm_runs],
        "reliable": args.reliable,
        "cpu_us_per_msg": cpu,
        "cpu_ratio": round(cpu_ratio, 3),
    }
    if round_trips:
        rtt = min(round_trips)  # the fastest exchange rate measured: the tightest bound
        result.update({
            "round_trip_us": round(rtt * 1e6, 1),
            "round_trip_runs_us": [round(r * 1e6, 1) for r in round_trips],
            "round_trip_bound_msgs_per_s": round(1 / rtt),
            "fraction_of_round_trip_bound": round(comm * rtt, 3),
            # the same exchange when each side waits in a poller (an event loop's floor)
            "polled_round_trip_us": round(min(polled_trips) * 1e6, 1),
            "polled_fraction_of_round_trip_bound": round(rtt / min(polled_trips), 3),
        })
    if args.reliable:
        # the receiver's layer in each run: frames it took in, acknowledgements it sent
        result["receiver_reliable_runs"] = [r["receiver_reliable"] for r in comm_runs]
        result["frames_per_ack"] = [
            round(r["receiver_reliable"].get("reliable_frames_received", 0)
                  / max(1, r["receiver_reliable"].get("reliable_acks_sent", 0)), 1)
            for r in comm_runs]
    if args.critical_path:  # that of the fastest run
        path = max(comm_runs, key=lambda r: r["rate"])["critical_path"]
        result["critical_path"] = path
        if round_trips and comm > 0:
            path.update(handling_bound(path, 1e6 / comm, result["round_trip_us"],
                                       ROUND_TRIP_TARGET))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"baseline (raw pyzmq, signed pickle): {result['baseline_msgs_per_s']:>9,} msg/s")
        print(f"communicator ({args.causality} filters"
              f"{' over the reliable layer' if args.reliable else ''}, {args.routing}"
              f"{', frames compressed' if result['compress_frames'] else ''}): "
              f"{result['communicator_msgs_per_s']:>9,} msg/s")
        print(f"ratio: {result['ratio']:.2f}")
        for name, sides in cpu.items():
            print(f"CPU per message, {name}: sender {sides['sender']:.1f} us, "
                  f"receiver {sides['receiver']:.1f} us")
        print(f"CPU ratio (busier side, baseline / communicator): {result['cpu_ratio']:.2f}")
        if args.reliable:
            print("receiver's reliable layer, frames received per acknowledgement, each run: "
                  + ", ".join(f"{ratio:g}" for ratio in result["frames_per_ack"]))
        if round_trips:
            print(f"round trip (plain pyzmq ping-pong): {result['round_trip_us']:.1f} us, "
                  f"bound {result['round_trip_bound_msgs_per_s']:,} msg/s; "
                  f"{args.causality} reaches {result['fraction_of_round_trip_bound']:.2f} "
                  "of it")
            print(f"the same exchange waiting in a zmq.Poller: "
                  f"{result['polled_round_trip_us']:.1f} us, "
                  f"{result['polled_fraction_of_round_trip_bound']:.2f} of the bound")
        if args.critical_path:
            print(f"where one message's time goes (fastest run, "
                  f"{1e6 / comm:.1f} us per message):")
            for line in describe(result["critical_path"]):
                print(line)
            path = result["critical_path"]
            if "rest_us" in path:
                print(f"  the rest (transfers, send calls, slow tails): {path['rest_us']:.1f} us "
                      f"per message, {path['fraction_without_handling']:.2f} of the bound with "
                      f"no handling at all; {ROUND_TRIP_TARGET} of it leaves "
                      f"{path['handling_budget_us']:.1f} us of handling per turnaround")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
