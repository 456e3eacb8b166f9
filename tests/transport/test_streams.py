"""Routed frames: streams per destination set, messages as differences, the frame
header's LEB128 counter, and what a receiver does with a lost, reordered or broken chunk."""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcomm.core.messages import SentMessage
from groupcomm.wire.deltas import difference, restore
from groupcomm.wire.envelopes import pack_envelopes, unpack_envelopes
from groupcomm.wire.frames import (
    HEADER_SIZE,
    ROUTED,
    FrameCodec,
    FrameRejected,
    kind_of,
    sealed_body,
)
from groupcomm.wire.streams import (
    COMPRESS_LIMIT,
    SHARED_KEPT,
    SharedStreams,
    StreamDecoder,
    StreamEncoder,
    routed_head,
)

KEY = b"s" * 32
DESTS = ("bob", "carol")


def keystroke(k: int, *, members: tuple[str, ...] = ("alice", "bob", "carol"),
              text: str = "e", sender: str = "alice") -> SentMessage:
    """A message shaped like a typed key under a matrix clock."""
    triples = tuple(v for i in range(len(members)) for j in range(len(members)) if i != j
                    for v in (i, j, 100 + k + i))
    return SentMessage(
        application_name="edit", session_name="paper", user_message=("insert", f"bob#{k}", text),
        message_id=f"{sender}#{k}", sender=sender, destinations=DESTS,
        headers={"M": (members, triples)},
        vc=tuple((name, 300 + k + n) for n, name in enumerate(members)))


def body_of(*messages: SentMessage) -> bytes:
    return next(pack_envelopes(list(messages), 1 << 20))


def through(encoder: StreamEncoder, decoder: StreamDecoder, body: bytes,
            dests: tuple[str, ...] = DESTS, nonce: bytes = b"n" * 8) -> bytes:
    return decoder.unwrap(nonce, encoder.wrap(dests, body))


def test_a_stream_of_keystrokes_comes_back_exactly_and_shrinks_to_a_fraction() -> None:
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 20)
    sizes = []
    for k in range(1, 200):
        body = body_of(keystroke(k))
        routed = encoder.wrap(DESTS, body)
        sizes.append((len(body), len(routed)))
        assert decoder.unwrap(b"n" * 8, routed) == body
    plain = sum(b for b, _ in sizes[10:])
    routed_total = sum(r for _, r in sizes[10:])
    # a keystroke's batch differs from the one before in a few bytes
    assert routed_total < plain / 3


def test_a_batch_unlike_the_one_before_goes_as_it_is() -> None:
    """A difference from an unrelated batch would be as random as that batch: a batch
    of repeated text after one of random bytes still shrinks to a tenth of its size."""
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 20)
    noise = body_of(keystroke(1, text=os.urandom(600).hex()))
    plain = body_of(keystroke(2, text="x" * 1200))
    assert through(encoder, decoder, noise) == noise
    routed = encoder.wrap(DESTS, plain)
    assert len(routed) < 200
    assert decoder.unwrap(b"n" * 8, routed) == plain


def test_the_head_names_the_destinations_for_the_server() -> None:
    routed = StreamEncoder().wrap(DESTS, body_of(keystroke(1)))
    assert kind_of(routed) == ROUTED
    dests, seq, offset = routed_head(routed)
    assert (dests, seq) == (DESTS, 1)
    assert offset < len(routed)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=20),
       st.integers(0, 2**40), st.binary(max_size=8))
def test_the_head_reads_the_same_whatever_its_size(dests: list[str], seq: int,
                                                   data: bytes) -> None:
    body = ROUTED + msgpack.packb(dests) + msgpack.packb(seq) + data
    unpacker = msgpack.Unpacker(raw=False, use_list=False)
    unpacker.feed(body[1:])
    expected = (unpacker.unpack(), unpacker.unpack(), 1 + unpacker.tell())
    assert routed_head(body) == expected


def test_a_large_batch_travels_uncompressed_and_leaves_the_stream_alone() -> None:
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 22)
    first = body_of(keystroke(1))
    assert through(encoder, decoder, first) == first
    big = body_of(*(keystroke(k, text="x" * 200) for k in range(2, 40)))
    assert len(big) > COMPRESS_LIMIT
    routed = encoder.wrap(DESTS, big)
    assert routed_head(routed)[1] == 0
    assert decoder.unwrap(b"n" * 8, routed) == big
    # the stream goes on from its first chunk
    second = body_of(keystroke(40))
    routed = encoder.wrap(DESTS, second)
    assert routed_head(routed)[1] == 2
    assert decoder.unwrap(b"n" * 8, routed) == second


def test_a_lost_chunk_is_reported_and_the_stream_heals_when_it_restarts() -> None:
    encoder = StreamEncoder(restart_every=4)
    decoder = StreamDecoder(max_body=1 << 20)
    bodies = [body_of(keystroke(k)) for k in range(1, 10)]
    routed = [encoder.wrap(DESTS, b) for b in bodies]
    assert [routed_head(r)[1] for r in routed] == [1, 2, 3, 4, 1, 2, 3, 4, 1]
    assert decoder.unwrap(b"n" * 8, routed[0]) == bodies[0]
    # chunk 2 is lost: 3 and 4 cannot be decoded, and say why
    for lost in routed[2:4]:
        with pytest.raises(FrameRejected) as refused:
            decoder.unwrap(b"n" * 8, lost)
        assert refused.value.reason == "stream_gap"
        assert "after chunk 1" in refused.value.detail
    # the next round starts afresh
    for body, chunk in zip(bodies[4:], routed[4:], strict=True):
        assert decoder.unwrap(b"n" * 8, chunk) == body


def test_a_restart_asked_by_the_sender_starts_every_stream_afresh() -> None:
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 20)
    through(encoder, decoder, body_of(keystroke(1)))
    lost = encoder.wrap(DESTS, body_of(keystroke(2)))  # never arrives
    encoder.restart()
    body = body_of(keystroke(3))
    routed = encoder.wrap(DESTS, body)
    assert routed_head(routed)[1] == 1
    assert decoder.unwrap(b"n" * 8, routed) == body
    assert routed_head(lost)[1] == 2


def test_streams_are_kept_per_sender_and_destination_set() -> None:
    alice, carol = StreamEncoder(), StreamEncoder()
    decoder = StreamDecoder(max_body=1 << 20)
    for k in range(1, 6):
        for encoder, nonce, dests in ((alice, b"a" * 8, DESTS), (alice, b"a" * 8, ("bob",)),
                                      (carol, b"c" * 8, DESTS)):
            body = body_of(keystroke(k, sender="alice" if nonce == b"a" * 8 else "carol"))
            assert decoder.unwrap(nonce, encoder.wrap(dests, body)) == body


def test_a_sender_that_evicts_a_stream_restarts_it() -> None:
    encoder = StreamEncoder(max_streams=2)
    decoder = StreamDecoder(max_body=1 << 20)
    sets = [("bob",), ("carol",), ("dave",)]
    for k in range(1, 5):
        for dests in sets:
            body = body_of(keystroke(k))
            routed = encoder.wrap(dests, body)
            assert routed_head(routed)[1] == 1  # always evicted before its next use
            assert decoder.unwrap(b"n" * 8, routed) == body


def test_a_chunk_that_inflates_past_the_frame_limit_is_refused() -> None:
    encoder = StreamEncoder(compress_limit=1 << 20)
    decoder = StreamDecoder(max_body=2000)
    body = body_of(keystroke(1, text="a" * 50_000))
    with pytest.raises(FrameRejected) as refused:
        decoder.unwrap(b"n" * 8, encoder.wrap(DESTS, body))
    assert refused.value.reason == "oversized"


@pytest.mark.parametrize("head, why", [
    (msgpack.packb([]) + msgpack.packb(1), "destinations"),
    (msgpack.packb(["bob", 3]) + msgpack.packb(1), "destinations"),
    (msgpack.packb(["bob"]) + msgpack.packb(-1), "chunk number"),
    (msgpack.packb(["bob"]) + msgpack.packb("1"), "chunk number"),
    (b"\xc1", "not msgpack"),
])
def test_a_malformed_head_is_refused_with_its_reason(head: bytes, why: str) -> None:
    with pytest.raises(FrameRejected) as refused:
        StreamDecoder(max_body=1 << 20).unwrap(b"n" * 8, ROUTED + head + b"junk")
    assert refused.value.reason == "malformed"
    assert why in refused.value.detail


def test_a_chunk_that_is_not_deflate_drops_the_stream() -> None:
    decoder = StreamDecoder(max_body=1 << 20)
    head = ROUTED + msgpack.packb(["bob"]) + msgpack.packb(1)
    with pytest.raises(FrameRejected) as refused:
        decoder.unwrap(b"n" * 8, head + b"\xff\xff\xff")
    assert refused.value.reason == "malformed"
    follow = ROUTED + msgpack.packb(["bob"]) + msgpack.packb(2)
    with pytest.raises(FrameRejected) as refused:
        decoder.unwrap(b"n" * 8, follow + b"\x00")
    assert refused.value.reason == "stream_gap"


def test_an_uncompressed_chunk_must_carry_a_packed_batch() -> None:
    with pytest.raises(FrameRejected, match="packed batch"):
        StreamDecoder(max_body=1 << 20).unwrap(
            b"n" * 8, ROUTED + msgpack.packb(["bob"]) + b"\x00" + b"Mjunk")


# -- differences -------------------------------------------------------------------------------
def test_two_keystrokes_differ_in_a_few_small_values() -> None:
    first, second = body_of(keystroke(1)), body_of(keystroke(2))
    diff = difference(second, first)
    assert len(diff) == len(second)
    changed = [b for b in diff if b]
    # the id's number, the six stamp counts, the three tag counts and the anchor's number
    assert len(changed) <= 12 and set(changed) == {1}
    assert restore(diff, first) == second


def test_a_body_longer_or_shorter_than_the_one_before_comes_back() -> None:
    short, long = body_of(keystroke(1)), body_of(keystroke(2, text="a longer run"))
    for body, previous in ((short, long), (long, short), (short, b""), (b"", long)):
        assert restore(difference(body, previous), previous) == body


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_any_body_comes_back_from_its_difference(body: bytes, previous: bytes) -> None:
    assert restore(difference(body, previous), previous) == body


# -- frames ------------------------------------------------------------------------------------
@pytest.mark.parametrize("count, size", [(1, 1), (127, 1), (128, 2), (16_383, 2),
                                         (16_384, 3), (2**40, 6)])
def test_the_frame_counter_is_leb128(count: int, size: int) -> None:
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    sender._counter = count - 1  # noqa: SLF001  the next frame carries ``count``
    frame = sender.seal(b"Sx")
    assert len(frame) == HEADER_SIZE - 1 + size + 2
    assert receiver.open(frame) == (b"Sx", sender.nonce, count)


def test_a_frame_of_another_version_is_refused_as_such() -> None:
    # the layout of version 2: "g2", the nonce, an eight-byte counter
    signed = struct.pack(">2s8sQ", b"g2", os.urandom(8), 7) + b"Sbody"
    mac = hmac.new(KEY, signed, hashlib.sha256).digest()[:16]
    with pytest.raises(FrameRejected) as refused:
        FrameCodec(KEY).open(mac + signed)
    assert refused.value.reason == "unknown_version"


@pytest.mark.parametrize("kind", [b"M", b"B", b"P", b"", b"\x00"])
def test_a_body_of_another_kind_is_refused_as_such(kind: bytes) -> None:
    with pytest.raises(FrameRejected) as refused:
        kind_of(kind + b"body")
    assert refused.value.reason == "unknown_kind"


def test_a_counter_that_never_ends_is_malformed() -> None:
    signed = b"\x03" + b"n" * 8 + b"\xff" * 12 + b"S"
    mac = hmac.new(KEY, signed, hashlib.sha256).digest()[:16]
    with pytest.raises(FrameRejected, match="LEB128"):
        FrameCodec(KEY).open(mac + signed)


def test_a_frame_the_server_returned_can_be_taken_once_more() -> None:
    sender, server = FrameCodec(KEY), FrameCodec(KEY)
    frame = sender.seal(StreamEncoder().wrap(DESTS, body_of(keystroke(1))))
    assert sealed_body(frame)[:1] == ROUTED
    _, nonce, counter = server.open(frame)
    with pytest.raises(FrameRejected, match="already"):
        server.open(frame)
    server.forget(nonce, counter)
    server.open(frame)
    with pytest.raises(FrameRejected, match="already"):
        server.open(frame)


def test_what_a_receiver_gets_is_what_was_packed() -> None:
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 20)
    sender, receiver = FrameCodec(KEY), FrameCodec(KEY)
    for k in range(1, 5):
        frame = sender.seal(encoder.wrap(DESTS, body_of(keystroke(k))))
        body, nonce, _ = receiver.open(frame)
        app, session, who, messages, errors = unpack_envelopes(decoder.unwrap(nonce, body),
                                                               "bob")
        assert (app, session, who, errors) == ("edit", "paper", "alice", [])
        assert [m.message_id for m in messages] == [f"alice#{k}"]
        assert messages[0].user_message == ("insert", f"bob#{k}", "e")


# -- over real processes -----------------------------------------------------------------------
def _counters(peer: Any) -> dict[str, int]:
    seen = len([e for e in peer.events if e.get("event") == "counters"])
    peer.command(op="counters")
    return peer.wait_count("counters", seen + 1)[-1]["counters"]


def test_a_peer_refuses_a_chunk_after_a_gap_and_takes_the_next_stream(group: Any) -> None:
    """Routed frames pushed straight to bob's socket: a chunk whose predecessor never
    came is counted as a stream gap and dropped; a stream's first chunk is decoded and
    delivered; bob keeps serving alice's own messages throughout."""
    import time

    import zmq

    from groupcomm.transport.keys import read_key_file
    from tests.transport.test_communicator import start_three

    start_three(group, direct=True)
    alice, bob = group.peers["alice"], group.peers["bob"]
    bob_address = next(e for e in bob.events if e.get("event") == "ready")["address"]
    forger = FrameCodec(read_key_file(group.key_file))
    encoder = StreamEncoder()
    first, second, third = (encoder.wrap(("bob",), body_of(SentMessage(
        application_name="default", session_name="s", user_message=f"routed {k}",
        message_id=f"alice#{100_000 + k}", sender="alice", destinations=("bob",),
        vc=(("alice", 100_000 + k),)))) for k in range(3))
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(bob_address)
    try:
        push.send(forger.seal(third))  # chunk 3 before 1 and 2: a gap
        deadline = time.monotonic() + 20
        while _counters(bob).get("rejected_stream_gap", 0) < 1:
            assert time.monotonic() < deadline
        alice.command(op="send", to=["bob"], payload="from alice")
        bob.wait_for(lambda e: e.get("payload") == "from alice")
        assert routed_head(first)[1] == 1
        push.send(forger.seal(first))
        bob.wait_for(lambda e: e.get("payload") == "routed 0")
        push.send(forger.seal(second))
        bob.wait_for(lambda e: e.get("payload") == "routed 1")
        assert _counters(bob)["rejected_stream_gap"] == 1
    finally:
        push.close(linger=0)


def test_the_server_returns_a_routed_frame_from_a_stranger_and_refuses_a_bad_head(
    group: Any,
) -> None:
    import zmq

    from groupcomm.transport.keys import read_key_file
    from groupcomm.wire.session import open_session
    from tests.transport.test_communicator import start_three

    start_three(group)
    alice, bob = group.peers["alice"], group.peers["bob"]
    stranger = FrameCodec(read_key_file(group.key_file))
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    assert group.server is not None
    dealer.connect(group.server.address)
    try:
        dealer.send(stranger.seal(ROUTED + msgpack.packb([]) + msgpack.packb(0) + b"P"))
        frame = stranger.seal(StreamEncoder().wrap(("bob",), body_of(keystroke(1))))
        dealer.send(frame)
        assert dealer.poll(10_000), "no answer from the server"
        notice, returned = dealer.recv_multipart()
        body, _, _ = stranger.open(notice)
        answer = open_session(body)
        assert (answer["op"], answer["reason"], answer["returned"]) == (
            "error", "not_a_member", ["bob"])
        assert returned == frame
        alice.command(op="send", to=["bob"], payload="still relayed")
        bob.wait_for(lambda e: e.get("payload") == "still relayed")
    finally:
        dealer.close(linger=0)


def test_a_returned_frame_goes_again_in_a_fresh_stream_past_a_chunk_the_server_lost() -> None:
    """A server that dies loses chunk 2 of alice's stream to bob; the restarted server
    returns chunk 3 (it did not know alice yet). Sent again as it was, chunk 3 would be
    refused for the gap; the link sends its batch again in the fresh stream."""
    from groupcomm.transport.link import MemberLink

    link = MemberLink(name="alice", server_address="tcp://127.0.0.1:1", routing="relayed",
                      codec=FrameCodec(KEY), curve=None, bind_host="127.0.0.1",
                      advertise_host="127.0.0.1", max_pending=10, max_inbox=10)
    sent: list[bytes] = []
    link._send_relayed = sent.append  # type: ignore[method-assign]  # noqa: SLF001
    link.relay_allowed(True)
    for k in (1, 2, 3):
        link.transmit(keystroke(k), DESTS)
        link.flush_outbox()
    bob = FrameCodec(KEY)
    decoder = StreamDecoder(max_body=1 << 20)

    def ids(frame: bytes) -> list[str]:
        body, nonce, _ = bob.open(frame)
        return [m.message_id for m in unpack_envelopes(decoder.unwrap(nonce, body), "bob")[3]]

    assert ids(sent[0]) == ["alice#1"]  # chunk 2 (sent[1]) is lost with the server
    with pytest.raises(FrameRejected, match="after chunk 1"):
        ids(sent[2])  # as it was, chunk 3 comes after a gap
    link.restart_streams()  # alice is back: her frames start afresh ...
    link.relay(sent[2], DESTS)  # ... and the returned chunk 3 goes again
    assert ids(sent[3]) == ["alice#3"]


def test_a_stream_restarted_for_its_destinations_heals_a_gap_and_leaves_the_others() -> None:
    """A chunk lost (inside a server that was killed): the receiver refuses every later
    chunk of that stream, retransmissions included, until the sender starts the stream
    to those destinations afresh (what a copy marked as resent does); the stream to
    other destinations goes on."""
    encoder, decoder = StreamEncoder(), StreamDecoder(max_body=1 << 20)
    other = ("carol",)
    for k in range(1, 4):
        decoder.unwrap(b"alice", encoder.wrap(DESTS, body_of(keystroke(k))))
        decoder.unwrap(b"alice", encoder.wrap(other, body_of(keystroke(k))))
    encoder.wrap(DESTS, body_of(keystroke(4)))  # lost
    for k in (5, 6):
        with pytest.raises(FrameRejected) as refused:
            decoder.unwrap(b"alice", encoder.wrap(DESTS, body_of(keystroke(k))))
        assert refused.value.reason == "stream_gap"
    encoder.restart_for(DESTS)
    again = encoder.wrap(DESTS, body_of(keystroke(4)))
    assert routed_head(again)[1] == 1
    _, _, _, messages, _ = unpack_envelopes(decoder.unwrap(b"alice", again), "bob")
    assert [m.message_id for m in messages] == ["alice#4"]
    assert routed_head(encoder.wrap(other, body_of(keystroke(4))))[1] == 4


def _members(count: int, shared: SharedStreams, scope: tuple = ("paper", "edit")
             ) -> list[StreamDecoder]:
    return [StreamDecoder(max_body=1 << 20, shared=shared, scope=scope) for _ in range(count)]


def test_members_on_one_thread_inflate_each_chunk_once() -> None:
    """Three members read the same stream: each gets every batch, one inflates it."""
    shared = SharedStreams()
    encoder, members = StreamEncoder(), _members(3, shared)
    for k in range(1, 41):
        body = body_of(keystroke(k))
        routed = encoder.wrap(DESTS, body)
        assert [m.unwrap(b"n" * 8, routed) for m in members] == [body] * 3
    assert (shared.inflated, shared.reused) == (40, 80)


def test_a_member_far_behind_the_others_inflates_its_own_copy() -> None:
    shared = SharedStreams()
    encoder, (ahead, behind) = StreamEncoder(), _members(2, shared)
    frames = [(body_of(keystroke(k)), None) for k in range(1, SHARED_KEPT + 20)]
    frames = [(body, encoder.wrap(DESTS, body)) for body, _ in frames]
    for body, routed in frames:
        assert ahead.unwrap(b"n" * 8, routed) == body
    # the batches of the first chunks are no longer kept: made again from the chunks
    assert [behind.unwrap(b"n" * 8, routed) for _, routed in frames] == \
        [body for body, _ in frames]


def test_shared_streams_still_tell_each_member_of_its_own_gap() -> None:
    shared = SharedStreams()
    encoder, (whole, lossy) = StreamEncoder(), _members(2, shared)
    routed = [encoder.wrap(DESTS, body_of(keystroke(k))) for k in range(1, 4)]
    for frame in routed:
        whole.unwrap(b"n" * 8, frame)
    lossy.unwrap(b"n" * 8, routed[0])
    with pytest.raises(FrameRejected) as lost:
        lossy.unwrap(b"n" * 8, routed[2])  # its chunk 2 never came
    assert lost.value.reason == "stream_gap"


def test_another_stream_under_the_same_names_is_not_taken_for_the_shared_one() -> None:
    """Two senders' streams with the same nonce and destinations (only a forger would):
    each member gets its own stream's batches."""
    shared = SharedStreams()
    first, second = StreamEncoder(), StreamEncoder()
    (one, other) = _members(2, shared)
    assert one.unwrap(b"n" * 8, first.wrap(DESTS, body_of(keystroke(1)))) == \
        body_of(keystroke(1))
    assert other.unwrap(b"n" * 8, second.wrap(DESTS, body_of(keystroke(1, text="x")))) == \
        body_of(keystroke(1, text="x"))
    both = body_of(keystroke(2)), body_of(keystroke(2, text="y"))
    assert one.unwrap(b"n" * 8, first.wrap(DESTS, both[0])) == both[0]
    assert other.unwrap(b"n" * 8, second.wrap(DESTS, both[1])) == both[1]


def test_a_shared_chunk_that_does_not_inflate_is_refused_to_every_member() -> None:
    shared = SharedStreams()
    encoder, members = StreamEncoder(), _members(2, shared)
    good = encoder.wrap(DESTS, body_of(keystroke(1)))
    for member in members:
        member.unwrap(b"n" * 8, good)
    head = encoder.wrap(DESTS, body_of(keystroke(2)))
    _, _, offset = routed_head(head)
    broken = head[:offset] + b"\xff" * 12
    for member in members:
        with pytest.raises(FrameRejected) as refused:
            member.unwrap(b"n" * 8, broken)
        assert refused.value.reason == "malformed"


def test_members_on_one_thread_unpack_a_batch_once_each_with_its_own_messages() -> None:
    from groupcomm.wire.shared_batches import SharedBatches

    shared = SharedBatches()
    body = body_of(keystroke(1), keystroke(2))
    for receiver in ("bob", "carol", "dave"):
        assert shared.unpack(body, receiver)[:3] == unpack_envelopes(body, receiver)[:3]
        got, alone = shared.unpack(body, receiver)[3:], unpack_envelopes(body, receiver)[3:]
        assert got[1] == alone[1]  # dave: not addressed to him, both times
        assert [(m.message_id, m.receiver, m.user_message, m.headers, m.vc)
                for m in got[0]] == [(m.message_id, m.receiver, m.user_message, m.headers,
                                      m.vc) for m in alone[0]]
    bob, carol = shared.unpack(body, "bob")[3], shared.unpack(body, "carol")[3]
    assert bob[0].headers is not carol[0].headers  # a dict each
    assert bob[0].user_message is carol[0].user_message  # a tuple: decoded once
    assert (shared.unpacked, shared.reused) == (1, 7)


def test_a_payload_that_can_change_is_decoded_for_each_member() -> None:
    from groupcomm.wire.shared_batches import SharedBatches

    message = SentMessage(application_name="edit", session_name="paper",
                          user_message={"list": [1, 2]}, message_id="alice#1",
                          sender="alice", destinations=DESTS, vc=(("alice", 1),))
    shared, body = SharedBatches(), body_of(message)
    bob, carol = shared.unpack(body, "bob")[3][0], shared.unpack(body, "carol")[3][0]
    assert bob.user_message == carol.user_message == {"list": [1, 2]}
    assert bob.user_message is not carol.user_message


def test_a_stream_to_one_member_is_not_shared() -> None:
    """Its one reader inflates it alone: nothing of it is kept in common."""
    shared = SharedStreams()
    encoder, (member,) = StreamEncoder(), _members(1, shared)
    for k in range(1, 4):
        body = body_of(keystroke(k))
        assert member.unwrap(b"n" * 8, encoder.wrap(("bob",), body)) == body
    assert (shared.inflated, shared.reused) == (0, 0)


def test_a_copy_resent_to_one_member_restarts_every_stream_to_it() -> None:
    """A frame to bob and carol lost for carol only: carol refuses every later chunk of
    that stream, so the copy the reliable layer resends to her alone restarts her own
    stream and the one to both (bob's loses nothing by it); the others go on."""
    encoder = StreamEncoder()
    carol = StreamDecoder(max_body=1 << 20)
    for k in range(1, 4):
        carol.unwrap(b"alice", encoder.wrap(DESTS, body_of(keystroke(k))))
        encoder.wrap(("bob",), body_of(keystroke(k)))
    encoder.wrap(DESTS, body_of(keystroke(4)))  # lost for carol
    encoder.restart_with(("carol",))
    again = encoder.wrap(("carol",), body_of(keystroke(4)))
    assert routed_head(again)[1] == 1
    after = encoder.wrap(DESTS, body_of(keystroke(5)))
    assert routed_head(after)[1] == 1  # a fresh stream carol can read
    _, _, _, messages, _ = unpack_envelopes(carol.unwrap(b"alice", after), "carol")
    assert [m.message_id for m in messages] == ["alice#5"]
    assert routed_head(encoder.wrap(("bob",), body_of(keystroke(4))))[1] == 4


def test_bad_entries_of_a_shared_batch_are_told_to_each_member_as_unshared() -> None:
    """A batch whose entries are malformed, of bad headers, of a payload that does not
    decode or not addressed to the receiver: each member is told the same errors, and
    gets the same good messages, whether the batch was unpacked for it or shared."""
    from groupcomm.wire.envelopes import PACKED
    from groupcomm.wire.shared_batches import SharedBatches

    good = msgpack.unpackb(body_of(keystroke(1))[1:], raw=False, use_list=False)[3][0]
    message_id, dests, kind, headers, vc, fmt, payload = good
    entries = [
        good,
        ("short",),
        ("alice#2", dests, kind, {"x": {"y": 1}}, vc, fmt, payload),  # no maps inside
        ("alice#3", dests, kind, headers, vc, fmt, b"\xc1"),  # not msgpack
        ("alice#4", ("carol",), kind, headers, vc, fmt, payload),
    ]
    body = PACKED + msgpack.packb(("edit", "paper", "alice", entries), use_bin_type=True)
    shared = SharedBatches()
    for _ in range(2):  # unpacked, then reused
        for receiver in ("bob", "carol"):
            alone = unpack_envelopes(body, receiver)
            got = shared.unpack(body, receiver)
            assert got[4] == alone[4]
            assert [m.message_id for m in got[3]] == [m.message_id for m in alone[3]]
    errors = unpack_envelopes(body, "bob")[4]
    assert errors[0] == "a packed message must be a 7-element array"
    assert errors[1].startswith("headers of 'alice#2' malformed")
    assert errors[2].startswith("payload of 'alice#3' does not decode")
    assert errors[3] == "'alice#4' is not addressed to 'bob'"
    assert (shared.unpacked, shared.reused) == (1, 3)
