"""The server numbers the memberships of a name, keeps frames for members that have not
joined a restarted server yet, and returns relays from clients it does not know."""

from __future__ import annotations

import os

import zmq

from groupcomm.transport.server import SessionServer
from groupcomm.wire.frames import FrameCodec
from groupcomm.wire.session import open_session, seal_session

KEY = os.urandom(32)


def command(codec: FrameCodec, op: str, client: str, **fields: object) -> bytes:
    return seal_session(codec, op, client=client, application="a", session="s", **fields)


def join(server: SessionServer, codec: FrameCodec, client: str, identity: bytes,
         incarnation: int = 0) -> int:
    server.handle([identity, command(codec, "join", client, address="",
                                     incarnation=incarnation)])
    return server.sessions[("a", "s")].members[client].incarnation


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
        server.handle([b"a", command(codec, "relay", "alice", dests=["carol~2"]), b"frame"])
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
        assert [b"M", b"frame"] in received
        assert server.relayed == 1
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
        alice.send_multipart([command(codec, "relay", "alice", dests=["bob"]), b"frame"])
        assert server.socket.poll(5000)
        server.handle(server.socket.recv_multipart())
        assert alice.poll(5000)
        notice, frame = alice.recv_multipart()
        body, _, _ = codec.open(notice)
        error = open_session(body)
        assert (error["reason"], error["returned"], frame) == ("not_a_member", ["bob"],
                                                                b"frame")
    finally:
        alice.close(linger=0)
        server.socket.close(linger=0)
        context.term()
