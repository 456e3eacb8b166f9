"""The one mapping from :class:`~groupcomm.protocol.membership.Membership`'s actions to
:class:`~groupcomm.core.node.ProtocolNode` calls, for the client protocol and for hosts
that drive a node and a ``Membership`` alone (:mod:`groupcomm.check.churn`).
"""

from __future__ import annotations

from collections.abc import Iterable

from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.membership import Action, Arrive, Incarnated, MemberJoined, MemberLeft

__all__ = ["APPLICATION", "SESSION", "apply_to_node", "carry_out"]

#: the application and session in-process hosts use (ProtocolNode's defaults)
APPLICATION = "app"
SESSION = "session"


def apply_to_node(node: ProtocolNode, action: Action) -> bool:
    """Carry out ``action`` if it concerns the node alone (a join, a departure, arrivals
    the host then drains); False for any other action."""
    if isinstance(action, MemberJoined):
        node.client_joined(action.member, is_new_session=action.is_new_session,
                           is_new_application=action.is_new_application,
                           all_users=action.all_users)
    elif isinstance(action, MemberLeft):
        node.client_left(action.member)
    elif isinstance(action, Arrive):
        node.arrived_many(list(action.messages))
    else:
        return False
    return True


def carry_out(node: ProtocolNode, actions: Iterable[Action]) -> list[Action]:
    """Carry out ``actions`` on a node made under its member id (:class:`Incarnated` is
    just its own join); returns the actions that are not the node's, in order."""
    rest: list[Action] = []
    for action in actions:
        if isinstance(action, Incarnated):
            if action.member != node.name:
                raise ValueError(f"{action.member} was admitted, but its node is {node.name}")
            apply_to_node(node, action.joined)
        elif not apply_to_node(node, action):
            rest.append(action)
    return rest
