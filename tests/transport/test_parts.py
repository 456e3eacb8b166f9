"""Bytes larger than a frame, in parts (groupcomm.wire.parts): split and put back
together, refused past the limit before anything is buffered, and checked."""

from __future__ import annotations

import os

import pytest

from groupcomm.core.session_messages import StatePart, StateReply
from groupcomm.protocol.state_parts import StateParts
from groupcomm.wire.frames import FrameCodec, FrameRejected
from groupcomm.wire.parts import Assembly, PartsError, Reassembler, digest, split
from groupcomm.wire.session import open_session, seal_session_parts, whole_session

KEY = b"k" * 32


def _fields(data: bytes, size: int = 7) -> list[dict]:
    chunks = split(data, size)
    return [{"part": i, "parts": len(chunks), "size": len(data), "digest": digest(data),
             "chunk": c} for i, c in enumerate(chunks)]


def test_parts_make_their_whole_and_nothing_before_the_last():
    data = os.urandom(100)
    parts = Reassembler(limit=1000)
    got = [parts.part("a", f) for f in _fields(data)]
    assert got[:-1] == [None] * (len(got) - 1) and got[-1] == data
    assert parts.pending == 0
    assert split(b"", 5) == [b""]
    assert Reassembler().part("a", _fields(b"")[0]) == b""


@pytest.mark.parametrize("spoil", ["order", "digest", "more", "first"])
def test_parts_that_do_not_make_their_whole_are_refused_and_forgotten(spoil):
    data = os.urandom(50)
    fields = _fields(data)
    if spoil == "order":
        fields[1], fields[2] = fields[2], fields[1]
    elif spoil == "digest":
        fields[3] = {**fields[3], "chunk": b"x" * len(fields[3]["chunk"])}
        fields[-1] = {**fields[-1]}
    elif spoil == "more":
        fields[-1] = {**fields[-1], "chunk": fields[-1]["chunk"] + b"!"}
    else:
        fields = fields[1:]
    parts = Reassembler(limit=1000)
    with pytest.raises(PartsError):
        for f in fields:
            parts.part("a", f)
    assert parts.pending == 0


def test_a_whole_past_the_limit_is_refused_before_any_part_is_kept():
    with pytest.raises(PartsError, match="more than the limit") as refused:
        Assembly(3, 300 * 1024 * 1024, digest(b""), 256 * 1024 * 1024)
    assert refused.value.too_large and "max_state" in str(refused.value)
    parts = Reassembler(limit=40)
    with pytest.raises(PartsError):
        parts.part("a", _fields(os.urandom(50))[0])
    assert parts.pending == 0


def test_senders_build_apart_and_altogether_stay_under_the_limit():
    a, b = os.urandom(30), os.urandom(30)
    parts = Reassembler(limit=50)
    fa, fb = _fields(a), _fields(b)
    parts.part("a", fa[0])
    parts.part("b", fb[0])  # 60 bytes announced: a's, the oldest, is dropped
    with pytest.raises(PartsError, match="without its first part"):
        parts.part("a", fa[1])
    assert [parts.part("b", f) for f in fb[1:]][-1] == b


def test_a_notice_larger_than_a_frame_travels_in_parts_and_is_put_back_together():
    sender, receiver = FrameCodec(KEY, max_frame=64 * 1024), FrameCodec(KEY, max_frame=64 * 1024)
    data = os.urandom(200 * 1024)
    frames = seal_session_parts(sender, "stored_state", generation="g", available=True,
                                fmt=1, data=data)
    assert len(frames) > 3 and all(len(f) <= 64 * 1024 for f in frames)
    parts = Reassembler()
    opened = [whole_session(parts, "server", open_session(receiver.open(f)[0]))
              for f in frames]
    assert opened[:-1] == [None] * (len(frames) - 1)
    assert opened[-1]["op"] == "stored_state" and opened[-1]["data"] == data
    [small] = seal_session_parts(sender, "pong", server_id="s")
    assert whole_session(parts, "server", open_session(receiver.open(small)[0]))["op"] == "pong"
    # a limit below the whole: refused at its first part, as too large
    frames = seal_session_parts(sender, "stored_state", generation="g", available=True,
                                fmt=1, data=data)
    with pytest.raises(FrameRejected) as refused:
        whole_session(Reassembler(limit=100 * 1024), "server",
                      open_session(receiver.open(frames[0])[0]))
    assert refused.value.reason == "too_large"


def test_a_member_state_larger_than_a_part_goes_as_an_announcement_and_parts():
    parts = StateParts(part_size=1000, max_state=10_000)
    state = {"text": "x" * 5000}
    reply = StateReply(available=True, state=state, reflected=("a#1",), clock=(("a", 1),))
    sent = parts.outgoing(reply)
    header, rest = sent[0], sent[1:]
    assert isinstance(header, StateReply) and header.state is None and header.parts == len(rest)
    assert all(isinstance(p, StatePart) for p in rest) and len(rest) >= 5
    receiver = StateParts(max_state=10_000)
    receiver.announced("a", header)
    got = [receiver.part("a", p) for p in rest]
    assert got[-1] == StateReply(available=True, state=state, reflected=("a#1",),
                                 clock=(("a", 1),))
    assert parts.outgoing(StateReply(available=True, state="small")) == [
        StateReply(available=True, state="small")]
    small = StateParts(max_state=100)
    with pytest.raises(PartsError):
        small.announced("a", header)
    assert not small.expects("a")


def test_the_other_parts_of_a_refused_whole_are_dropped_quietly():
    data = os.urandom(50)
    parts = Reassembler(limit=40)
    fields = _fields(data)
    with pytest.raises(PartsError):
        parts.part("a", fields[0])
    assert [parts.part("a", f) for f in fields[1:]] == [None] * (len(fields) - 1)
    assert parts.part("a", _fields(b"ok")[0]) == b"ok"  # a new whole starts afresh
