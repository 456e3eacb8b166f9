"""The client's protocol object without sockets, threads or clocks: frames and times in,
typed actions out (an ActionLog), a real SessionRegistry as the server."""

from __future__ import annotations

from typing import Any

import pytest

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.tracing import NullTracer
from groupcomm.protocol.client import TICK_INTERVAL, ClientProtocol
from groupcomm.protocol.registry import Heartbeat, Join, Leave, Notify, SessionRegistry
from groupcomm.wire.envelopes import pack_envelopes
from groupcomm.wire.frames import ROUTED, FrameCodec
from groupcomm.wire.session import open_session, seal_session
from groupcomm.wire.streams import StreamEncoder
from tests.protocol.action_log import (
    ActionLog,
    DropPeer,
    JoinSettled,
    PeerAddresses,
    RelayAllowed,
    StatePending,
    StateSettled,
    ToServer,
    Transmit,
)

KEY = b"k" * 32


def routed(dests: Any, body: bytes) -> bytes:
    """The routed body carrying the packed batch ``body`` (uncompressed: the harness
    moves frames in any order)."""
    return StreamEncoder(compress=False).wrap(tuple(dests), body)


def send(client: ClientProtocol, payload: Any, to: str) -> None:
    """What an application thread does, then the owner's turn that takes it."""
    client.port.send(payload, [client.port.resolve(to)])
    client.take_inputs()


class Harness:
    """A registry and some protocol objects; the test moves every frame by hand."""

    def __init__(self, causality: str = "vector") -> None:
        self.server = FrameCodec(KEY)
        self.registry = SessionRegistry(server_id="test", now=0.0)
        self.logs: dict[str, ActionLog] = {}
        self.clients: dict[str, ClientProtocol] = {}
        #: what each member's port handed to its application (pull model: the inbox)
        self.handed: list[tuple[str, Any]] = []
        self.causality = causality

    def client(self, name: str, **options: Any) -> ClientProtocol:
        from groupcomm.core.registry import get_module

        module = get_module(self.causality)
        log = self.logs[name] = ActionLog()
        client = self.clients[name] = ClientProtocol(
            name, "s", application="app", codec=FrameCodec(KEY), out=log,
            filter_stacks=([module.send_creator()], [module.receive_creator()]),
            tracer_for=lambda member: NullTracer(), clock=lambda: 0.0, now=0.0,
            heartbeat_interval=1.0, **options)
        return client

    def to_server(self, name: str, action: ToServer, now: float) -> None:
        """Carry a command to the registry and its notices back to the clients."""
        body, _, _ = self.server.open(action.command)
        command = open_session(body)
        op = command.pop("op")
        base = dict(conn=name, client=command["client"], application=command["application"],
                    session=command["session"], now=now)
        if op == "join":
            event: Any = Join(**base, address=command.get("address", ""),
                              incarnation=command.get("incarnation", 0),
                              wants_state=command.get("wants_state", False))
        elif op == "leave":
            event = Leave(**base)
        else:
            event = Heartbeat(**base)
        for notice in self.registry.handle(event):
            assert isinstance(notice, Notify)
            frame = seal_session(self.server, notice.op, **notice.fields)
            self.clients[notice.conn].on_session_frame(frame, None, now)

    def run(self, now: float = 0.0) -> list[Any]:
        """Carry every action until none is left; returns what was handed over or
        settled, as (client, action)."""
        seen = []
        busy = True
        while busy:
            busy = False
            for name, log in self.logs.items():
                for action in log.take():
                    busy = True
                    if isinstance(action, ToServer):
                        self.to_server(name, action, now)
                    elif isinstance(action, Transmit):
                        codec = self.clients[name].codec
                        for body in pack_envelopes([action.message], 1 << 20,
                                                   lambda m, e: m, 1 << 20):
                            frame = codec.seal(routed(action.dests, body))
                            for dest in action.dests:
                                self.clients[dest].on_message_frame(frame, None, False, now)
                    elif not isinstance(action, RelayAllowed | PeerAddresses):
                        seen.append((name, action))  # the status a host would keep
            for name, client in self.clients.items():
                inbox = client.port.inbox
                while inbox:
                    busy = True
                    seen.append((name, inbox.popleft()))
        return seen


def test_a_join_then_a_message_frames_in_actions_out() -> None:
    net = Harness()
    alice = net.client("alice")
    alice.start("")
    assert net.run() == [("alice", JoinSettled(None))]
    bob = net.client("bob")
    bob.start("")
    assert net.run() == [("bob", JoinSettled(None))]
    assert alice.node.members == ["alice", "bob"] and alice.members_at_join == ("alice",)
    send(bob, "hello", "alice")
    [(who, handed)] = net.run()
    assert who == "alice" and isinstance(handed, ReceivedMessage)
    assert handed.user_message == "hello" and handed.sender == "bob"
    assert alice.counters()["delivered"] == 1
    # the application clock moves when the application has the message, not before
    assert alice.node.application_clock.get("bob", 0) == 0
    alice.port.applied(handed)
    assert alice.node.application_clock["bob"] == 1


def test_bad_frames_are_counted_and_nothing_is_handed_over() -> None:
    net = Harness()
    alice = net.client("alice")
    alice.start("")
    net.run()
    other = FrameCodec(b"x" * 32)
    sent = SentMessage(application_name=alice.application, session_name=alice.session,
                       user_message="hi", message_id="bob#1", sender="bob",
                       destinations=("alice",))
    batch = next(pack_envelopes([sent], 1 << 20))
    for frame in (other.seal(ROUTED + b"junk"), net.server.seal(ROUTED + b"junk"), b"",
                  # a well-formed batch, but not inside a routed frame
                  net.server.seal(batch),
                  # a session frame where a message frame belongs
                  seal_session(net.server, "pong", server_id="test")):
        alice.on_message_frame(frame, None, False, 1.0)
    assert net.run() == []
    counters = alice.counters()
    assert counters["rejected_bad_signature"] == 1
    assert counters["rejected_malformed"] == 2
    assert counters["rejected_unknown_kind"] == 1
    assert sum(v for k, v in counters.items() if k.startswith("rejected_")) == 5
    assert "frames_received" not in counters
    # the same batch, routed, is taken (bob is not a member yet: it waits for his join)
    alice.on_message_frame(net.server.seal(routed(["alice"], batch)), None, False, 2.0)
    counters = alice.counters()
    assert counters["frames_received"] == 1
    assert sum(v for k, v in counters.items() if k.startswith("rejected_")) == 5


def test_timers_come_with_the_inputs() -> None:
    net = Harness()
    alice = net.client("alice")
    alice.start("")
    net.run()
    assert alice.deadline == 1.0  # the heartbeat (vector has no filter timers)
    alice.timer(0.5)
    assert net.logs["alice"].actions == []  # nothing due yet
    alice.timer(1.0)
    [heartbeat] = net.logs["alice"].take()
    assert isinstance(heartbeat, ToServer)
    assert open_session(net.server.open(heartbeat.command)[0])["op"] == "heartbeat"
    assert alice.deadline == 2.0
    assert TICK_INTERVAL < 1.0


def test_a_newcomer_asking_for_state_gets_a_snapshot_after_the_markers() -> None:
    net = Harness()
    alice = net.client("alice", state_provider=lambda: ["what alice had"])
    alice.start("")
    net.run()
    installed: list[Any] = []
    carol = net.client("carol", state_consumer=installed.append)
    carol.start("")
    seen = net.run()
    assert ("carol", StatePending()) in seen and ("carol", StateSettled()) in seen
    assert installed == [["what alice had"]]
    assert alice.counters()["join_markers"] == 1
    assert carol.counters()["state_installed"] == 1


def test_a_member_that_leaves_is_dropped_from_the_link() -> None:
    net = Harness()
    alice, bob = net.client("alice"), net.client("bob")
    alice.start("")
    bob.start("")
    net.run()
    bob.leave({})
    seen = net.run()
    assert ("alice", DropPeer("bob")) in seen
    assert alice.node.members == ["alice"]


class TransmitLog(ActionLog):
    """An ActionLog that also keeps the payloads in the order they left."""

    def __init__(self) -> None:
        super().__init__()
        self.transmitted: list[Any] = []

    def transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        self.transmitted.append(message.user_message)
        super().transmit(message, dests)


def test_join_markers_go_after_the_sends_tagged_before_them() -> None:
    net = Harness()
    alice = net.client("alice", state_provider=lambda: "state")
    alice.start("")
    net.run()
    log = TransmitLog()
    bob = ClientProtocol(
        "bob", "s", application="app", codec=FrameCodec(KEY), out=log,
        filter_stacks=alice._filter_stacks, tracer_for=lambda member: NullTracer(),
        clock=lambda: 0.0, now=0.0, state_provider=lambda: "bob's")
    net.logs["bob"], net.clients["bob"] = log, bob
    bob.start("")
    net.run()
    # tagged on an application thread: in the member's input queue, not taken yet
    before = bob.port.send("tagged before the join", ["alice"])
    assert list(bob.inputs) == before
    carol = net.client("carol", state_consumer=lambda state: None)
    carol.start("")
    net.run()  # carol's join reaches bob: its marker is tagged into the queue, behind
    order = [p for p in log.transmitted  # vector's own control messages left out
             if isinstance(p, str) or type(p).__name__ == "JoinMarker"]
    assert order[0] == "tagged before the join"
    assert type(order[1]).__name__ == "JoinMarker" and not bob.inputs


def test_an_acknowledged_delivery_waits_for_the_acknowledgement() -> None:
    net = Harness()
    alice = net.client("alice")
    alice.start("")
    bob = net.client("bob", acknowledged_delivery=True)
    got: list[Any] = []
    bob.port.add_listener(got.append)
    bob.start("")
    net.run()
    send(alice, "m1", "bob")
    send(alice, "m2", "bob")
    net.run()
    assert [m.user_message for m in got] == ["m1", "m2"] and bob.port.handed == 2
    assert bob.node.application_clock.get("alice", 0) == 0
    bob.port.acknowledge(1, "bob")
    assert bob.node.application_clock["alice"] == 1
    with pytest.raises(ValueError, match="only 2 were handed"):
        bob.port.acknowledge(3, "bob")


def test_members_started_at_different_moments_tick_at_the_same_instants() -> None:
    """Filters with timers (here the reliable layer's) are ticked on a grid of
    TICK_INTERVAL every member shares: a loop hosting hundreds of members wakes once
    to tick them all, not once for each member's own phase."""
    from groupcomm.core.registry import get_module
    from groupcomm.core.selection import filter_creators

    module = get_module("vector")
    send, receive = filter_creators(["reliable"])
    next_ticks = []
    for i, start in enumerate((0.0013, 0.0071, 0.0189)):
        client = ClientProtocol(
            f"m{i}", "s", application="app", codec=FrameCodec(KEY), out=ActionLog(),
            filter_stacks=([module.send_creator(), *send], [*receive, module.receive_creator()]),
            tracer_for=lambda member: NullTracer(), clock=lambda: 0.0, now=start,
            heartbeat_interval=1.0)
        assert client.node.tickers
        first = start + TICK_INTERVAL
        client.timer(first)  # its first tick, in its own phase
        next_ticks.append(client._next_tick)
        assert first < client._next_tick <= first + TICK_INTERVAL
    assert next_ticks == [pytest.approx(2 * TICK_INTERVAL)] * 3
