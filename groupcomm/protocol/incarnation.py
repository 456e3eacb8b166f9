"""What a new incarnation of a member changes, without I/O: how its state transfer
starts given the store's word on the join (:class:`StoreJoins`, :class:`TransferStart`),
what the node of an incarnation the session declared gone leaves behind
(:func:`left_behind`), and the session listeners told of the new node's join
(:func:`welcome`). :class:`~groupcomm.protocol.client.ClientProtocol` makes the calls
when the session admits it (docs/sessions.md, docs/storage.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groupcomm.core.filtering import SessionMessageListener
from groupcomm.core.messages import SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.membership import Incarnated, MemberJoined, StoreJoin
from groupcomm.protocol.state_transfer import StateTransfer

__all__ = ["StoreJoins", "TransferStart", "left_behind", "welcome"]


@dataclass(frozen=True)
class TransferStart:
    """How state transfer starts for an incarnation: ``stored``: the store sends its
    state; ``stored_session``: the server keeps the session, ``kept``: it had something
    of it; ``changed_from``: the store generation this client's state is of, when the
    store was dropped or replaced while it was away (else None); ``restarted``: the
    same incarnation back after a server restart."""

    stored: bool
    stored_session: bool
    kept: bool
    generation: str | None
    changed_from: str | None
    restarted: bool

    def begin(self, transfer: StateTransfer, members: Sequence[str], now: float) -> None:
        """Start ``transfer`` at ``now`` with the session's ``members``."""
        if self.restarted:
            # the request, or its answer, may have been inside the server
            transfer.server_restarted(members, now, self.stored)
        else:
            # a changed store's state is not merged into the session's: a fresh transfer
            transfer.joined(members, now, self.stored, stored_session=self.stored_session,
                            kept=self.kept, changed=self.changed_from is not None)


class StoreJoins:
    """The store's word on the join under way (:attr:`join`) and the generation of the
    join before (:attr:`generation_before`)."""

    def __init__(self) -> None:
        self.join: StoreJoin | None = None
        self.generation_before: str | None = None

    def heard(self, join: StoreJoin) -> None:
        """The server told how it keeps the session this client is joining."""
        self.join = join

    def start(self, action: Incarnated) -> TransferStart:
        """The session admitted this client (``action``): how its state transfer starts.
        The store's word is used up; its generation is the one before for the next join."""
        store, self.join = self.join, None
        changed = store is not None and store.changed
        start = TransferStart(
            stored=store is not None and store.stored, stored_session=store is not None,
            kept=store is not None and store.kept,
            generation=store.generation if store is not None else None,
            changed_from=(self.generation_before or "") if changed else None,
            restarted=not changed and action.previous == action.member)
        if store is not None:
            self.generation_before = store.generation
        return start


def left_behind(node: ProtocolNode) -> tuple[list[str], list[str]]:
    """What ``node``, of an incarnation the session declared gone, holds: the ids of the
    sends it did not send (undeliverable) and of the messages it held for delivery
    (lost with it)."""
    held = node.held()
    return ([m.message_id for m in held if isinstance(m, SentMessage)],
            [m.message_id for m in held if not isinstance(m, SentMessage)])


def welcome(node: ProtocolNode, listeners: Sequence[SessionMessageListener],
            joined: MemberJoined, application: str, session: str) -> None:
    """The session ``listeners`` move to ``node``, a new incarnation's, and hear of its
    join."""
    for listener in listeners:
        node.add_session_listener(listener)
        listener.client_joined(joined.member, application, session, joined.is_new_session,
                               joined.is_new_application, tuple(joined.all_users))
