"""Fuzzing the frame decoder and the envelope parser (``python -m groupcomm.tools.fuzz``):
every input must raise nothing but :class:`FrameRejected` or :class:`MessageError` and
not hang. ``unsigned``: random bytes and mutated signed frames, of which nothing may be
deserialized (msgpack, pickle and dill are watched). ``signed``: mutated bodies and packed
batches, re-signed with the session key to reach the parsers behind the signature.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any
from unittest.mock import patch

import dill
import msgpack

from groupcomm.cli.args import ArgumentParser, CliError, run_main
from groupcomm.core.messages import ControlMessage, MessageError, SentMessage
from groupcomm.wire.envelopes import pack_envelopes, unpack_envelopes
from groupcomm.wire.frames import ROUTED, FrameCodec, FrameRejected, kind_of, sealed_body
from groupcomm.wire.session import open_session, seal_session
from groupcomm.wire.streams import StreamDecoder, StreamEncoder

KEY = b"fuzzing-key-0123456789abcdef0123"
#: the destinations of the routed frames the fuzzer wraps itself
WRAPPED_DESTS = ("bob",)


def seed_batches() -> list[bytes]:
    """Valid packed batches (what routed frames carry) to mutate."""
    base = dict(application_name="im", session_name="s", message_id="alice#1",
                sender="alice", vc=(("alice", 1), ("bob", 2)), destinations=("bob", "carol"))
    messages = [
        SentMessage(user_message="hello", **base),  # type: ignore[arg-type]
        SentMessage(user_message={"k": [1, 2, 3]}, headers={"m": (1, (2, 3)), "s": b"\x01"},
                    **base),  # type: ignore[arg-type]
        SentMessage(user_message=ControlMessage("cykas", "ack", "bob#3"), kind="eager",
                    **base),  # type: ignore[arg-type]
    ]
    batches = list(pack_envelopes(messages, 1 << 20))  # all three in one batch
    batches += [next(pack_envelopes([m], 1 << 20)) for m in messages]
    return batches


def seed_bodies() -> list[bytes]:
    """Valid routed bodies (compressed and not) and session commands to mutate."""
    batches = seed_batches()
    streams = StreamEncoder()
    bodies = [streams.wrap(("bob", "carol"), b) for b in batches[:2]]
    bodies += [StreamEncoder(compress=False).wrap(WRAPPED_DESTS, b) for b in batches]
    session = FrameCodec(KEY)
    for op, fields in (("join", {"address": "tcp://1.2.3.4:5", "incarnation": 2}),
                       ("heartbeat", {"probe": 3}),
                       ("leave", {"direct_frames": {"bob": 4}})):
        frame = seal_session(session, op, client="alice", application="im", session="s",
                             **fields)
        bodies.append(sealed_body(frame))
    return bodies


def mutate(data: bytes, rng: random.Random, pool: Sequence[bytes]) -> bytes:
    """One to four random mutations of ``data``."""
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(6)
        if choice == 0 and buffer:  # flip bits
            for _ in range(rng.randint(1, 8)):
                index = rng.randrange(len(buffer))
                buffer[index] ^= 1 << rng.randrange(8)
        elif choice == 1 and buffer:  # truncate
            del buffer[rng.randrange(len(buffer)):]
        elif choice == 2:  # insert random bytes
            index = rng.randrange(len(buffer) + 1)
            buffer[index:index] = rng.randbytes(rng.randint(1, 16))
        elif choice == 3 and pool:  # splice with another input
            other = rng.choice(pool)
            cut = rng.randrange(len(buffer) + 1)
            buffer[cut:] = other[rng.randrange(len(other) + 1):]
        elif choice == 4 and buffer:  # interesting bytes (msgpack type markers, sizes)
            index = rng.randrange(len(buffer))
            buffer[index] = rng.choice(b"\x00\x7f\x80\x90\x9f\xa0\xc0\xc1\xc2\xc4\xc6"
                                       b"\xca\xcf\xd3\xdc\xdd\xde\xdf\xff")
        elif buffer:  # duplicate a chunk
            start = rng.randrange(len(buffer))
            buffer[start:start] = buffer[start:start + rng.randint(1, 32)]
    return bytes(buffer)


class _Watch:
    """Counts calls of the deserializers while active."""

    def __init__(self) -> None:
        self.calls = 0

    @contextmanager
    def active(self) -> Iterator[None]:
        # every decoder calls these through their modules (msgpack.unpackb, not a copy)
        with ExitStack() as patches:
            for module, name in ((pickle, "loads"), (dill, "loads"), (msgpack, "unpackb")):
                patches.enter_context(patch.object(module, name,
                                                   self._counted(getattr(module, name))))
            yield

    def _counted(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(*args, **kwargs)
        return wrapper


def handle_frame(receiver: FrameCodec, frame: bytes,
                 streams: StreamDecoder | None = None) -> str:
    """What a communicator does with one incoming frame, short of delivering it: the
    outcome, ``accepted`` or a rejection reason."""
    try:
        body, nonce, _ = receiver.open(frame)
        if kind_of(body) == ROUTED:
            if streams is None:
                streams = StreamDecoder(max_body=receiver.max_frame)
            if unpack_envelopes(streams.unwrap(nonce, body), "bob")[4]:
                return "malformed"  # messages refused one by one
        else:
            open_session(body)
    except FrameRejected as error:
        return error.reason
    except MessageError:
        return "malformed"
    return "accepted"


def run(inputs: int, seed: int, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run both campaigns with ``inputs`` inputs in all; return the figures."""
    rng = random.Random(seed)
    bodies = seed_bodies()
    batches = seed_batches()
    sender = FrameCodec(KEY)
    valid_frames = [sender.seal(b) for b in bodies]
    watch = _Watch()
    outcomes: dict[str, dict[str, int]] = {"unsigned": {}, "signed": {}}
    crashes: list[dict[str, Any]] = []
    slowest = 0.0
    started = time.perf_counter()
    half = inputs // 2
    receiver = FrameCodec(KEY, max_frame=1 << 16)
    # one receiver's decompressors for the whole run, as a communicator keeps them
    streams = StreamDecoder(max_body=receiver.max_frame)
    for index in range(inputs):
        signed = index >= half
        name = "signed" if signed else "unsigned"
        if signed and rng.random() < 0.5:
            frame = sender.seal(mutate(rng.choice(bodies), rng, bodies))
        elif signed:  # as a sender wraps a batch: as it is, or a stream's first chunk
            batch = mutate(rng.choice(batches), rng, batches)
            frame = sender.seal(StreamEncoder(compress=rng.random() < 0.5).wrap(
                WRAPPED_DESTS, batch))
        elif rng.random() < 0.2:
            frame = rng.randbytes(rng.randint(0, 200))
        else:
            frame = mutate(rng.choice(valid_frames), rng, valid_frames)
        before = watch.calls
        t0 = time.perf_counter()
        try:
            with nullcontext() if signed else watch.active():
                outcome = handle_frame(receiver, frame, streams)
        except Exception as error:  # a crash: the decoder raised something undocumented
            crashes.append({"input": frame.hex()[:400], "error": repr(error), "campaign": name})
            outcome = "crash"
        slowest = max(slowest, time.perf_counter() - t0)
        outcomes[name][outcome] = outcomes[name].get(outcome, 0) + 1
        if not signed and outcome != "accepted" and watch.calls != before:
            crashes.append({"input": frame.hex()[:400], "campaign": "unsigned",
                            "error": "deserialized before the signature was verified"})
        if progress and (index + 1) % 100_000 == 0:
            rate = (index + 1) / (time.perf_counter() - started)
            progress(f"{index + 1:,}/{inputs:,} inputs, {len(crashes)} crashes, "
                     f"{rate:,.0f} inputs/s")
    seconds = time.perf_counter() - started
    return {"inputs": inputs, "seed": seed, "crashes": len(crashes),
            "crash_samples": crashes[:5], "outcomes": outcomes,
            "slowest_input_ms": round(slowest * 1000, 3), "seconds": round(seconds, 1),
            "inputs_per_s": round(inputs / seconds)}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m groupcomm.tools.fuzz",
                            description="Fuzz the frame decoder and envelope parser.")
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.inputs < 1:
        raise CliError("--inputs must be positive")
    result = run(args.inputs, args.seed, lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['inputs']:,} inputs in {result['seconds']} s "
              f"({result['inputs_per_s']:,}/s): {result['crashes']} crashes; slowest input "
              f"{result['slowest_input_ms']} ms")
        for campaign, counts in result["outcomes"].items():
            print(f"  {campaign}: {counts}")
    return 1 if result["crashes"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fuzzer."""
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
