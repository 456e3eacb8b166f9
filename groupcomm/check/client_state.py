"""The state of an in-process member (its :class:`~groupcomm.protocol.client.ClientProtocol`
and host side, :class:`~groupcomm.protocol.inprocess.InProcessMember`) as a value the
session checker keeps per explored state and puts back before each step.

:func:`capture` takes what the member holds without copying (the next :func:`restore`
gives the member fresh copies, so what was captured never changes); :func:`state_key`
is the hashable image states are compared by. The node is kept as its snapshot, with one
node object per member id. The lists below name every attribute that holds state;
tests/check/test_client_state.py lists those that do not and checks that every attribute
of a live member is in one list, so that one added to the client is not silently left
out of the search.
"""

from __future__ import annotations

from typing import Any

from groupcomm.check.plain_state import clone, freeze
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.inprocess import InProcessMember

__all__ = ["MEMBER_STATE", "PORT_STATE", "PROTOCOL_STATE", "TRANSFER_STATE", "capture",
           "restore", "state_key"]

#: ClientProtocol attributes that hold state (the node, the codec, the port and state
#: transfer apart)
PROTOCOL_STATE = ("membership", "members_at_join", "departures", "now",
                  "_next_heartbeat", "_next_tick", "deadline", "_may_relay", "_addresses",
                  "clock_acks", "store_joins")
#: the state of its port (the application's side) and of its two sides of state transfer
PORT_STATE = ("recent", "member_ids", "handed", "acknowledged", "_unacknowledged", "inbox")
TRANSFER_STATE = ("gate", "_cuts", "deferred", "_system_sent", "_store_request",
                  "stored_session", "_kept", "holds")
#: InProcessMember attributes that hold state
MEMBER_STATE = ("waiting", "direct_sent", "join_error", "joined", "left", "state_done",
                "may_relay")
#: attributes of the plain objects inside that count what happened
_COUNTERS = frozenset({"stats"})


def capture(member: InProcessMember) -> tuple:
    """What ``member`` holds now (taken, not copied: see the module docstring)."""
    protocol = member.protocol
    node = protocol.node
    if protocol.streams._streams:  # noqa: SLF001 - frames go uncompressed (chunk 0)
        raise RuntimeError(f"{member.name}: a compressed stream was received")
    if protocol.inputs:
        raise RuntimeError(f"{member.name}: sends left untaken between steps")
    replay = protocol.codec._replay  # noqa: SLF001 - the replay window is state too
    return (tuple(getattr(protocol, a) for a in PROTOCOL_STATE),
            tuple(getattr(protocol.port, a) for a in PORT_STATE),
            tuple(getattr(protocol.transfer, a) for a in TRANSFER_STATE),
            tuple(getattr(member, a) for a in MEMBER_STATE),
            node.name, node.snapshot(), protocol.codec._counter, replay._state)  # noqa: SLF001


def restore(member: InProcessMember, state: tuple, nodes: dict[str, ProtocolNode]) -> None:
    """Set ``member`` back to ``state`` (copies of it); ``nodes`` are its node objects
    by member id (one is made when missing)."""
    (protocol_values, port_values, transfer_values, member_values, node_name, node_snapshot,
     counter, replay) = state
    protocol = member.protocol
    for target, names, values in ((protocol, PROTOCOL_STATE, protocol_values),
                                  (protocol.port, PORT_STATE, port_values),
                                  (protocol.transfer, TRANSFER_STATE, transfer_values),
                                  (member, MEMBER_STATE, member_values)):
        for attribute, value in zip(names, values, strict=True):
            setattr(target, attribute, clone(value))
    node = nodes.get(node_name)
    if node is None:
        node = nodes[node_name] = protocol._make_node(node_name)  # noqa: SLF001
        for listener in protocol.session_listeners:
            node.add_session_listener(listener)
    node.restore(node_snapshot)
    protocol.node = protocol.port.node = node
    protocol.codec._counter = counter  # noqa: SLF001
    protocol.codec._replay._state = clone(replay)  # noqa: SLF001


#: protocol attributes the key leaves out: the time of the input being handled (every
#: input sets it before reading it) and what is derived from the rest (the timer's
#: deadline, the host's status, whom a name means)
_UNKEYED = frozenset({"now", "deadline", "_may_relay", "_addresses"})
_KEYED = tuple(i for i, a in enumerate(PROTOCOL_STATE) if a not in _UNKEYED)
_PORT_KEYED = tuple(i for i, a in enumerate(PORT_STATE) if a != "member_ids")


def state_key(state: tuple, unkeyed: frozenset[str] = frozenset()) -> Any:
    """The hashable image of a captured state. The frame counter and the replay window
    are left out: in the session model no frame arrives twice, so the window never
    refuses one and the counters change nothing. ``unkeyed`` names attributes of the
    plain objects inside that the bounds make irrelevant (see
    :data:`groupcomm.check.session_rules.SessionCheck`)."""
    protocol_values, port_values, transfer_values, member_values, node_name, node_snapshot, \
        _, _ = state
    skip = _COUNTERS | unkeyed
    return (tuple([_key(protocol_values[i], skip) for i in _KEYED]),
            freeze(tuple(port_values[i] for i in _PORT_KEYED)),
            tuple(_key(value, skip) for value in transfer_values), freeze(member_values),
            node_name, freeze(node_snapshot))


def _key(value: Any, skip: frozenset[str]) -> Any:
    if hasattr(value, "__dict__") and not hasattr(type(value), "__dataclass_fields__"):
        return (type(value).__name__, freeze({k: v for k, v in vars(value).items()
                                              if k not in skip}))
    return freeze(value)
