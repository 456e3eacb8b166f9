"""Faults on real processes: a server restarted mid-run, a peer killed mid-run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def fixed_port_group(tmp_path: Path):
    port = free_port()
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"],
                      server_bind=f"tcp://127.0.0.1:{port}") as started:
        yield started


def rejoined(peer, before: int) -> None:
    peer.wait_for(lambda e: e.get("event") == "joined" and peer.events.index(e) >= before,
                  timeout=20, what="a join after the restart")


def test_server_restart_direct_traffic_flows_and_clients_rejoin(fixed_port_group) -> None:
    group = fixed_port_group
    alice = group.start_peer("alice", direct=True)
    bob = group.start_peer("bob", direct=True)
    group.wait_members(["alice", "bob"])
    group.stop_server()
    alice.command(op="send", to=["bob"], payload="while the server is down")
    bob.wait_for(lambda e: e.get("payload") == "while the server is down")
    marks = {p.name: len(p.events) for p in (alice, bob)}
    group.start_server()
    rejoined(alice, marks["alice"])
    rejoined(bob, marks["bob"])
    bob.command(op="send", to=["alice"], payload="after the restart")
    alice.wait_for(lambda e: e.get("payload") == "after the restart")
    seen = len([e for e in alice.events if e.get("event") == "counters"])
    alice.command(op="counters")
    counters = alice.wait_count("counters", seen + 1)[-1]["counters"]
    assert counters["rejoins"] >= 1


def test_relayed_messages_sent_during_an_outage_arrive_with_the_reliable_layer(
    fixed_port_group,
) -> None:
    group = fixed_port_group
    alice = group.start_peer("alice", filters=["reliable"])
    bob = group.start_peer("bob", filters=["reliable"])
    group.wait_members(["alice", "bob"])
    alice.command(op="send", to=["bob"], payload="before")
    bob.wait_for(lambda e: e.get("payload") == "before")
    group.stop_server()
    for i in range(5):
        alice.command(op="send", to=["bob"], payload=f"during {i}")
    group.start_server()
    delivered = bob.wait_count("deliver", 6, timeout=30)
    assert [e["payload"] for e in delivered] == ["before", *(f"during {i}" for i in range(5))]


def test_killed_peer_mid_run_survivors_go_on_and_see_what_is_held(group: ProcessGroup) -> None:
    alice = group.start_peer("alice", causality="none")
    bob = group.start_peer("bob", causality="none")
    carol = group.start_peer("carol", causality="none")
    group.wait_members(["alice", "bob", "carol"])
    carol.kill()
    alice.wait_for(lambda e: e.get("event") == "left" and e.get("client") == "carol",
                   timeout=15)
    alice.command(op="send", to=["bob"], payload="still here")
    bob.wait_for(lambda e: e.get("payload") == "still here")
    alice.command(op="held")
    assert alice.wait_for(lambda e: e.get("event") == "held")["ids"] == []


def test_a_server_that_falls_behind_does_not_declare_live_clients_gone() -> None:
    """Silence is judged against the last time the server had read all its input: a
    server whose queue holds seconds of frames must not expire the clients that sent
    them (under load that dropped whatever was relayed to them)."""
    import os
    import time

    import zmq

    from groupcomm.transport.server import SessionServer
    from groupcomm.wire.frames import FrameCodec
    from groupcomm.wire.session import seal_session

    key = os.urandom(32)
    context = zmq.Context()
    server = SessionServer(key, "tcp://127.0.0.1:0", heartbeat_timeout=1.0, context=context)
    try:
        client = FrameCodec(key)
        join = seal_session(client, "join", client="alice", application="a", session="s",
                            address="")
        server.handle([b"id-alice", join])
        member = server.registry.sessions[("a", "s")].members["alice"]
        member.last_seen = time.monotonic() - 5  # nothing from alice for 5 s...
        server._caught_up_at = member.last_seen + 0.5  # noqa: SLF001  ...but the server is behind
        server.tick()
        assert "alice" in server.registry.sessions[("a", "s")].members
        server._caught_up_at = time.monotonic()  # noqa: SLF001  caught up: now she is silent
        server.tick()
        session = server.registry.sessions.get(("a", "s"))
        assert session is None or "alice" not in session.members
    finally:
        server.socket.close(linger=0)
        context.term()
