"""The session server's notices in the churn model (:mod:`groupcomm.check.churn`): a
notice as a network entry, whose frame is ``b"\\0"`` + its number (the membership changes
before it) + :data:`JOIN` or :data:`LEFT` + the subject + ``b"|"`` + the registry's notice
as JSON (a frame of the codec never starts with a zero byte); and a member's client
taking it (:func:`take_notices`).
"""

from __future__ import annotations

import json
from typing import Any

from groupcomm.core.member_ids import display_name, split_member
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.client_actions import carry_out
from groupcomm.protocol.membership import Membership, Reject
from groupcomm.protocol.registry import Notify

#: the kinds of notice entries
JOIN = b"J"
LEFT = b"L"
#: the model has no clock: every input reaches the registry and the clients at time 0
NOW = 0.0


def is_notice(frame: bytes) -> bool:
    return frame[:1] == b"\x00"


def notice_kind(frame: bytes) -> bytes:
    """:data:`JOIN` or :data:`LEFT` (``b""`` for a frame that is no notice)."""
    return frame[2:3] if frame[:1] == b"\x00" else b""


def notice_text(frame: bytes) -> str:
    """``joined p3`` / ``left p2`` for a notice entry."""
    return f"{'joined' if notice_kind(frame) == JOIN else 'left'} {notice_subject(frame)}"


def notice_subject(frame: bytes) -> str:
    """The process a notice entry is about."""
    return frame[3:].partition(b"|")[0].decode()


def notice_fields(frame: bytes) -> dict[str, Any]:
    """The notice a notice entry carries."""
    return json.loads(frame[3:].partition(b"|")[2])


def encode_notice(notify: Notify) -> bytes:
    """The registry's notice as the client reads it (``op`` and its fields)."""
    return json.dumps({"op": notify.op, **notify.fields}, sort_keys=True,
                      separators=(",", ":")).encode()


def notice_entry(number: int, notify: Notify) -> bytes:
    """The frame of the notice entry of ``notify``, the ``number``-th change."""
    kind = JOIN if notify.op == "joined" else LEFT
    return b"\x00" + bytes([number]) + kind + str(notify.fields["client"]).encode() + b"|" \
        + encode_notice(notify)


def take_notices(node: ProtocolNode, notices: list[dict[str, Any]]) -> None:
    """The member's client reads ``notices`` in order and ``node`` carries out its
    actions, as the transport does (:func:`carry_out`). The client is a
    :class:`Membership` rebuilt from the node (no restarts, no time, relayed routing: the
    node's member list fixes it). Raises ``RuntimeError`` when the client refuses a
    notice or its members and the node's differ afterwards."""
    membership = Membership(display_name(node.name), heartbeat_interval=1.0, now=NOW)
    if node.members:
        membership.incarnation = split_member(node.name)[1]
        membership.phase = "joined"
        membership.current = {display_name(u): u for u in node.members}
    for notice in notices:
        for action in carry_out(node, membership.on_notice(notice, NOW)):
            if isinstance(action, Reject):
                raise RuntimeError(f"the client refused notice {notice}: {action.detail}")
    node.drain()
    if set(membership.current.values()) != set(node.members):
        raise RuntimeError(f"{node.name}: the client counts {sorted(membership.current.values())} "
                           f"as members, its node {sorted(node.members)}")
