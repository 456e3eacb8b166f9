"""The mapping from Membership's actions to node calls, and InProcessSession: a registry
and a Membership per process, for hosts that carry the notices themselves."""

from __future__ import annotations

import pytest

from groupcomm.core.membership import (
    Incarnated,
    JoinDone,
    MemberJoined,
    MemberLeft,
    SendCommand,
)
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.client_actions import InProcessSession, apply_to_node, carry_out


def _node(name: str) -> ProtocolNode:
    return ProtocolNode(name, transmit=lambda message, dests: None, clock=lambda: 0.0)


def test_membership_actions_become_node_calls_and_the_rest_is_the_hosts() -> None:
    node = _node("a")
    joined = MemberJoined("a", True, True, ("a",))
    assert carry_out(node, [Incarnated("a", None, joined), JoinDone()]) == [JoinDone()]
    assert apply_to_node(node, MemberJoined("b", False, False, ("a", "b")))
    assert node.members == ["a", "b"]
    assert apply_to_node(node, MemberLeft("b"))
    assert node.members == ["a"]
    assert not apply_to_node(node, SendCommand("heartbeat"))
    with pytest.raises(ValueError, match="a~2 was admitted"):
        carry_out(node, [Incarnated("a~2", "a", joined)])


def test_the_registry_orders_the_notices_and_each_membership_processes_its_own() -> None:
    session = InProcessSession(now=0.0)
    assert session.join("a", 0.0) == ("a", [("a", {
        "op": "joined", "client": "a", "application": "app", "session": "session",
        "is_new_session": True, "is_new_application": True, "all_users": ["a"],
        "addresses": {"a": ""}, "wants_state": False})])
    member, notices = session.join("b", 1.0)
    assert member == "b" and [(p, n["client"]) for p, n in notices] == [("a", "b"), ("b", "b")]
    actions = session.on_notice("b", notices[1][1], 1.0)
    assert isinstance(actions[0], Incarnated) and actions[0].joined.all_users == ("a", "b")
    assert session.on_notice("a", notices[0][1], 1.0) == [
        MemberJoined("b", False, False, ("a", "b"))]
    left = session.leave("b", 2.0)
    assert [(p, n["op"], n["client"]) for p, n in left] == [("a", "left", "b")]
    assert session.on_notice("a", left[0][1], 2.0) == [MemberLeft("b")]
    assert "b" not in session.clients and session.members() == ["a"]
    # a name that comes back is the registry's next incarnation of it
    assert session.join("b", 3.0)[0] == "b~2"
    assert session.member_of("b") == "b~2"
    with pytest.raises(ValueError, match="not a member"):
        session.leave("nobody", 4.0)


def test_the_leaver_sees_its_leave_confirmed() -> None:
    session = InProcessSession(now=0.0)
    session.join("a", 0.0)
    membership = session.clients["a"]
    session.leave("a", 1.0)
    # its Membership processed its own ``left`` notice (LeftSession, nothing for a host)
    assert membership.phase == "left" and session.members() == []
