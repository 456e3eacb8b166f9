"""The server numbers the memberships of a name, keeps frames for members that have not
joined a restarted server yet, returns relays from clients it does not know, and takes
nothing but routed frames and session commands, each alone."""

from __future__ import annotations

import os

import msgpack
import zmq

from groupcomm.transport.server import SessionServer
from groupcomm.wire.frames import FORWARDED, FrameCodec
from groupcomm.wire.session import open_session, seal_session
from groupcomm.wire.streams import StreamEncoder

KEY = os.urandom(32)


def command(codec: FrameCodec, op: str, client: str, **fields: object) -> bytes:
    return seal_session(codec, op, client=client, application="a", session="s", **fields)


def routed(codec: FrameCodec, dests: list[str], batch: bytes = b"P-batch") -> bytes:
    """A routed frame (the server reads its head only, never the batch)."""
    return codec.seal(StreamEncoder(compress=False).wrap(dests, batch))


def join(server: SessionServer, codec: FrameCodec, client: str, identity: bytes,
         incarnation: int = 0) -> int:
    server.handle([identity, command(codec, "join", client, address="",
                                     incarnation=incarnation)])
    return server.registry.sessions[("a", "s")].members[client].incarnation


def test_a_name_that_comes_back_is_the_next_incarnation() -> None:
    server = SessionServer(KEY, "tcp://127.0.0.1:0", context=zmq.Context())
    codec = FrameCodec(KEY)
    try:
        assert join(server, codec, "alice", b"a1") == 1
        assert join(server, codec, "carol", b"c1") == 1
        server.handle([b"c1", command(codec, "leave", "carol")])
        assert join(server, codec, "carol", b"c2") == 2
        # declared gone while stalled, the client asks to keep incarnation 2: it is not
        # the same membership any more, so it becomes the next one
        server.handle([b"c2", command(codec, "leave", "carol")])
        assert join(server, codec, "carol", b"c3", incarnation=2) == 3
    finally:
        server.socket.close(linger=0)


def test_a_restarted_server_lets_members_keep_their_incarnation_and_keeps_their_frames(
) -> None:
    context = zmq.Context()
    server = SessionServer(KEY, "tcp://127.0.0.1:0", context=context)
    codec = FrameCodec(KEY)
    bob = context.socket(zmq.DEALER)
    try:
        # alice (incarnation 4 before the restart) rejoins first and relays to carol~2,
        # who has not rejoined yet: the frame waits for her
        assert join(server, codec, "alice", b"a", incarnation=4) == 4
        frame = routed(codec, ["carol~2"])
        server.handle([b"a", frame])
        assert server.rejects.counts.get("unknown_peer", 0) == 0
        bob.setsockopt(zmq.IDENTITY, b"c")
        bob.connect(server.address)
        bob.send(command(codec, "heartbeat", "carol"))  # connects the identity
        assert server.socket.poll(5000)
        server.handle(server.socket.recv_multipart())
        assert join(server, codec, "carol", b"c", incarnation=2) == 2
        received = []
        while bob.poll(500):
            received.append(bob.recv_multipart())
        assert [FORWARDED, frame] in received
        assert server.registry.relayed == 1
    finally:
        bob.close(linger=0)
        server.socket.close(linger=0)
        context.term()


def test_a_relay_from_an_unknown_client_is_returned_to_it() -> None:
    context = zmq.Context()
    server = SessionServer(KEY, "tcp://127.0.0.1:0", context=context)
    codec = FrameCodec(KEY)
    alice = context.socket(zmq.DEALER)
    try:
        alice.setsockopt(zmq.IDENTITY, b"a")
        alice.connect(server.address)
        sent = routed(codec, ["bob"])
        alice.send(sent)
        assert server.socket.poll(5000)
        server.handle(server.socket.recv_multipart())
        assert alice.poll(5000)
        notice, frame = alice.recv_multipart()
        body, _, _ = codec.open(notice)
        error = open_session(body)
        assert (error["reason"], error["returned"], frame) == ("not_a_member", ["bob"], sent)
    finally:
        alice.close(linger=0)
        server.socket.close(linger=0)
        context.term()


def test_the_server_refuses_other_kinds_versions_and_frames_that_do_not_travel_alone(
) -> None:
    server = SessionServer(KEY, "tcp://127.0.0.1:0", context=zmq.Context())
    codec = FrameCodec(KEY)
    try:
        join(server, codec, "alice", b"a")
        join(server, codec, "bob", b"b")
        batch = b"P" + b"\x94"  # a packed batch, not inside a routed frame
        server.handle([b"a", codec.seal(batch)])
        server.handle([b"a", codec.seal(b"M" + b"envelope")])
        # a session command with a frame after it
        server.handle([b"a", command(codec, "heartbeat", "alice"), routed(codec, ["bob"])])
        server.handle([b"a", routed(codec, ["bob"]), b"more"])
        # a session map that spells out what travels as codes is refused, and so is an
        # op that is no client's command
        spelled = b"S" + msgpack.packb({"op": "heartbeat", "client": "alice",
                                         "application": "a", "session": "s"})
        server.handle([b"a", codec.seal(spelled)])
        server.handle([b"a", seal_session(codec, "pong", client="alice", application="a",
                                          session="s", server_id="x")])
        counts = server.rejects.counts
        assert (counts["unknown_kind"], counts["malformed"]) == (2, 4)
        assert server.registry.relayed == 0
        server.handle([b"a", routed(codec, ["bob"])])
        assert server.registry.relayed == 1  # and what is well formed still goes
    finally:
        server.socket.close(linger=0)
