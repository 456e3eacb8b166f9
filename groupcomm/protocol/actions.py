"""What a client's protocol object (:class:`~groupcomm.protocol.client.ClientProtocol`)
asks its host to do: the actions, and the sink it writes them into.

The protocol object writes each action into an :class:`Out` as it decides it, the way
an actor writes into Stateright's ``Out``. The actions are of two sorts only: wire
actions (a message for a frame, a command for the server, a frame to relay again, a
peer to forget) and the member's status (joined, left, relaying allowed, peers'
addresses, state transfer pending or settled). Deliveries do not pass here: they go up
to the application through the member's port
(:class:`~groupcomm.protocol.port.ApplicationPort`). Hosts implement :class:`Out` themselves (the
ZeroMQ member link, :mod:`groupcomm.transport.link`; the in-process host), so the hot
action (a message leaving the send pipeline) costs one method call and no object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from groupcomm.core.messages import SentMessage

__all__ = ["Out"]


class Out(Protocol):
    """The host side of a client protocol object: one method per action."""

    def transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        """``message`` left the send pipeline for ``dests``: put it in a frame."""

    def to_server(self, command: bytes) -> None:
        """Send this sealed session command to the server."""

    def relay(self, frame: bytes, dests: Sequence[str]) -> None:
        """Relay this sealed message frame through the server to ``dests``."""

    def drop_peer(self, member: str) -> None:
        """``member`` left: forget its link (socket, frame count, backlog)."""

    def discard_queued(self) -> None:
        """This client came back as a new member: what waits for a frame is not sent
        (it was reported undeliverable), and the streams of routed frames start
        afresh."""

    def restart_streams(self) -> None:
        """The server lost this client (it restarted, or declared it gone) and it is
        back: frames sent meanwhile may be lost, so the next routed frame of every
        destination set starts its stream afresh (:mod:`groupcomm.wire.streams`)."""

    def join_settled(self, error: str | None) -> None:
        """The first join succeeded (``error`` is None) or was refused."""

    def left_session(self) -> None:
        """The server confirmed this client's leave."""

    def relay_allowed(self, allowed: bool) -> None:
        """Whether relayed frames may go now: not while the server does not know this
        client (it restarted, and the rejoin is not accepted yet): it would return them."""

    def peer_addresses(self, addresses: dict[str, str]) -> None:
        """Where each member takes frames pushed directly (direct routing); a new dict
        each time it changes."""

    def state_pending(self) -> None:
        """A state transfer starts (this client joined, or came back as a new member,
        asking for state): :meth:`state_settled` follows."""

    def state_settled(self) -> None:
        """The newcomer's state transfer is over (installed, or none to be had)."""
