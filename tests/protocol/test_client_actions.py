"""The mapping from Membership's actions to node calls (the in-process hosts of whole
clients are tested in tests/protocol/test_inprocess.py)."""

from __future__ import annotations

import pytest

from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.client_actions import apply_to_node, carry_out
from groupcomm.protocol.membership import (
    Incarnated,
    JoinDone,
    MemberJoined,
    MemberLeft,
    SendCommand,
)


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
