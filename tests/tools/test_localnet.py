"""The in-process network runs a client protocol object per member and the session
server's side: the registry decides member lists, order and incarnations, each member
processes its notices, and every message travels as a signed frame."""

from __future__ import annotations

import pytest

from groupcomm.tools.localnet import LocalNetwork


def _joins(net: LocalNetwork, process: str) -> list[tuple[str, list[str]]]:
    return [(r["client"], r["members"]) for r in net.records
            if r["event"] == "join" and r["process"] == process]


def test_the_processes_join_one_by_one_through_the_registry() -> None:
    net = LocalNetwork(["a", "b", "c"], "vector")
    assert net.server.members() == list(net.nodes) == ["a", "b", "c"]
    # every process hears each join from its own onwards, with the registry's member list
    assert _joins(net, "a") == [("a", ["a"]), ("b", ["a", "b"]), ("c", ["a", "b", "c"])]
    assert _joins(net, "c") == [("c", ["a", "b", "c"])]
    assert {name: net.members[name].protocol.membership.phase for name in net.nodes} == \
        dict.fromkeys("abc", "joined")


def test_a_late_joiner_gets_the_registry_member_list_and_a_name_that_comes_back_is_new() -> None:
    net = LocalNetwork(["a", "b", "carol"], "matrix")
    net.to_others("carol", "before")
    net.run()
    net.leave("carol")
    net.leave("b")
    assert net.join("dave") == "dave"
    assert net.nodes["dave"].members == ["a", "dave"]  # the registry's list, not a guess
    assert net.join("carol") == "carol~2"
    assert list(net.nodes) == net.server.members() == ["a", "dave", "carol~2"]
    assert net.nodes["carol~2"].members == ["a", "dave", "carol~2"]
    assert [r["incarnation"] for r in net.records
            if r["event"] == "join" and r["client"] == "carol~2"] == [2, 2, 2]
    sent = net.to_others("carol~2", "after")
    net.run()
    assert sent.message_id.startswith("carol~2#")
    assert net.delivered_payloads("a") == ["before", "after"]
    assert net.delivered_payloads("carol~2") == []


def test_a_member_not_told_yet_processes_its_notices_in_the_order_the_registry_sent_them() -> None:
    net = LocalNetwork(["a", "b"], "vector")
    net.join("c", told=[])  # b has not processed c's join yet
    assert net.nodes["b"].members == ["a", "b"]
    net.join("d", told=["a", "c"])
    assert net.nodes["b"].members == ["a", "b"]
    net.tell_join("b", "d")  # processes c's join first, as its connection would deliver it
    assert _joins(net, "b")[-2:] == [("c", ["a", "b", "c"]), ("d", ["a", "b", "c", "d"])]
    net.tell_join("b", "c")  # already processed: nothing happens
    assert len(_joins(net, "b")) == 3  # its own, c and d
    net.tell_join("a", "c")  # a was told at once
    assert len(_joins(net, "a")) == 4


def test_a_leave_reaches_the_others_after_the_notices_they_had_queued() -> None:
    net = LocalNetwork(["a", "b"], "mfss")
    net.join("c", told=["a"])
    net.leave("c")
    leaves = [(r["process"], r["client"]) for r in net.records if r["event"] == "leave"]
    assert leaves == [("a", "c"), ("b", "c")]
    assert [c for c, _ in _joins(net, "b")] == ["b", "c"]  # b heard of c before it left
    assert net.server.members() == ["a", "b"]


def test_joining_under_a_name_a_member_holds_is_refused() -> None:
    net = LocalNetwork(["a", "b"])
    with pytest.raises(ValueError, match="not admitted"):
        net.join("a")
    with pytest.raises(ValueError, match="not admitted"):
        LocalNetwork(["a", "a"])
    with pytest.raises(ValueError, match="contains"):
        net.join("x~2")


def test_frames_are_signed_and_a_forged_one_is_refused() -> None:
    net = LocalNetwork(["a", "b"], "matrix")
    net.send("a", "signed", ["b"])
    [frame] = net.in_flight
    forged = frame.sealed[:-1] + bytes([frame.sealed[-1] ^ 1])
    net.members["b"].message_frame(forged, 0.0, direct=True)
    assert net.delivered_payloads("b") == []
    net.run()
    assert net.delivered_payloads("b") == ["signed"]
    # the same frame again is a replay
    net.members["b"].message_frame(frame.sealed, 0.0, direct=True)
    counters = net.members["b"].protocol.counters()
    assert (counters["rejected_bad_signature"], counters["rejected_replayed"]) == (1, 1)
    assert net.delivered_payloads("b") == ["signed"]


def test_a_frame_that_overtakes_its_senders_join_notice_waits_for_it() -> None:
    net = LocalNetwork(["a", "b"], "fifo")
    net.join("c", told=["a"])  # b has not processed c's join yet
    net.send("c", "early", ["b"])
    net.run()
    assert net.delivered_payloads("b") == []  # kept until b knows c
    net.tell_join("b", "c")
    assert net.delivered_payloads("b") == ["early"]
