"""A graceful leave must not overtake the leaver's direct frames.

With direct routing, a client's last frames travel peer to peer while its leave goes
through the server; the server's "left" notice can reach a busy receiver first. The
leave therefore says how many frames the leaver pushed to each peer, and a receiver
keeps the leaver a member until those frames are in (or DEPART_WAIT passes)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
import zmq

import groupcomm.protocol.membership as membership_module
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.server import SessionServer
from groupcomm.wire.frames import FrameCodec
from groupcomm.wire.session import open_session, seal_session


class Recorder:
    """Session listener and message listener writing one ordered log."""

    def __init__(self, delay: float = 0.0) -> None:
        self.log: list[tuple[str, Any]] = []
        self.delay = delay
        self.lock = threading.Lock()

    def on_message(self, message: Any) -> None:
        time.sleep(self.delay)  # a slow application: the I/O thread falls behind
        with self.lock:
            self.log.append(("message", message.user_message))

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self.lock:
            self.log.append(("joined", client_name))

    def client_left(self, client_name: str, application_name: str) -> None:
        with self.lock:
            self.log.append(("left", client_name))

    def wait(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if predicate(self.log):
                    return
                snapshot = list(self.log[-5:])
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {snapshot}"
            time.sleep(0.01)


def _wait_member(comm: Communicator, name: str) -> None:
    deadline = time.monotonic() + 10
    while name not in comm.members:
        assert time.monotonic() < deadline, f"{name} never joined"
        time.sleep(0.01)


def test_every_direct_frame_sent_before_a_leave_is_delivered_before_the_left_notice(
    group: ProcessGroup,
) -> None:
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file), routing="direct")
    recorder = Recorder(delay=0.002)
    with Communicator("reader", "s", **common) as reader:
        reader.add_message_listener(recorder.on_message)
        reader.add_session_message_listener(recorder)
        writer = Communicator("writer", "s", **common)
        try:
            _wait_member(writer, "reader")
            sent = 0
            for _chunk in range(30):  # flush per chunk: many frames, not one batch
                for _ in range(20):
                    writer.to_user("reader", sent)
                    sent += 1
                assert writer.flush(10)
        finally:
            writer.close()
        recorder.wait(lambda log: ("left", "writer") in log, 60, "writer's leave")
        messages = [value for kind, value in recorder.log if kind == "message"]
        assert messages == list(range(sent))
        # the leave was reported after the last of its messages
        assert recorder.log[-1] == ("left", "writer")
        counters = reader.counters()
        assert counters.get("rejected_unknown_peer", 0) == 0, counters
        assert counters.get("departed_frames_missing", 0) == 0, counters


def test_frames_that_never_come_end_the_wait_with_a_count(
    group: ProcessGroup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    assert group.server is not None
    monkeypatch.setattr(membership_module, "DEPART_WAIT", 0.5)
    common = dict(server=group.server.address, key_file=str(group.key_file), routing="direct")
    recorder = Recorder()
    with Communicator("reader", "s", **common) as reader:
        reader.add_session_message_listener(recorder)
        with Communicator("writer", "s", **common) as writer:
            _wait_member(writer, "reader")
            writer.to_user("reader", "only")
            assert writer.flush(10)
            recorder.wait(lambda log: ("joined", "writer") in log, 10, "writer's join")
            # the leave will claim three frames more than were ever sent
            writer._loop.call(lambda: writer._link.direct_sent.update({"reader": 3}))  # noqa: SLF001
        recorder.wait(lambda log: ("left", "writer") in log, 10, "writer's leave")
        assert reader.counters()["departed_frames_missing"] == 3
        assert "3 of the 4 frames it sent here directly never arrived" in caplog.text
        assert "writer" not in reader.members


def _notices(socket: zmq.Socket, codec: FrameCodec) -> list[dict[str, Any]]:
    notices = []
    while socket.poll(200):
        body, _, _ = codec.open(socket.recv())
        notices.append(open_session(body))
    return notices


def test_server_passes_each_member_its_own_count_and_rejects_a_malformed_one() -> None:
    key = os.urandom(32)
    context = zmq.Context()
    server = SessionServer(key, "tcp://127.0.0.1:0", context=context)
    bob = context.socket(zmq.DEALER)
    try:
        codec = FrameCodec(key)
        bob.setsockopt(zmq.IDENTITY, b"id-bob")
        bob.connect(server.address)
        bob.send(seal_session(codec, "join", client="bob", application="a", session="s",
                              address=""))
        assert server.socket.poll(5000)
        server.handle(server.socket.recv_multipart())
        for name in ("alice", "dave"):
            server.handle([f"id-{name}".encode(), seal_session(
                codec, "join", client=name, application="a", session="s", address="")])
        server.handle([b"id-alice", seal_session(
            codec, "leave", client="alice", application="a", session="s",
            direct_frames={"bob": 7, "dave": 2})])
        server.handle([b"id-dave", seal_session(
            codec, "leave", client="dave", application="a", session="s",
            direct_frames={"bob": -1})])
        left = [n for n in _notices(bob, codec) if n["op"] == "left"]
        assert [(n["client"], n["direct_frames"]) for n in left] == [("alice", 7), ("dave", 0)]
        assert server.rejects.counts["malformed"] == 1
        assert list(server.registry.sessions[("a", "s")].members) == ["bob"]
    finally:
        bob.close(linger=0)
        server.socket.close(linger=0)
        context.term()
