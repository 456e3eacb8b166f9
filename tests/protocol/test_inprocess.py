"""The in-process host of whole clients: real ClientProtocols and the session server's
side exchanging signed frames, the test carrying them (groupcomm.protocol.inprocess)."""

from __future__ import annotations

from collections import deque
from typing import Any

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.registry import get_module
from groupcomm.core.session_messages import StateRequest
from groupcomm.protocol.inprocess import (
    InProcessMember,
    InProcessServer,
    seeded_codec,
)
from groupcomm.wire.frames import FrameCodec


class Net:
    """A server, members by name, and the frames between them (carried on run())."""

    def __init__(self, module: str = "matrix") -> None:
        self.module = get_module(module)
        self.server = InProcessServer(now=0.0, codec=seeded_codec("server"))
        self.members: dict[str, InProcessMember] = {}
        self.up: deque[tuple[str, bytes]] = deque()
        self.now = 0.0
        self.handed: dict[str, list[Any]] = {}

    def member(self, name: str, **options: Any) -> InProcessMember:
        member = InProcessMember(
            name, self, now=self.now, codec=seeded_codec(f"{name}.{len(self.members)}"),
            filter_stacks=([self.module.send_creator()], [self.module.receive_creator()]),
            **options)
        self.members[name] = member
        self.handed[name] = []
        member.listeners.append(lambda m, name=name: self.handed[name].append(m.user_message))
        return member

    # the carrier
    def command(self, member: InProcessMember, frame: bytes) -> None:
        self.up.append((member.name, frame))

    def relay(self, member: InProcessMember, frame: bytes, dests: tuple[str, ...],
              message: SentMessage | None) -> None:
        self.up.append((member.name, frame))

    def push(self, member: InProcessMember, dest: str, frame: bytes,
             message: SentMessage) -> None:
        raise AssertionError("relayed members only")

    def step(self) -> None:
        """Carry the oldest frame to the server, and its answers to the members."""
        conn, frame = self.up.popleft()
        for to, delivery in self.server.receive(conn, frame, self.now):
            self.members[to].take(delivery, self.now)

    def run(self) -> None:
        """Carry everything."""
        while self.up:
            self.step()

    def restart_server(self) -> None:
        self.server = InProcessServer(now=self.now, codec=seeded_codec("server again"))

    def tick(self) -> None:
        self.now += 1.0
        for member in self.members.values():
            member.timer(self.now)
        self.run()


def test_members_join_and_leave_through_the_registry() -> None:
    net = Net()
    for name in ("a", "b"):
        net.member(name).start()
        net.run()
    assert net.server.members() == ["a", "b"]
    assert [m.node.members for m in net.members.values()] == [["a", "b"], ["a", "b"]]
    net.members["b"].leave()
    net.run()
    assert net.members["b"].left and net.members["a"].node.members == ["a"]
    # a name that comes back is the registry's next incarnation of it
    again = net.member("b")
    again.start()
    net.run()
    assert again.member == "b~2" and net.members["a"].node.members == ["a", "b~2"]


def test_relayed_frames_wait_for_the_server_to_know_the_member_and_go_in_order() -> None:
    net = Net()
    a, b = net.member("a"), net.member("b")
    a.start()
    b.start()
    net.run()
    net.restart_server()
    a.send("one", ["b"])  # the new server returns it: a joins again, then sends it again
    net.step()
    assert a.protocol.membership.phase == "rejoining"
    a.send("two", ["b"])  # waits: the server does not know a yet
    assert len(a.waiting) == 1
    net.tick()  # b's heartbeat: b joins again too
    net.run()
    assert a.waiting == [] and net.handed["b"] == ["one", "two"]


def test_the_server_refuses_a_forged_frame_and_takes_a_returned_one_again() -> None:
    net = Net()
    a = net.member("a")
    a.start()
    net.run()
    forged = FrameCodec(b"another key, not the session's!!").seal(b"Sjunk")
    assert net.server.receive("a", forged, 0.0) == []
    assert net.server.rejects["bad_signature"] == 1
    net.member("b").start()
    net.run()
    net.restart_server()
    a.send("returned, then sent again", ["b"])
    net.run()
    net.tick()
    assert net.handed["b"] == ["returned, then sent again"]


def test_a_newcomer_whose_answer_was_lost_in_a_server_restart_asks_again() -> None:
    net = Net()
    a = net.member("a", state_provider=lambda: ["what a had"])
    a.start()
    net.run()
    installed: list[Any] = []
    b = net.member("b", state_consumer=installed.append)
    b.start()
    while net.up:  # everything but a's snapshot, which is lost inside the server
        conn, frame = net.up.popleft()
        for to, delivery in net.server.receive(conn, frame, net.now):
            if to == "b" and delivery[0] == "message" and a.protocol.counters().get(
                    "state_given") and not installed and not b.state_done:
                continue
            net.members[to].take(delivery, net.now)
    assert not b.state_done and installed == []
    net.restart_server()
    net.tick()  # heartbeats find the new server; both join again; b asks a again
    net.run()
    assert installed == [["what a had"]] and b.state_done
    assert b.protocol.counters()["state_requests"] == 2


def test_a_member_waiting_for_its_state_keeps_a_newcomers_request_until_it_has_it() -> None:
    """Asked while it still waits, it would hand over the empty state it started with:
    it answers once its own transfer is over."""
    net = Net()
    b = net.member("b", state_provider=lambda: ["b's"], state_consumer=lambda s: None)
    c = net.member("c", state_consumer=lambda s: None)
    b.start()
    net.run()
    c.start()
    net.run()
    transfer = b.protocol.transfer
    assert not transfer.waiting
    given = b.protocol.counters()["state_given"]  # c's own transfer, at its join
    transfer.joined(["x", "b"], net.now)  # as if b had just joined, x to ask
    assert transfer.waiting
    request = ReceivedMessage(application_name=b.node.application,
                              session_name=b.node.session, user_message=StateRequest(),
                              message_id="c~state9", sender="c")
    assert transfer.on_system(request)
    assert transfer.deferred == ["c"]
    assert b.protocol.counters()["state_given"] == given
    transfer.member_left("x", net.now)  # nobody else to ask: its transfer is over
    assert not transfer.waiting
    assert transfer.deferred == [] and b.protocol.counters()["state_given"] == given + 1
