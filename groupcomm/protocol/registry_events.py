"""The inputs and actions of :class:`~groupcomm.protocol.registry.SessionRegistry`, and
the input a verified session command (:func:`command_input`) or routed frame
(:func:`routed_input`) asks for. Connections are opaque hashable values (ZeroMQ routing
identities in the server, process names in the checker).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Action", "BadCommand", "Connection", "Forward", "Heartbeat", "Input", "Join",
    "KeepSnapshot", "Leave", "Notify", "Rejected", "Relay", "Return", "SnapshotGiven", "StateHeld",
    "Tick",
    "command_input", "routed_input",
]

Connection = Hashable


class BadCommand(ValueError):
    """A session command with missing or wrongly typed fields (the peer's mistake)."""


@dataclass(frozen=True)
class _FromClient:
    conn: Connection
    client: str
    application: str
    session: str
    now: float


@dataclass(frozen=True)
class Join(_FromClient):
    """A client asks to join ``session`` of ``application`` as ``client``."""

    #: where peers push frames to it (direct routing); may be empty
    address: str = ""
    #: the incarnation it had (0 on a first join): kept after a restart of this server
    incarnation: int = 0
    wants_state: bool = False
    #: the name its per-client key authenticates, when keys are in use
    user: str | None = None
    #: the store generation it was told when it last joined ("" if none; see
    #: docs/storage.md)
    generation: str = ""
    #: it holds the session's state (a live client coming back; never a new process)
    has_state: bool = False
    #: a live client coming back: the highest incarnation of each name of the session
    #: it has seen, so that a new process under one of them is numbered above it
    known: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Leave(_FromClient):
    """A member leaves; ``direct_frames`` counts the frames it pushed to each peer
    (``counts_valid`` False: they were malformed, and the leave still counts)."""

    direct_frames: Mapping[str, int] = field(default_factory=dict)
    counts_valid: bool = True


@dataclass(frozen=True)
class Heartbeat(_FromClient):
    """A client is alive; ``probe`` echoes the number of a probe it answers."""

    probe: int | None = None


@dataclass(frozen=True)
class Relay(_FromClient):
    """A member asks to relay ``frame`` (opaque bytes) to member ids ``dests``."""

    dests: tuple[str, ...]
    frame: bytes


@dataclass(frozen=True)
class SnapshotGiven(_FromClient):
    """A member answers the store's snapshot request numbered ``request``: the state as
    a payload (``fmt``, ``data``), the ids it reflects and the member's application
    clock; ``available`` False: it has none to give."""

    request: int
    available: bool
    fmt: int = 0
    data: bytes = b""
    reflected: tuple[str, ...] = ()
    clock: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class StateHeld(_FromClient):
    """A member installed the session's state from another member (for the store:
    from now on it may be asked for snapshots)."""


@dataclass(frozen=True)
class PartReceived:
    """A part of a command larger than a frame came from ``conn``; the command is
    handled once its last part came (:func:`groupcomm.wire.session.whole_session`)."""

    conn: Connection
    now: float


@dataclass(frozen=True)
class Tick:
    """Time passed. ``caught_up_at`` is the last moment the host had read all its input:
    silence is judged against it, not against ``now``, so a host that falls behind under
    load does not declare busy, live clients gone."""

    now: float
    caught_up_at: float


Input = Join | Leave | Heartbeat | Relay | SnapshotGiven | StateHeld | PartReceived | Tick


@dataclass(frozen=True)
class Notify:
    conn: Connection
    op: str
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class Forward:
    """Hand the relayed ``frame`` to ``conn``; ``sender`` is the member id it came from
    (attested to the receiver when per-client keys are in use)."""

    conn: Connection
    frame: bytes
    sender: str


@dataclass(frozen=True)
class Return:
    """Give ``frame`` back to ``conn``, which is not a member, with a ``not_a_member``
    error naming its destinations, so it can send it again once it joined again."""

    conn: Connection
    frame: bytes
    dests: tuple[str, ...]


@dataclass(frozen=True)
class Rejected:
    reason: str
    detail: str
    peer: str


@dataclass(frozen=True)
class KeepSnapshot:
    """A member's answer to the store's snapshot request, for the host's store."""

    given: SnapshotGiven
    member: str


Action = Notify | Forward | Return | Rejected | KeepSnapshot


def _text(command: Mapping[str, Any], key: str) -> str:
    value = command.get(key)
    if not isinstance(value, str) or not value:
        raise BadCommand(f"{key} must be a non-empty string, not {value!r}")
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _snapshot_input(command: Mapping[str, Any], common: dict[str, Any]) -> SnapshotGiven:
    request, available = command.get("request"), command.get("available")
    if not _count(request) or not isinstance(available, bool):
        raise BadCommand("request must be an integer and available a boolean")
    if not available:
        return SnapshotGiven(**common, request=request, available=False)
    fmt, data = command.get("fmt"), command.get("data")
    reflected, clock = command.get("reflected"), command.get("clock")
    if not _count(fmt) or not isinstance(data, bytes):
        raise BadCommand("a snapshot needs fmt (an integer) and data (bytes)")
    if not isinstance(reflected, list) or not all(isinstance(r, str) for r in reflected):
        raise BadCommand("reflected must be a list of message ids")
    if not isinstance(clock, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and _count(p[1])
            for p in clock):
        raise BadCommand("clock must be a list of [member, count] pairs")
    return SnapshotGiven(**common, request=request, available=True, fmt=fmt, data=data,
                         reflected=tuple(reflected),
                         clock=tuple((p[0], p[1]) for p in clock))


#: names a join may tell the incarnations of (the most recent a client saw)
MAX_KNOWN_NAMES = 4096
#: the highest incarnation a join may tell (beyond: ignored)
MAX_KNOWN_INCARNATION = 2**31


def _known(value: Any) -> tuple[tuple[str, int], ...]:
    """A join's ``known`` map (name -> incarnation), checked; BadCommand names the fault."""
    if value is None:
        return ()
    if not isinstance(value, Mapping) or len(value) > MAX_KNOWN_NAMES:
        raise BadCommand(f"known must be a map of at most {MAX_KNOWN_NAMES} names")
    known = []
    for name, incarnation in value.items():
        if not (isinstance(name, str) and name and _count(incarnation)
                and 1 <= incarnation < MAX_KNOWN_INCARNATION):
            raise BadCommand(f"known: {name!r} -> {incarnation!r} is not a name and an "
                             "incarnation")
        known.append((name, incarnation))
    return tuple(known)


def command_input(command: Mapping[str, Any], conn: Connection, now: float, *,
                  user: str | None = None
                  ) -> Join | Leave | Heartbeat | SnapshotGiven | StateHeld:
    """The typed input for a verified, decoded session command; ``user`` is the name the
    client's key authenticates. Raises :class:`BadCommand` naming the field or op at
    fault."""
    op = command.get("op")
    common = dict(conn=conn, client=_text(command, "client"),
                  application=_text(command, "application"),
                  session=_text(command, "session"), now=now)
    if op == "join":
        address = command.get("address", "")
        if not isinstance(address, str):
            raise BadCommand(f"address must be a string, not {address!r}")
        incarnation = command.get("incarnation", 0)
        generation = command.get("generation", "")
        return Join(**common, address=address,
                    incarnation=incarnation if _count(incarnation) else 0,
                    wants_state=command.get("wants_state") is True, user=user,
                    generation=generation if isinstance(generation, str) else "",
                    has_state=command.get("has_state") is True,
                    known=_known(command.get("known")))
    if op == "leave":
        direct = command.get("direct_frames", {})
        valid = isinstance(direct, Mapping) and all(
            isinstance(k, str) and _count(v) and v >= 0 for k, v in direct.items())
        return Leave(**common, direct_frames=dict(direct) if valid else {}, counts_valid=valid)
    if op == "heartbeat":
        probe = command.get("probe")
        return Heartbeat(**common, probe=probe if _count(probe) else None)
    if op == "snapshot":
        return _snapshot_input(command, common)
    if op == "state":
        return StateHeld(**common)
    raise BadCommand(f"op {op!r} is not a client's command (join, leave, heartbeat, "
                     "snapshot or state)")


def routed_input(by_conn: Mapping[Connection, tuple[str, str, str]], conn: Connection,
                 now: float, dests: tuple[str, ...], frame: bytes) -> Relay:
    """The relay a routed frame asks for, as the member ``conn`` joined as (``by_conn`` is
    the registry's); a connection that is no member asks as nobody."""
    application, session, client = by_conn.get(conn, ("", "", ""))
    return Relay(conn=conn, client=client, application=application, session=session,
                 now=now, dests=dests, frame=frame)
