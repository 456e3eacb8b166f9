"""Codec: signing, replay window, size limits, payload fallbacks, envelopes."""

from __future__ import annotations

import pickle

import msgpack
import pytest

from groupcomm.core.headers import meta_bytes
from groupcomm.core.messages import ControlMessage, MessageError, ReceivedMessage, SentMessage
from groupcomm.wire.envelopes import (
    decode_message,
    decode_received,
    encode_message,
    pack_envelope,
    pack_envelopes,
    unpack_envelopes,
)
from groupcomm.wire.frames import SESSION, FrameCodec, FrameRejected, ReplayWindow
from groupcomm.wire.payload import (
    PAYLOAD_DILL,
    PAYLOAD_MSGPACK,
    PAYLOAD_PICKLE,
    dump_payload,
    load_payload,
)
from groupcomm.wire.session import (
    FIELD_CODES,
    OP_CODES,
    SESSION_FIELDS,
    open_session,
    seal_session,
)

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


@pytest.mark.parametrize("value", [
    ("insert", "alice#12", "x"), ("insert", None, "héllo\n"), ("delete", ("a#1", "a#1+1")),
    ("cursor", None), (), (1, -2, 2.5, True, b"\x00", ((("deep",),),)),
])
def test_plain_tuples_travel_as_msgpack_and_come_back_equal(value: tuple) -> None:
    fmt, data = dump_payload(value)
    assert fmt == PAYLOAD_MSGPACK
    back = load_payload(fmt, data)
    assert back == value and type(back) is tuple
    assert len(data) < len(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize("value", [
    ("a", [1]),                        # a list would come back as a tuple
    ("a", {"k": 1}),                   # maps are not plain
    (2 ** 70,),                        # out of msgpack's integer range
    ("\ud800",),                       # not valid UTF-8
    ReceivedMessage,                   # not a tuple at all (a class: by reference)
])
def test_tuples_msgpack_cannot_carry_exactly_are_pickled(value: object) -> None:
    fmt, data = dump_payload(value)
    assert fmt == PAYLOAD_PICKLE and load_payload(fmt, data) == value


def test_a_plain_tuple_keeps_its_types_through_a_packed_batch() -> None:
    sent = message(user_message=("insert", "bob#3+2", "abc"))
    body = next(iter(pack_envelopes([sent], 1 << 20)))
    entry = msgpack.unpackb(body[1:])[3][0]
    assert entry[5] == PAYLOAD_MSGPACK
    got = unpack_envelopes(body, "bob")[3]
    assert got[0].user_message == ("insert", "bob#3+2", "abc")
    assert decode_received(encode_message(sent), "bob").user_message == sent.user_message


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


def _received(message: SentMessage, receiver: str = "bob") -> ReceivedMessage:
    return message.received_by(receiver)


def test_packed_batches_round_trip_every_kind_of_message() -> None:
    sent = [
        message(message_id="alice#1"),
        message(message_id="alice#2", headers={"m": (1, (2, 3)), "s": b"\x01"}, kind="eager"),
        message(message_id="alice#3", user_message=ControlMessage("cykas", "ack", "bob#3")),
        message(message_id="alice#4", user_message=lambda x: x + 1),  # dill
        message(message_id="alice#5", destinations=("bob", "carol"), vc=(("alice", 5),
                                                                          ("bob", 2))),
    ]
    bodies = list(pack_envelopes(sent, 1 << 20))
    assert len(bodies) == 1 and bodies[0][:1] == b"P"
    app, session, sender, got, errors = unpack_envelopes(bodies[0], "bob")
    assert (app, session, sender, errors) == ("app", "s", "alice", [])
    assert [m.message_id for m in got] == [m.message_id for m in sent]
    assert got[3].user_message(1) == 2
    for original, decoded in zip(sent, got, strict=True):
        if original.message_id != "alice#4":
            assert decoded == _received(original)
            assert decoded.user_message == original.user_message


def test_packed_batches_keep_order_and_respect_the_budget() -> None:
    sent = [message(message_id=f"alice#{i}", user_message="x" * 100) for i in range(50)]
    bodies = list(pack_envelopes(sent, 1000))
    assert len(bodies) > 5
    assert all(len(body) <= 1000 + 64 for body in bodies)
    ids = [m.message_id for body in bodies for m in unpack_envelopes(body, "bob")[3]]
    assert ids == [m.message_id for m in sent]
    big = message(message_id="alice#99", user_message="y" * 5000)
    assert len(list(pack_envelopes([sent[0], big, sent[1]], 1000))) == 3  # travels alone


def test_packed_batches_split_where_the_sender_changes() -> None:
    sent = [message(message_id="alice#1"), message(message_id="carol#1", sender="carol"),
            message(message_id="carol#2", sender="carol")]
    bodies = list(pack_envelopes(sent, 1 << 20))
    assert [unpack_envelopes(b, "bob")[2] for b in bodies] == ["alice", "carol"]


def test_messages_packed_in_advance_join_a_batch() -> None:
    first, second = message(message_id="alice#1"), message(message_id="alice#2")
    bodies = list(pack_envelopes([first, pack_envelope(second)], 1 << 20))
    assert [m.message_id for m in unpack_envelopes(bodies[0], "bob")[3]] == ["alice#1",
                                                                             "alice#2"]


def test_a_message_that_cannot_be_serialized_is_left_out() -> None:
    bad = message(message_id="alice#2", user_message=(i for i in range(3)))  # not even dill
    sent = [message(message_id="alice#1"), bad, message(message_id="alice#3")]
    refused: list[str] = []
    bodies = list(pack_envelopes(sent, 1 << 20, lambda m, error: refused.append(m.message_id)))
    assert refused == ["alice#2"]
    assert [m.message_id for m in unpack_envelopes(bodies[0], "bob")[3]] == ["alice#1",
                                                                             "alice#3"]
    with pytest.raises(TypeError):
        list(pack_envelopes(sent, 1 << 20))


def test_bad_messages_in_a_packed_batch_are_refused_one_by_one() -> None:
    good = msgpack.unpackb(next(iter(pack_envelopes([message()], 1 << 20)))[1:])[3][0]
    entries = [
        good,
        [1, 2, 3],                                          # wrong length
        ["", *good[1:]],                                    # empty message id
        [good[0], ["carol"], *good[2:]],                    # not addressed to bob
        [*good[:4], [["alice", "one"]], *good[5:]],         # vector clock of the wrong shape
        [*good[:5], 7, good[6]],                            # unknown payload format
        [*good[:6], b"\x80\x05not a pickle"],               # payload does not unpickle
        [*good[:5], PAYLOAD_MSGPACK, b"\xc1"],              # msgpack payload not msgpack
        [*good[:5], PAYLOAD_MSGPACK, msgpack.packb({"a": 1})],  # msgpack payload a map
        [*good[:3], b"\xc1", *good[4:]],                    # headers not msgpack
        [*good[:3], ["f", 1], *good[4:]],                   # headers not a map
        [*good[:3], {"f": {"x": 1}}, *good[4:]],            # a header value not allowed
    ]
    body = b"P" + msgpack.packb(["app", "s", "alice", entries], use_bin_type=True)
    _, _, _, got, errors = unpack_envelopes(body, "bob")
    assert [m.message_id for m in got] == ["alice#1"]
    assert len(errors) == len(entries) - 1
    assert "msgpack payload malformed" in errors[6]
    assert "a msgpack payload must be an array, not dict" in errors[7]
    assert errors[-2] == "envelope headers must be a map"
    assert errors[-1].startswith("headers of 'alice#1' malformed: header 'f' has type dict")


def test_headers_travel_inside_the_batch_and_separately_packed_ones_are_refused() -> None:
    stamped = message(headers={"f": 7, "v": (("alice", "bob"), (1, 2))})
    entry = msgpack.unpackb(next(iter(pack_envelopes([stamped], 1 << 20)))[1:],
                            use_list=False)[3][0]
    assert entry[3] == {"f": 7, "v": (("alice", "bob"), (1, 2))}  # a map, not bytes
    packed = [*entry[:3], msgpack.packb({"f": 7, "v": [["alice", "bob"], [1, 2]]}),
              *entry[4:]]
    body = b"P" + msgpack.packb(["app", "s", "alice", [packed, entry]], use_bin_type=True)
    _, _, _, got, errors = unpack_envelopes(body, "bob")
    assert errors == ["envelope headers must be a map"]
    assert got[0].headers == {"f": 7, "v": (("alice", "bob"), (1, 2))}


@pytest.mark.parametrize("body", [
    b"P\xc1",                                                       # not msgpack
    b"P" + msgpack.packb(["app", "s", "alice"]),                    # 3 elements
    b"P" + msgpack.packb(["app", "s", "", []]),                     # empty sender
    b"P" + msgpack.packb([1, "s", "alice", []]),                    # application not a str
    b"P" + msgpack.packb(["app", "s", "alice", {"a": 1}]),          # messages not an array
])
def test_malformed_packed_batches_are_refused_whole(body: bytes) -> None:
    with pytest.raises(MessageError):
        unpack_envelopes(body, "bob")


def test_the_usual_kind_travels_as_a_code_and_others_by_name() -> None:
    for kind, travels in (("normal", 0), ("other", "other")):
        body = next(iter(pack_envelopes([message(kind=kind)], 1 << 20)))
        assert msgpack.unpackb(body[1:])[3][0][2] == travels
        assert unpack_envelopes(body, "bob")[3][0].kind == kind
    good = msgpack.unpackb(next(iter(pack_envelopes([message()], 1 << 20)))[1:])[3][0]
    body = b"P" + msgpack.packb(["app", "s", "alice", [[*good[:2], 5, *good[3:]]]])
    _, _, _, got, errors = unpack_envelopes(body, "bob")
    assert got == [] and errors == ["envelope field kind must be a string"]


def test_session_frames_travel_compact_and_spelled_out_ones_are_refused() -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    fields = dict(client="alice", application="edit", session="paper",
                  address="tcp://127.0.0.1:5555", wants_state=True, extra={"x": 1})
    frame = seal_session(sender, "join", **fields)
    body = receiver.open(frame)[0]
    assert open_session(body) == {"op": "join", **fields}
    compact = msgpack.unpackb(body[1:], strict_map_key=False)
    assert compact[0] == OP_CODES.index("join") and "extra" in compact  # it has no code
    assert compact[FIELD_CODES.index("wants_state")] is True
    for spelled in ({"op": "join", **fields},
                    {0: OP_CODES.index("join"), "client": "alice"},
                    {0: "join", **{FIELD_CODES.index(k): v for k, v in fields.items()
                                   if k != "extra"}}):
        with pytest.raises(FrameRejected) as refused:
            open_session(receiver.open(sender.seal(SESSION + msgpack.packb(spelled)))[0])
        assert refused.value.reason == "malformed"
    with pytest.raises(ValueError, match="unknown session op 'relay'"):
        seal_session(sender, "relay", **fields)


def test_every_op_has_a_code_and_its_required_fields() -> None:
    assert sorted(OP_CODES) == sorted(SESSION_FIELDS)
    assert len(set(FIELD_CODES)) == len(FIELD_CODES)


HEARTBEAT = OP_CODES.index("heartbeat")


@pytest.mark.parametrize("value, reason", [
    ({0: HEARTBEAT, 99: "x"}, "unknown session field code 99"),
    ({0: 42}, "session op must be one of the 14 op codes, not 42"),
    ({0: HEARTBEAT, 1: "a", 2: "a", 3: "s", 13: {1: "x"}}, "map keys must be strings"),
    ({0: HEARTBEAT, 1.5: "x"}, "names must be strings or codes"),
    ({1: "alice"}, "session op must be one of the 14 op codes, not None"),
    ({0: HEARTBEAT, 1: "a"}, "lacks application, session"),
])
def test_malformed_compact_session_frames_are_refused_precisely(value: dict,
                                                                reason: str) -> None:
    with pytest.raises(FrameRejected, match=reason) as raised:
        open_session(SESSION + msgpack.packb(value))
    assert raised.value.reason == "malformed"
