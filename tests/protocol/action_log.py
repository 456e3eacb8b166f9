"""An :class:`~groupcomm.protocol.actions.Out` that keeps every action a client's
protocol object asks for as typed data, in order, for tests that carry them by hand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groupcomm.core.messages import SentMessage


@dataclass(frozen=True, slots=True)
class Transmit:
    message: SentMessage
    dests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ToServer:
    command: bytes


@dataclass(frozen=True, slots=True)
class Relay:
    frame: bytes
    dests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropPeer:
    member: str


@dataclass(frozen=True, slots=True)
class DiscardQueued:
    pass


@dataclass(frozen=True, slots=True)
class RestartStreams:
    pass


@dataclass(frozen=True, slots=True)
class JoinSettled:
    error: str | None


@dataclass(frozen=True, slots=True)
class LeftSession:
    pass


@dataclass(frozen=True, slots=True)
class RelayAllowed:
    allowed: bool


@dataclass(frozen=True, slots=True)
class PeerAddresses:
    addresses: dict[str, str]


@dataclass(frozen=True, slots=True)
class StatePending:
    pass


@dataclass(frozen=True, slots=True)
class StateSettled:
    pass


@dataclass(frozen=True, slots=True)
class FramesUncompressed:
    pass


ClientAction = (Transmit | ToServer | Relay | DropPeer | DiscardQueued | RestartStreams
                | JoinSettled | LeftSession | RelayAllowed | PeerAddresses | StatePending
                | StateSettled)


class ActionLog:
    """An ``Out`` that keeps every action as data, in order (:attr:`actions`;
    :meth:`take` empties it)."""

    def __init__(self) -> None:
        self.actions: list[ClientAction] = []

    def take(self) -> list[ClientAction]:
        """The actions so far, oldest first; the log starts empty again."""
        taken, self.actions = self.actions, []
        return taken

    def transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        self.actions.append(Transmit(message, dests))

    def to_server(self, command: bytes) -> None:
        self.actions.append(ToServer(command))

    def relay(self, frame: bytes, dests: Sequence[str]) -> None:
        self.actions.append(Relay(frame, tuple(dests)))

    def drop_peer(self, member: str) -> None:
        self.actions.append(DropPeer(member))

    def discard_queued(self) -> None:
        self.actions.append(DiscardQueued())

    def restart_streams(self) -> None:
        self.actions.append(RestartStreams())

    def join_settled(self, error: str | None) -> None:
        self.actions.append(JoinSettled(error))

    def left_session(self) -> None:
        self.actions.append(LeftSession())

    def relay_allowed(self, allowed: bool) -> None:
        self.actions.append(RelayAllowed(allowed))

    def peer_addresses(self, addresses: dict[str, str]) -> None:
        self.actions.append(PeerAddresses(addresses))

    def state_pending(self) -> None:
        self.actions.append(StatePending())

    def state_settled(self) -> None:
        self.actions.append(StateSettled())

    def frames_uncompressed(self) -> None:
        self.actions.append(FramesUncompressed())
