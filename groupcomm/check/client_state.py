"""The state of an in-process member (a
:class:`~groupcomm.protocol.client.ClientProtocol` and its host side,
:class:`~groupcomm.protocol.inprocess.InProcessMember`) as a value the session checker
keeps per explored state, and puts back before each step.

A member is one live object per client start; :func:`capture` takes what it holds
(without copying: the next :func:`restore` gives the member fresh copies, so what was
captured is never changed again) and :func:`restore` sets it back. :func:`state_key` is
the hashable image the search compares states by (counters of what happened are left
out). The protocol's node is kept as its own snapshot (:meth:`ProtocolNode.snapshot`),
and each member keeps one node object per member id (a new incarnation makes a new
node), set back to the snapshot before use.

:data:`PROTOCOL_STATE` and :data:`MEMBER_STATE` name every attribute that holds state;
:data:`PROTOCOL_FIXED` and :data:`MEMBER_FIXED` those that do not (configuration,
callbacks, counters). tests/check/test_client_state.py checks that every attribute of a
live member is in one of them, so an attribute added to the client protocol is not
silently left out of the search.
"""

from __future__ import annotations

from typing import Any

from groupcomm.check.plain_state import clone, freeze
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.client import ClientProtocol
from groupcomm.protocol.inprocess import InProcessMember

__all__ = ["MEMBER_FIXED", "MEMBER_STATE", "PROTOCOL_FIXED", "PROTOCOL_STATE", "capture",
           "restore", "state_key"]

#: ClientProtocol attributes that hold state (the node and the codec apart)
PROTOCOL_STATE = ("membership", "member", "members_at_join", "_release_due", "_state_gate",
                  "recent_ids", "_system_sent", "_cuts", "deferred_answers", "_now",
                  "_next_heartbeat", "_next_tick", "deadline", "watching")
#: ClientProtocol attributes that do not: configuration, callbacks, what counts or
#: reports (the node and the codec are kept apart, see capture)
PROTOCOL_FIXED = ("name", "session", "application", "codec", "streams", "out", "stats",
                  "rejects", "heartbeat_interval", "_filter_stacks", "_send_queue",
                  "_tracer_for", "_clock", "tracer", "session_listeners", "node",
                  "release_after", "_undeliverable", "_state_provider", "_state_consumer",
                  "caught_up")
#: InProcessMember attributes that hold state
MEMBER_STATE = ("waiting", "direct_sent", "join_error", "joined", "left", "state_done")
#: InProcessMember attributes that do not
MEMBER_FIXED = ("name", "carrier", "routing", "codec", "streams", "listeners", "protocol")
#: attributes of the plain objects inside that count what happened
_COUNTERS = frozenset({"stats"})


def capture(member: InProcessMember) -> tuple:
    """What ``member`` holds now (taken, not copied: see the module docstring)."""
    protocol = member.protocol
    node = protocol.node
    if protocol.streams._streams:  # noqa: SLF001 - frames are sent uncompressed (chunk 0)
        raise RuntimeError(f"{member.name}: a compressed stream was received")
    replay = protocol.codec._replay  # noqa: SLF001 - the replay window is state too
    return (tuple(getattr(protocol, a) for a in PROTOCOL_STATE),
            tuple(getattr(member, a) for a in MEMBER_STATE),
            node.name, node.snapshot(), protocol.codec._counter, replay._state)  # noqa: SLF001


def restore(member: InProcessMember, state: tuple, nodes: dict[str, ProtocolNode]) -> None:
    """Set ``member`` back to ``state`` (copies of it); ``nodes`` are its node objects
    by member id (one is made when missing)."""
    protocol_values, member_values, node_name, node_snapshot, counter, replay = state
    protocol = member.protocol
    for attribute, value in zip(PROTOCOL_STATE, protocol_values, strict=True):
        setattr(protocol, attribute, clone(value))
    for attribute, value in zip(MEMBER_STATE, member_values, strict=True):
        setattr(member, attribute, clone(value))
    node = nodes.get(node_name)
    if node is None:
        node = nodes[node_name] = protocol._make_node(node_name)  # noqa: SLF001
        for listener in protocol.session_listeners:
            node.add_session_listener(listener)
    node.restore(node_snapshot)
    protocol.node = node
    protocol.codec._counter = counter  # noqa: SLF001
    protocol.codec._replay._state = clone(replay)  # noqa: SLF001


def remember_node(member: InProcessMember, nodes: dict[str, ProtocolNode]) -> None:
    """Keep the member's current node (made by the protocol for a new incarnation)."""
    node = member.protocol.node
    nodes.setdefault(node.name, node)


#: protocol attributes the key leaves out: the time of the input being handled (every
#: input sets it before reading it) and what is derived from the rest (the timer's
#: deadline and whether it watches)
_UNKEYED = frozenset({"_now", "deadline", "watching"})
_KEYED = tuple(i for i, a in enumerate(PROTOCOL_STATE) if a not in _UNKEYED)


def state_key(state: tuple, unkeyed: frozenset[str] = frozenset()) -> Any:
    """The hashable image of a captured state. The frame counter and the replay window
    are left out: in the session model no frame arrives twice, so the window never
    refuses one and the counters change nothing. ``unkeyed`` names attributes of the
    plain objects inside that the bounds make irrelevant (see
    :data:`groupcomm.check.session_rules.SessionCheck`)."""
    protocol_values, member_values, node_name, node_snapshot, _, _ = state
    skip = _COUNTERS | unkeyed
    return (tuple([_key(protocol_values[i], skip) for i in _KEYED]), freeze(member_values),
            node_name, freeze(node_snapshot))


def _key(value: Any, skip: frozenset[str]) -> Any:
    if hasattr(value, "__dict__") and not hasattr(type(value), "__dataclass_fields__"):
        return (type(value).__name__, freeze({k: v for k, v in vars(value).items()
                                              if k not in skip}))
    return freeze(value)


def classify(protocol: ClientProtocol, member: InProcessMember) -> tuple[set[str], set[str]]:
    """The attributes of ``protocol`` and ``member`` that are in neither list (for the
    test that keeps the lists complete)."""
    return (set(vars(protocol)) - set(PROTOCOL_STATE) - set(PROTOCOL_FIXED),
            set(vars(member)) - set(MEMBER_STATE) - set(MEMBER_FIXED))
