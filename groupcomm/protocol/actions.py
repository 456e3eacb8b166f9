"""What a :class:`~groupcomm.protocol.client.ClientProtocol` asks its host to do: one
:class:`Out` method per action, written as it decides (as into Stateright's ``Out``).
Hosts implement it themselves (:mod:`groupcomm.transport.link`, the in-process host), so
the hot action, a message leaving the send pipeline, costs one call. Deliveries go up
through the :class:`~groupcomm.protocol.port.ApplicationPort`, not here.
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
        """Back as a new member: drop what waits for a frame (reported undeliverable),
        and start the routed streams afresh."""

    def restart_streams(self) -> None:
        """Back after the server lost this client: frames sent meanwhile may be lost, so
        every routed stream starts afresh (:mod:`groupcomm.wire.streams`)."""

    def frames_uncompressed(self) -> None:
        """The server keeps the session (docs/storage.md): relayed frames travel
        uncompressed from now on, so that it reads every one, whatever chunks a restart
        of it lost."""

    def join_settled(self, error: str | None) -> None:
        """The first join succeeded (``error`` is None) or was refused."""

    def left_session(self) -> None:
        """The server confirmed this client's leave."""

    def relay_allowed(self, allowed: bool) -> None:
        """Whether relayed frames may go (not while the server does not know this client)."""

    def peer_addresses(self, addresses: dict[str, str]) -> None:
        """Where each member takes frames pushed directly; a new dict each time."""

    def state_pending(self) -> None:
        """A state transfer starts: :meth:`state_settled` follows."""

    def state_settled(self) -> None:
        """The newcomer's state transfer is over (installed, or none to be had)."""
