"""A name that comes back is a new member: real processes, every causal module.

The reproduction of the issue: ``kill -9`` carol, wait until the others see her leave,
start carol again under the same name. Her messages used to restart at ``carol#1`` and be
dropped as duplicates of her predecessor's, and she held every incoming message. Now the
server gives her a new incarnation (``carol~2``): a process of its own for every module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groupcomm.tools.procs import PeerProcess, ProcessGroup

CAUSAL = ["fifo", "vector", "matrix", "matrix-delta", "mfss", "cykas"]


@pytest.fixture
def quick_group(tmp_path: Path):
    # the server declares a silent client gone after 1.5 s (a killed one, here)
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"]) as group:
        yield group


def _payloads(peer: PeerProcess, sender: str | None = None) -> list:
    return [e["payload"] for e in peer.deliveries() if sender is None or e["sender"] == sender]


def _held(peer: PeerProcess) -> list[str]:
    seen = len([e for e in peer.events if e.get("event") == "held"])
    peer.command(op="held")
    return peer.wait_count("held", seen + 1)[-1]["ids"]


@pytest.mark.parametrize("module", CAUSAL)
def test_a_client_killed_and_restarted_under_its_name_is_a_new_member(
    quick_group: ProcessGroup, module: str
) -> None:
    group = quick_group
    alice = group.start_peer("alice", causality=module)
    bob = group.start_peer("bob", causality=module)
    carol = group.start_peer("carol", causality=module)
    group.wait_members(["alice", "bob", "carol"])
    for peer in (alice, bob, carol):
        peer.command(op="send", to="others", payload=f"{peer.name} 1")
    for peer in (alice, bob):
        peer.wait_for(lambda e: e.get("payload") == "carol 1", what="carol's first message")
    carol.kill()
    for peer in (alice, bob):
        peer.wait_for(lambda e: e.get("event") == "left" and e.get("client") == "carol",
                      timeout=20, what="carol's departure")
    # traffic goes on while she is away
    alice.command(op="send", to="others", payload="alice 2")
    bob.wait_for(lambda e: e.get("payload") == "alice 2")

    carol = group.start_peer("carol", causality=module)
    ready = carol.wait_for(lambda e: e.get("event") == "ready")
    assert ready["member"] == "carol~2"
    assert ready["members"] == ["alice", "bob", "carol~2"]
    for peer in (alice, bob):
        peer.wait_for(lambda e: e.get("event") == "joined" and e.get("client") == "carol~2",
                      what="carol~2's join")
    carol.command(op="send", to="others", payload="carol again")
    for peer in (alice, bob):
        peer.wait_for(lambda e: e.get("payload") == "carol again", what="carol~2's message")
        assert _payloads(peer, "carol~2") == ["carol again"]
    alice.command(op="send", to="others", payload="welcome back")
    bob.command(op="send", to="others", payload="hi carol")
    carol.wait_for(lambda e: e.get("payload") == "welcome back", what="alice's message")
    carol.wait_for(lambda e: e.get("payload") == "hi carol", what="bob's message")
    # the newcomer never waits for what was sent before it joined
    assert sorted(_payloads(carol)) == ["hi carol", "welcome back"]
    for peer in (alice, bob, carol):
        assert _held(peer) == [], peer.name
