"""Integration tests: a server and clients as real processes talking ZeroMQ on 127.0.0.1."""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from groupcomm.core.tracing import validate_record
from groupcomm.tools.procs import ProcessError, ProcessGroup
from groupcomm.transport.keys import read_key_file
from groupcomm.wire.frames import ROUTED, FrameCodec
from groupcomm.wire.streams import StreamEncoder

NAMES = ["alice", "bob", "carol"]


def start_three(group: ProcessGroup, **options: object) -> None:
    for name in NAMES:
        group.start_peer(name, **options)
    group.wait_members(NAMES)


def joined_order(events: list[dict]) -> list[str]:
    return [e["client"] for e in events if e.get("event") == "joined"]


def test_three_clients_join_and_leave_notifications(group: ProcessGroup) -> None:
    start_three(group)
    # bob and carol saw the later joins in the same order
    bob, carol = group.peers["bob"], group.peers["carol"]
    carol.wait_for(lambda e: e.get("event") == "ready")
    assert joined_order(bob.events)[-1:] == ["carol"] or "carol" in joined_order(bob.events)
    alice = group.peers["alice"]
    assert [c for c in joined_order(alice.events)] == ["bob", "carol"]
    group.peers["bob"].quit()
    for name in ("alice", "carol"):
        left = group.peers[name].wait_for(lambda e: e.get("event") == "left", what="left")
        assert left["client"] == "bob"
    group.peers["alice"].command(op="members")
    members = alice.wait_for(lambda e: e.get("event") == "members")
    assert members["members"] == ["alice", "carol"]


@pytest.mark.parametrize("direct", [False, True], ids=["relayed", "direct"])
def test_each_send_kind_reaches_exactly_its_recipients(group: ProcessGroup, direct: bool) -> None:
    start_three(group, direct=direct)
    alice = group.peers["alice"]
    alice.command(op="send", to=["bob"], payload="to-bob", label="unicast")
    alice.command(op="send", to=["bob", "carol"], payload="to-both", label="multicast")
    alice.command(op="send", to="others", payload="to-others", label="others")
    alice.command(op="send", to="all", payload="to-all", label="all")
    expected = {
        "alice": ["all"],
        "bob": ["unicast", "multicast", "others", "all"],
        "carol": ["multicast", "others", "all"],
    }
    for name, labels in expected.items():
        peer = group.peers[name]
        peer.wait_count("deliver", len(labels))
    # a marker message lets us see that nothing else arrives after the expected ones
    alice.command(op="send", to="all", payload="end", label="end")
    for name, labels in expected.items():
        peer = group.peers[name]
        delivered = peer.wait_count("deliver", len(labels) + 1)
        assert sorted(e["label"] for e in delivered) == sorted([*labels, "end"])


def test_function_payload_runs_at_receiver(group: ProcessGroup) -> None:
    start_three(group)
    group.peers["alice"].command(op="send", to=["carol"], function="lambda: sum(range(10))")
    event = group.peers["carol"].wait_for(lambda e: e.get("event") == "deliver")
    assert event["payload"] == {"called": 45}


def test_killed_client_is_reported_as_left(group: ProcessGroup) -> None:
    start_three(group)
    group.peers["carol"].kill()
    for name in ("alice", "bob"):
        left = group.peers[name].wait_for(
            lambda e: e.get("event") == "left" and e.get("client") == "carol", timeout=15,
            what="carol left")
        assert left["client"] == "carol"


def test_duplicate_name_is_refused(group: ProcessGroup) -> None:
    group.start_peer("alice")
    with pytest.raises(ProcessError):
        group.start_peer("alice")
    duplicate = group.peers["alice"]  # the second process replaced the first in the dict
    assert any("is taken" in line and "is running" in line
               for line in duplicate.stderr_lines)


def test_send_to_unknown_user_is_a_clear_error(group: ProcessGroup) -> None:
    alice = group.start_peer("alice")
    alice.command(op="send", to=["mallory"], payload="x")
    error = alice.wait_for(lambda e: e.get("event") == "error")
    assert "unknown user" in error["message"] and "mallory" in error["message"]


@pytest.mark.parametrize("direct", [False, True], ids=["relayed", "direct"])
def test_delay_reorders_across_peers(group: ProcessGroup, direct: bool) -> None:
    """The seeds' scenario: alice->carol delayed; carol gets m3 (via bob) before m1."""
    start_three(group, causality="none", direct=direct)
    alice, bob, carol = (group.peers[n] for n in NAMES)
    alice.command(op="delay", peer="carol", ms=800)
    alice.command(op="send", to=["carol"], payload="Let's meet at 3pm", label="m1")
    alice.command(op="send", to=["bob"], payload="please join", label="m2")
    bob.wait_for(lambda e: e.get("label") == "m2")
    bob.command(op="send", to=["carol"], payload="what is it about?", label="m3")
    delivered = carol.wait_count("deliver", 2)
    assert [e["label"] for e in delivered] == ["m3", "m1"]


def test_bad_frames_are_rejected_and_counted_while_good_traffic_flows(
    group: ProcessGroup,
) -> None:
    start_three(group, direct=True)
    alice, bob = group.peers["alice"], group.peers["bob"]
    bob_address = next(e for e in bob.events if e.get("event") == "ready")["address"]
    good = FrameCodec(read_key_file(group.key_file))
    wrong = FrameCodec(b"w" * 32)
    context = zmq.Context.instance()
    push = context.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(bob_address)
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    assert group.server is not None
    dealer.connect(group.server.address)
    replayed = good.seal(b"M" + b"\x00" * 8)
    try:
        for i in range(50):
            push.send(b"garbage %d" % i)                      # truncated / bad signature
            push.send(wrong.seal(ROUTED + b"x" * 40))         # wrong key
            push.send(replayed)                               # an unknown kind, then replays
            push.send(good.seal(ROUTED + b"\xc1not-msgpack"))  # signed but malformed
            dealer.send(b"junk" * 20)
            alice.command(op="send", to=["bob"], payload=i, label=f"good{i}")
        delivered = bob.wait_count("deliver", 50)
        assert [e["payload"] for e in delivered] == list(range(50))
        expected = {"rejected_truncated": 50, "rejected_bad_signature": 50,
                    "rejected_replayed": 49, "rejected_malformed": 50,
                    "rejected_unknown_kind": 1}
        deadline = time.monotonic() + 20
        while True:  # the bad frames travel on another connection: poll with a deadline
            seen = len([e for e in bob.events if e.get("event") == "counters"])
            bob.command(op="counters")
            counters = bob.wait_count("counters", seen + 1)[-1]["counters"]
            if all(counters.get(k, 0) >= v for k, v in expected.items()):
                break
            assert time.monotonic() < deadline, counters
        bob.command(op="send", to=["alice"], payload="still alive")
        assert alice.wait_for(lambda e: e.get("payload") == "still alive")
    finally:
        push.close(linger=0)
        dealer.close(linger=0)


def test_traces_validate_against_the_schema(group: ProcessGroup, tmp_path: Path) -> None:
    trace_dir = tmp_path / "traces"
    start_three(group, trace_dir=str(trace_dir))
    group.peers["alice"].command(op="send", to="others", payload="hello", label="m1")
    group.peers["bob"].wait_for(lambda e: e.get("event") == "deliver")
    group.peers["bob"].command(op="send", to="all", payload="back", label="m2")
    for name in NAMES:
        group.peers[name].wait_for(lambda e: e.get("label") == "m2")
    for name in NAMES:
        group.peers[name].quit()
    events = {}
    for name in NAMES:
        lines = (trace_dir / f"{name}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        for record in records:
            validate_record(record)
        events[name] = records
    sends = [r for r in events["bob"] if r["event"] == "send"]
    delivers = [r for r in events["bob"] if r["event"] == "deliver"]
    assert sends[0]["vc"] == {"alice": 1, "bob": 2} and delivers[0]["vc"] == {"alice": 1, "bob": 1}
    assert {r["event"] for r in events["alice"]} >= {"send", "network_send", "join", "deliver"}


def test_bad_packed_frames_are_refused_message_by_message(group: ProcessGroup) -> None:
    """Packed batches in routed frames (what communicators send): a malformed batch is
    refused whole; in a well-formed one each bad message is refused and counted, and the
    good ones arrive."""
    start_three(group, direct=True)
    bob = group.peers["bob"]
    bob_address = next(e for e in bob.events if e.get("event") == "ready")["address"]
    good = FrameCodec(read_key_file(group.key_file))
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(bob_address)
    entry = ["alice#100000", ["bob"], "normal", {}, [["alice", 100000]], 0,
             pickle.dumps("packed-ok")]
    entries = [[1, 2], entry, ["alice#100001", ["carol"], *entry[2:]],
               ["alice#100002", ["bob"], "normal", {}, [["alice", 100001]], 0, b"\x80junk"]]
    try:
        routed = StreamEncoder(compress=False).wrap
        push.send(good.seal(routed(("bob",), b"P\xc1")))
        push.send(good.seal(routed(("bob",), b"P" + msgpack.packb(["default", "s", "alice",
                                                                   entries]))))
        delivered = bob.wait_for(lambda e: e.get("payload") == "packed-ok")
        assert delivered["sender"] == "alice"
        deadline = time.monotonic() + 20
        while True:
            seen = len([e for e in bob.events if e.get("event") == "counters"])
            bob.command(op="counters")
            counters = bob.wait_count("counters", seen + 1)[-1]["counters"]
            if counters.get("rejected_malformed", 0) >= 4:
                break
            assert time.monotonic() < deadline, counters
        assert counters["rejected_malformed"] == 4
    finally:
        push.close(linger=0)
