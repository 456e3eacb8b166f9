"""Hostile input: the decoder never crashes and never deserializes unverified bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcomm.tools.fuzz import KEY, _Watch, handle_frame, run, seed_bodies
from groupcomm.wire.frames import REJECT_REASONS, FrameCodec
from groupcomm.wire.streams import StreamDecoder

REASONS = {"accepted", *REJECT_REASONS}


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_rejected_without_deserializing(data: bytes) -> None:
    watch = _Watch()
    with watch.active():
        outcome = handle_frame(FrameCodec(KEY), data)
    assert outcome in REASONS - {"accepted"}
    assert watch.calls == 0


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(seed_bodies()), st.binary(max_size=64), st.integers(0, 400))
def test_signed_garbage_is_a_clean_rejection(body: bytes, junk: bytes, cut: int) -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    outcome = handle_frame(receiver, sender.seal(body[:cut] + junk))
    assert outcome in REASONS


def test_the_seeds_are_accepted_whole() -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    streams = StreamDecoder(max_body=receiver.max_frame)  # a stream's chunks, in order
    assert [handle_frame(receiver, sender.seal(body), streams) for body in seed_bodies()] == [
        "accepted"] * len(seed_bodies())


def test_a_short_fuzzing_campaign_finds_no_crash() -> None:
    result = run(30_000, seed=7)
    assert result["crashes"] == 0, result["crash_samples"]
    signed = result["outcomes"]["signed"]
    assert set(signed) <= REASONS
    # mutated batches reach the batch parser behind the routed head: some are refused
    # there, some still decode
    assert signed["malformed"] > 0 and signed["accepted"] > 0
    assert signed["unknown_kind"] > 0 and result["outcomes"]["unsigned"]["bad_signature"] > 0
