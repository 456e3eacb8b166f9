"""A name that comes back is a new member: real processes, every causal module.

The reproduction of the issue: ``kill -9`` carol, wait until the others see her leave,
start carol again under the same name. Her messages used to restart at ``carol#1`` and be
dropped as duplicates of her predecessor's, and she held every incoming message. Now the
server gives her a new incarnation (``carol~2``): a process of its own for every module.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from groupcomm.tools.procs import PeerProcess, ProcessGroup

CAUSAL = ["fifo", "vector", "matrix", "matrix-delta", "ks", "mfss", "cykas"]


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


# matrix in the default suite, every other causal module with the long tests
@pytest.mark.parametrize("module", [m if m == "matrix" else pytest.param(m, marks=pytest.mark.long)
                                    for m in CAUSAL])
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


def _counters(peer: PeerProcess) -> dict:
    seen = len([e for e in peer.events if e.get("event") == "counters"])
    peer.command(op="counters")
    return peer.wait_count("counters", seen + 1)[-1]["counters"]


@pytest.mark.parametrize("module", ["matrix", "cykas"])
def test_a_member_frozen_past_the_heartbeat_timeout_comes_back_as_a_new_incarnation(
    quick_group: ProcessGroup, module: str
) -> None:
    """A false suspicion: carol is stopped (SIGSTOP) until the server declares her gone,
    then resumed. What she sends as her old self is refused by the others as a stale
    incarnation or reported back to her as undeliverable; then she goes on as carol~2."""
    group = quick_group
    alice = group.start_peer("alice", causality=module, direct=True)
    carol = group.start_peer("carol", causality=module, direct=True)
    group.wait_members(["alice", "carol"])
    carol.command(op="send", to="others", payload="before")
    alice.wait_for(lambda e: e.get("payload") == "before")
    carol.process.send_signal(signal.SIGSTOP)
    try:
        alice.wait_for(lambda e: e.get("event") == "left" and e.get("client") == "carol",
                       timeout=20, what="carol declared gone")
        # read once resumed
        carol.command(op="send", to=["alice"], payload="while out", label="out")
    finally:
        carol.process.send_signal(signal.SIGCONT)
    for peer in (alice, carol):
        peer.wait_for(lambda e: e.get("event") == "joined" and e.get("client") == "carol~2",
                      timeout=20, what="carol back as carol~2")
    sent = carol.wait_for(lambda e: e.get("event") == "sent" and e.get("label") == "out")
    # on a loaded machine carol's I/O thread can see the verdict and rejoin before her
    # command thread reads the send: then "while out" is carol~2's own first message
    as_new = sent["id"].startswith("carol~2#")
    carol.command(op="send", to=["alice"], payload="back")
    alice.wait_for(lambda e: e.get("payload") == "back", what="carol~2's message")
    assert _payloads(alice, "carol~2") == (["while out", "back"] if as_new else ["back"])
    seen = len([e for e in carol.events if e.get("event") == "undeliverable"])
    carol.command(op="undeliverable")
    undeliverable = carol.wait_count("undeliverable", seen + 1)[-1]["ids"]
    refused = _counters(alice).get("rejected_stale_incarnation", 0)
    if not as_new:
        # sent as the old incarnation: refused at alice as stale, or never left
        assert "while out" not in _payloads(alice)
        assert refused >= 1 or sent["id"] in undeliverable, (refused, undeliverable, sent)
    assert _held(alice) == [] and _held(carol) == []


def test_relayed_messages_sent_while_the_server_restarts_are_returned_and_sent_again(
    tmp_path: Path,
) -> None:
    """Without the reliable layer: frames relayed to a restarted server before the
    client's rejoin are given back by the server and sent again after it."""
    port = _free_port()
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"],
                      server_bind=f"tcp://127.0.0.1:{port}") as group:
        alice = group.start_peer("alice", causality="matrix")
        bob = group.start_peer("bob", causality="matrix")
        group.wait_members(["alice", "bob"])
        alice.command(op="send", to=["bob"], payload="before")
        bob.wait_for(lambda e: e.get("payload") == "before")
        group.stop_server()
        group.start_server()
        for i in range(5):  # sent as soon as the connection is back, before the rejoin
            alice.command(op="send", to=["bob"], payload=f"during {i}")
        delivered = bob.wait_count("deliver", 6, timeout=30)
        assert [e["payload"] for e in delivered] == ["before", *(f"during {i}" for i in range(5))]
        assert _held(bob) == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("module", CAUSAL)
def test_a_late_joiner_during_traffic_delivers_in_order_and_waits_for_nothing_before(
    quick_group: ProcessGroup, tmp_path: Path, module: str
) -> None:
    from trace_analysis.reference import check_directory

    group = quick_group
    traces = str(tmp_path / "traces")
    burst = dict(op="burst", count=300, rate=300, seed=7,
                 broadcast_only=module == "vector")
    alice = group.start_peer("alice", causality=module, trace_dir=traces)
    bob = group.start_peer("bob", causality=module, trace_dir=traces)
    group.wait_members(["alice", "bob"])
    alice.command(**burst)
    bob.command(**burst)
    alice.wait_count("deliver", 50)  # traffic flows
    carol = group.start_peer("carol", causality=module, trace_dir=traces)
    carol.command(**{**burst, "count": 100})
    peers = (alice, bob, carol)
    sent = {p.name: p.wait_for(lambda e: e.get("event") == "burst_done", timeout=60)["sent"]
            for p in peers}
    for receiver in peers:
        expected = sum(counts.get(receiver.name, 0) for counts in sent.values())
        receiver.wait_count("deliver", expected, timeout=60)
    for peer in peers:
        assert _held(peer) == [], peer.name
        peer.quit()
    result = check_directory(traces)
    assert (result.undelivered, result.duplicates, result.fifo_violations) == (0, 0, 0)
    if module != "fifo":
        assert result.causal_violations == 0


def test_a_killed_process_leaves_its_trace_and_the_analysis_says_it_ended_abruptly(
    quick_group: ProcessGroup, tmp_path: Path
) -> None:
    from trace_analysis.endings import trace_endings
    from trace_analysis.loaded import list_trace_files

    group = quick_group
    traces = tmp_path / "traces"
    alice = group.start_peer("alice", causality="matrix", trace_dir=str(traces))
    carol = group.start_peer("carol", causality="matrix", trace_dir=str(traces))
    group.wait_members(["alice", "carol"])
    for i in range(20):
        carol.command(op="send", to=["alice"], payload=i)
    alice.wait_count("deliver", 20)
    # trace lines reach the file at least once a heartbeat (0.5 s): wait for carol's
    # twentieth send to be on disk, then kill her outright
    carol_trace = traces / "carol.jsonl"
    deadline = time.monotonic() + 10
    while '"msg":"carol#20"' not in (carol_trace.read_text() if carol_trace.exists() else ""):
        assert time.monotonic() < deadline, "carol's trace never reached the file"
        time.sleep(0.05)
    carol.kill()
    alice.wait_for(lambda e: e.get("event") == "left" and e.get("client") == "carol",
                   timeout=20)
    alice.quit()
    endings = trace_endings(list_trace_files(traces))
    assert endings.left == {"alice"} and endings.abrupt == ["carol"]


@pytest.mark.parametrize("module", ["matrix", "cykas"])
def test_with_the_reliable_layer_nothing_sent_to_a_falsely_suspected_member_goes_unreported(
    quick_group: ProcessGroup, module: str
) -> None:
    """alice sends to carol while carol is frozen past the heartbeat timeout. Each of those
    messages either reached carol (read once she resumed, before she learnt she was gone)
    or is reported to alice by undeliverable(): with the reliable layer, nothing the
    application accepted is lost without a word. Then carol~2 and alice talk normally."""
    group = quick_group
    alice = group.start_peer("alice", causality=module, direct=True, filters=["reliable"])
    carol = group.start_peer("carol", causality=module, direct=True, filters=["reliable"])
    group.wait_members(["alice", "carol"])
    carol.process.send_signal(signal.SIGSTOP)
    try:
        for i in range(5):
            alice.command(op="send", to=["carol"], payload=f"while frozen {i}",
                          label=f"f{i}")
        sent = [alice.wait_for(lambda e, i=i: e.get("event") == "sent"
                               and e.get("label") == f"f{i}")["id"] for i in range(5)]
        alice.wait_for(lambda e: e.get("event") == "left" and e.get("client") == "carol",
                       timeout=20, what="carol declared gone")
    finally:
        carol.process.send_signal(signal.SIGCONT)
    for peer in (alice, carol):
        peer.wait_for(lambda e: e.get("event") == "joined" and e.get("client") == "carol~2",
                      timeout=20, what="carol back as carol~2")
    seen = len([e for e in alice.events if e.get("event") == "undeliverable"])
    alice.command(op="undeliverable")
    reported = set(alice.wait_count("undeliverable", seen + 1)[-1]["ids"])
    reached = {e["id"] for e in carol.deliveries() if e["sender"] == "alice"}
    assert set(sent) <= reported | reached, (sent, reported, reached)
    assert reported, "carol was frozen: at least the unacknowledged ones are reported"
    carol.command(op="send", to=["alice"], payload="back")
    alice.wait_for(lambda e: e.get("payload") == "back", what="carol~2's message")
    alice.command(op="send", to=["carol~2"], payload="welcome back")
    carol.wait_for(lambda e: e.get("payload") == "welcome back", what="alice's message")
    assert _held(alice) == [] and _held(carol) == []
