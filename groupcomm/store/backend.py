"""The session store's interface (docs/storage.md): what a backend keeps per session of an
application (a generation id, the latest snapshot and the relayed messages after it) and
:func:`open_store`, which picks the backend from a location: a path is SQLite
(:mod:`groupcomm.store.sqlite`), ``postgresql://...`` the PostgreSQL backend when one is
installed (a module ``groupcomm.store.postgresql`` with ``open_backend(url)``).

A backend is used from one thread (the session server's). Writes (:meth:`create_session`,
:meth:`append`, :meth:`put_snapshot`, :meth:`drop`) take effect for readers of other
connections only at :meth:`commit`; a failure raises :class:`StoreError` and leaves
what was committed before intact.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

__all__ = ["SCHEMA_NAME", "SCHEMA_UPGRADABLE", "SCHEMA_VERSION", "SessionInfo",
           "StoreBackend", "StoreError", "StoredMessage", "StoredSession", "StoredSnapshot",
           "open_store", "unpack_clock"]

#: what a store calls itself, so a foreign database is told apart from ours
SCHEMA_NAME = "groupcomm-session-store"
#: the layout this code reads and writes; version 1 (without the sessions' "behind"
#: mark) is converted when opened, any other is refused, never converted blindly
SCHEMA_VERSION = 2
#: the layout converted on opening: what version 2 adds to it
SCHEMA_UPGRADABLE = "1"

#: URL schemes of the PostgreSQL backend
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class StoreError(Exception):
    """The store cannot be opened or written; the message is one line for the user."""


@dataclass(frozen=True)
class StoredMessage:
    """One relayed application message as it travelled: its application-level id, its
    sender's member id, its payload (``fmt`` and bytes of :mod:`groupcomm.wire.payload`,
    never decoded by the store) and its tag (``vc``, the sender's application clock).
    ``seq`` orders a session's messages (the server's arrival order); a backend assigns
    it on append."""

    message_id: str
    sender: str
    fmt: int
    payload: bytes
    seq: int = 0
    vc: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class StoredSnapshot:
    """A member's snapshot: the state (``fmt``/``data`` as a payload), the ids of the
    messages it reflects, the member's application clock, when (``taken_at``, seconds
    since the epoch) and from whom (``source``, a member id)."""

    fmt: int
    data: bytes
    reflected: tuple[str, ...] = ()
    clock: tuple[tuple[str, int], ...] = ()
    taken_at: float = 0.0
    source: str = ""


@dataclass(frozen=True)
class SessionInfo:
    """What :meth:`StoreBackend.sessions` lists about one stored session."""

    application: str
    session: str
    generation: str
    created_at: float
    snapshot_size: int | None
    snapshot_at: float | None
    messages: int
    #: marked after a store failure until a snapshot of a member holding the state is
    #: kept: what it holds has a gap, and it is handed to no newcomer meanwhile
    behind: bool = False


@dataclass(frozen=True)
class StoredSession:
    """A stored session in full: the latest snapshot (None before the first one) and the
    messages after it in arrival order."""

    info: SessionInfo
    snapshot: StoredSnapshot | None
    messages: list[StoredMessage] = field(default_factory=list)


class StoreBackend(ABC):
    """Where sessions are kept. Sessions are named ``(application, session)``."""

    #: where it is, for messages (a path or a URL without its password)
    location: str = ""

    @abstractmethod
    def sessions(self) -> list[SessionInfo]:
        """Every stored session (committed state), ordered by application then name."""

    @abstractmethod
    def load(self, application: str, session: str) -> StoredSession | None:
        """The session in full, or None when it is not stored."""

    @abstractmethod
    def create_session(self, application: str, session: str, generation: str,
                       created_at: float) -> None:
        """Start keeping a session (empty, under ``generation``: a snapshot or messages
        left under its name without a session are removed); :class:`StoreError` if it
        exists already."""

    @abstractmethod
    def append(self, application: str, session: str,
               messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        """Add relayed messages after the others, in order; returns them with their
        ``seq``. A message whose id the session has already is left out (and not
        returned): a message is never kept twice."""

    @abstractmethod
    def put_snapshot(self, application: str, session: str, snapshot: StoredSnapshot,
                     covered: Collection[str]) -> int:
        """Replace the session's snapshot, and drop its messages whose id is in
        ``covered`` (those the snapshot reflects); returns how many were dropped."""

    @abstractmethod
    def behind(self) -> set[tuple[str, str]]:
        """The sessions marked behind (committed state): their kept history misses
        what was relayed while the store failed, until a holder's snapshot is kept."""

    @abstractmethod
    def set_behind(self, application: str, session: str, behind: bool) -> None:
        """Mark the session behind, or whole again (with the snapshot that makes it so)."""

    @abstractmethod
    def drop(self, application: str, session: str) -> bool:
        """Forget a session; False when it was not stored."""

    @abstractmethod
    def commit(self) -> None:
        """Make every write since the last commit durable (one transaction)."""

    @abstractmethod
    def rollback(self) -> None:
        """Forget every write since the last commit."""

    @abstractmethod
    def close(self) -> None:
        """Close, without committing."""

    def _stored_session(self, info: SessionInfo, snapshot: Sequence[Any] | None,
                        messages: Iterable[Sequence[Any]]) -> StoredSession:
        """The session ``info`` as a backend read it: its ``snapshot`` row (fmt, data,
        reflected, clock, taken_at, source; None without one) and ``messages`` rows (seq,
        message_id, sender, fmt, payload, vc) in order. Damage raises :class:`StoreError`."""
        where = f"{info.application}/{info.session}"
        stored = None
        if snapshot is not None:
            fmt, data, reflected, clock, taken_at, source = snapshot
            try:
                reflected_ids = tuple(msgpack.unpackb(reflected))
                clock_pairs = unpack_clock(clock)
            except (ValueError, TypeError, msgpack.UnpackException) as error:
                raise StoreError(f"store {self.location}: the snapshot of {where} is "
                                 f"damaged ({error})") from None
            stored = StoredSnapshot(fmt, bytes(data), reflected_ids, clock_pairs, taken_at,
                                    source)
        try:
            kept = [StoredMessage(message_id, sender, fmt, bytes(payload), int(seq),
                                  unpack_clock(vc))
                    for seq, message_id, sender, fmt, payload, vc in messages]
        except (ValueError, TypeError, msgpack.UnpackException) as error:
            raise StoreError(f"store {self.location}: a message of {where} is damaged "
                             f"({error})") from None
        return StoredSession(info, stored, kept)


def unpack_clock(data: bytes) -> tuple[tuple[str, int], ...]:
    """A clock as a backend keeps it (msgpack pairs) as sorted ``(member, count)`` pairs."""
    return tuple((str(k), int(v)) for k, v in msgpack.unpackb(data))


def open_store(location: str, *, create: bool = True) -> StoreBackend:
    """The backend for ``location``: a path (SQLite) or a ``postgresql://`` URL.
    ``create`` False refuses a store that does not exist yet (for reading commands).
    Raises :class:`StoreError` with one line."""
    if location.startswith(POSTGRES_SCHEMES):
        try:
            # each backend is a module with open_backend(location, create=); loaded by
            # name, so that this interface does not depend on its implementations
            module = importlib.import_module("groupcomm.store.postgresql")
        except ModuleNotFoundError as error:
            if error.name != "groupcomm.store.postgresql":
                raise StoreError(f"the PostgreSQL store needs {error.name!r}, which is not "
                                 "installed") from None
            raise StoreError("this groupcomm has no PostgreSQL store backend; give --store "
                             "a file path (SQLite)") from None
        return module.open_backend(location, create=create)
    if "://" in location:
        raise StoreError(f"store {location!r}: not a path, and not a postgresql:// URL")
    return importlib.import_module("groupcomm.store.sqlite").open_backend(  # type: ignore[no-any-return]
        location, create=create)
