"""Codec: signing, replay window, size limits, payload fallbacks, envelopes."""

from __future__ import annotations

import pytest

from groupcomm.codec import (
    PAYLOAD_DILL,
    PAYLOAD_PICKLE,
    FrameCodec,
    FrameRejected,
    ReplayWindow,
    decode_batch,
    decode_message,
    decode_received,
    dump_payload,
    encode_batch,
    encode_message,
    load_payload,
    meta_bytes,
)
from groupcomm.messages import ControlMessage, MessageError, SentMessage

KEY = b"k" * 32


def message(**changes: object) -> SentMessage:
    fields: dict[str, object] = dict(
        application_name="app", session_name="s", user_message={"text": "hi"},
        message_id="alice#1", sender="alice", vc=(("alice", 1),), destinations=("bob",),
    )
    fields.update(changes)
    return SentMessage(**fields)  # type: ignore[arg-type]


def test_seal_open_round_trip() -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    body, nonce, counter = receiver.open(sender.seal(b"payload"))
    assert body == b"payload" and nonce == sender.nonce and counter == 1


@pytest.mark.parametrize(
    ("frame_of", "reason"),
    [
        (lambda c: FrameCodec(b"x" * 32).seal(b"body"), "bad_signature"),
        (lambda c: b"short", "truncated"),
        (lambda c: c.seal(b"x" * 2000), "oversized"),
        (lambda c: c.seal(b"body")[:-1] + b"!", "bad_signature"),
    ],
    ids=["wrong-key", "truncated", "oversized", "tampered"],
)
def test_bad_frames_are_refused_before_decoding(frame_of, reason: str) -> None:
    sender = FrameCodec(KEY, max_frame=1000)
    receiver = FrameCodec(KEY, max_frame=1000)
    with pytest.raises(FrameRejected) as caught:
        receiver.open(frame_of(sender))
    assert caught.value.reason == reason


def test_replayed_frames_are_refused() -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    first = sender.seal(b"one")
    receiver.open(first)
    with pytest.raises(FrameRejected, match="already received"):
        receiver.open(first)


def test_replay_window_accepts_reordering_within_the_window_only() -> None:
    window = ReplayWindow(size=8)
    for counter in (1, 3, 2, 9, 5):
        window.check_and_record(b"n" * 8, counter)
    with pytest.raises(FrameRejected):
        window.check_and_record(b"n" * 8, 1)  # older than 9 - 8
    with pytest.raises(FrameRejected):
        window.check_and_record(b"n" * 8, 5)  # repeat
    window.check_and_record(b"n" * 8, 4)


def test_replay_window_bounds_the_senders_it_remembers() -> None:
    window = ReplayWindow(size=8, max_senders=3)
    for i in range(10):
        window.check_and_record(bytes([i]) * 8, 1)
    assert len(window._state) == 3  # noqa: SLF001


def test_plain_objects_use_standard_pickle_and_lambdas_use_dill() -> None:
    fmt, data = dump_payload({"a": [1, 2]})
    assert fmt == PAYLOAD_PICKLE and load_payload(fmt, data) == {"a": [1, 2]}
    offset = 5
    fmt, data = dump_payload(lambda x: x + offset)
    assert fmt == PAYLOAD_DILL and load_payload(fmt, data)(1) == 6


def test_envelope_round_trip_keeps_headers_and_clock() -> None:
    original = message(headers={"m": (1, (2, 3)), "b": b"\x00\x01"}, kind="eager")
    decoded = decode_message(encode_message(original))
    assert decoded == original
    assert decoded.headers == {"m": (1, (2, 3)), "b": b"\x00\x01"}
    received = decode_received(encode_message(original), "bob")
    assert received.client_name == "alice" and received.receiver == "bob"
    with pytest.raises(MessageError, match="not addressed"):
        decode_received(encode_message(original), "carol")


def test_control_messages_travel_without_pickle() -> None:
    control = message(user_message=ControlMessage("cykas", "ack", "alice#1"))
    decoded = decode_message(encode_message(control))
    assert decoded.user_message == ControlMessage("cykas", "ack", "alice#1")
    assert not decoded.is_user_message()


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x93\x01\x02\x03", b"\x9a" + b"\xc0" * 10])
def test_malformed_envelopes_raise_message_error(data: bytes) -> None:
    with pytest.raises(MessageError):
        decode_message(data)


def test_header_values_of_the_wrong_shape_are_refused_on_decode() -> None:
    import msgpack

    envelope = msgpack.unpackb(encode_message(message()), use_list=True)
    envelope[6] = msgpack.packb({"m": 1.5})
    with pytest.raises(MessageError, match="header"):
        decode_message(msgpack.packb(envelope))


def test_meta_bytes_counts_headers_and_kind_only() -> None:
    assert meta_bytes(message()) == 0
    assert meta_bytes(message(kind="eager")) == 1
    assert meta_bytes(message(headers={"s": 7})) == len(b"\x81\xa1s\x07")


def test_batches_round_trip() -> None:
    envelopes = [encode_message(message(message_id=f"alice#{i}")) for i in range(3)]
    assert decode_batch(encode_batch(envelopes)) == envelopes
    with pytest.raises(MessageError):
        decode_batch(b"B\x93\x01\x02\x03")
