"""The SQLite session store (stdlib :mod:`sqlite3`, WAL journal): one file holds every
session. A file that is not SQLite, a SQLite file of another program or another layout
version, and a write that fails (disk full, I/O error) raise :class:`StoreError` with one
line; a failed transaction is rolled back, so what was committed before stays intact.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Collection, Sequence

import msgpack

from groupcomm.store.backend import (
    SCHEMA_NAME,
    SCHEMA_UPGRADABLE,
    SCHEMA_VERSION,
    SessionInfo,
    StoreBackend,
    StoredMessage,
    StoredSession,
    StoredSnapshot,
    StoreError,
)

__all__ = ["SQLiteStore", "open_backend"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    application TEXT NOT NULL, session TEXT NOT NULL, generation TEXT NOT NULL,
    created_at REAL NOT NULL, behind INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (application, session));
CREATE TABLE snapshots (
    application TEXT NOT NULL, session TEXT NOT NULL, fmt INTEGER NOT NULL,
    data BLOB NOT NULL, reflected BLOB NOT NULL, clock BLOB NOT NULL,
    taken_at REAL NOT NULL, source TEXT NOT NULL, PRIMARY KEY (application, session));
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, application TEXT NOT NULL,
    session TEXT NOT NULL, message_id TEXT NOT NULL, sender TEXT NOT NULL,
    fmt INTEGER NOT NULL, payload BLOB NOT NULL, vc BLOB NOT NULL, UNIQUE (application, session, message_id));
"""


def _pack_clock(clock: Sequence[tuple[str, int]]) -> bytes:
    return msgpack.packb([list(pair) for pair in clock])


def _one_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class SQLiteStore(StoreBackend):
    """``path``: the database file (created with its schema when ``create``).
    ``synchronous``: SQLite's setting; FULL (the default) makes a commit survive a power
    loss, NORMAL only a crash of the process (in WAL mode)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 synchronous: str = "FULL") -> None:
        self.location = str(path)
        if synchronous not in ("FULL", "NORMAL", "OFF"):
            raise ValueError(f"synchronous must be FULL, NORMAL or OFF, not {synchronous!r}")
        exists = os.path.exists(self.location)
        if not exists and not create:
            raise StoreError(f"store {self.location}: no such file")
        try:
            # autocommit mode: transactions are begun and committed here, explicitly
            self._db = sqlite3.connect(self.location, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as error:
            raise StoreError(f"store {self.location}: cannot open: {_one_line(error)}") \
                from None
        try:
            self._open(synchronous)
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise StoreError(f"store {self.location}: not a usable SQLite database "
                             f"({_one_line(error)})") from None
        except StoreError:
            self._db.close()
            raise
        self._in_transaction = False

    def _open(self, synchronous: str) -> None:
        db = self._db
        tables = {row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.executemany("INSERT INTO meta VALUES (?, ?)",
                           [("schema", SCHEMA_NAME), ("version", str(SCHEMA_VERSION))])
            db.execute("COMMIT")
        elif "meta" not in tables:
            raise StoreError(f"store {self.location}: a SQLite file of another program (no "
                             "groupcomm schema); give --store a new path")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != SCHEMA_NAME:
            raise StoreError(f"store {self.location}: a SQLite file of another program "
                             f"(schema {meta.get('schema')!r}); give --store a new path")
        if meta.get("version") == SCHEMA_UPGRADABLE:
            self._upgrade()
        elif meta.get("version") != str(SCHEMA_VERSION):
            raise StoreError(f"store {self.location}: layout version {meta.get('version')} "
                             f"(this groupcomm reads version {SCHEMA_VERSION}); refused "
                             "rather than converted")
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StoreError(f"store {self.location}: cannot use WAL journal mode ({mode})")
        db.execute(f"PRAGMA synchronous={synchronous}")
        problem = db.execute("PRAGMA quick_check").fetchone()[0]
        if problem != "ok":
            raise StoreError(f"store {self.location}: damaged ({problem})")

    def _upgrade(self) -> None:
        """Version 1 to 2: the sessions' "behind" mark (none is behind), in one
        transaction, so a failure leaves the file as it was."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ALTER TABLE sessions ADD COLUMN behind INTEGER NOT NULL DEFAULT 0")
            db.execute("UPDATE meta SET value = ? WHERE key = 'version'",
                       (str(SCHEMA_VERSION),))
            db.execute("COMMIT")
        except sqlite3.Error as error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(f"store {self.location}: cannot convert layout version "
                             f"{SCHEMA_UPGRADABLE} to {SCHEMA_VERSION}: "
                             f"{_one_line(error)}") from None
        log.warning("store %s: converted from layout version %s to %d", self.location,
                    SCHEMA_UPGRADABLE, SCHEMA_VERSION)

    # -- writes ----------------------------------------------------------------------------
    def _write(self, sql: str, args: Sequence[object] = ()) -> sqlite3.Cursor:
        try:
            if not self._in_transaction:
                self._db.execute("BEGIN IMMEDIATE")
                self._in_transaction = True
            return self._db.execute(sql, args)
        except sqlite3.Error as error:
            self.rollback()
            raise StoreError(f"store {self.location}: write failed: {_one_line(error)}") \
                from None

    def create_session(self, application: str, session: str, generation: str,
                       created_at: float) -> None:
        try:
            self._write("INSERT INTO sessions (application, session, generation, "
                        "created_at) VALUES (?, ?, ?, ?)",
                        (application, session, generation, created_at))
        except StoreError as error:
            raise StoreError(f"{error} (session {application}/{session})") from None
        for table in ("snapshots", "messages"):  # left by a server that wrote after a drop
            self._write(f"DELETE FROM {table} WHERE application = ? AND session = ?",
                        (application, session))

    def append(self, application: str, session: str,
               messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        added = []
        for message in messages:
            cursor = self._write(
                "INSERT OR IGNORE INTO messages (application, session, message_id, sender, "
                "fmt, payload, vc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (application, session, message.message_id, message.sender, message.fmt,
                 message.payload, _pack_clock(message.vc)))
            if cursor.rowcount == 1:
                added.append(StoredMessage(message.message_id, message.sender, message.fmt,
                                           message.payload, int(cursor.lastrowid or 0),
                                           message.vc))
        return added

    def put_snapshot(self, application: str, session: str, snapshot: StoredSnapshot,
                     covered: Collection[str]) -> int:
        self._write("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (application, session, snapshot.fmt, snapshot.data,
                     msgpack.packb(list(snapshot.reflected)),
                     _pack_clock(snapshot.clock),
                     snapshot.taken_at, snapshot.source))
        dropped = 0
        ids = list(covered)
        for start in range(0, len(ids), 500):  # SQLite limits the parameters of a statement
            chunk = ids[start:start + 500]
            cursor = self._write(
                "DELETE FROM messages WHERE application = ? AND session = ? AND message_id "
                f"IN ({', '.join('?' * len(chunk))})", (application, session, *chunk))
            dropped += cursor.rowcount
        return dropped

    def set_behind(self, application: str, session: str, behind: bool) -> None:
        self._write("UPDATE sessions SET behind = ? WHERE application = ? AND session = ?",
                    (int(behind), application, session))

    def drop(self, application: str, session: str) -> bool:
        found = self._write("DELETE FROM sessions WHERE application = ? AND session = ?",
                            (application, session)).rowcount
        for table in ("snapshots", "messages"):
            self._write(f"DELETE FROM {table} WHERE application = ? AND session = ?",
                        (application, session))
        return found > 0

    def commit(self) -> None:
        if not self._in_transaction:
            return
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as error:
            self.rollback()
            raise StoreError(f"store {self.location}: commit failed: {_one_line(error)}") \
                from None
        self._in_transaction = False

    def rollback(self) -> None:
        self._in_transaction = False
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error as error:  # SQLite may have rolled back already
            log.warning("store %s: rollback: %s", self.location, _one_line(error))

    def close(self) -> None:
        self.rollback()
        self._db.close()

    # -- reads -----------------------------------------------------------------------------
    def _read(self, sql: str, args: Sequence[object] = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"store {self.location}: read failed: {_one_line(error)}") \
                from None

    def sessions(self) -> list[SessionInfo]:
        return self._infos("", ())

    def behind(self) -> set[tuple[str, str]]:
        return {(a, s) for a, s in self._read(
            "SELECT application, session FROM sessions WHERE behind != 0")}

    def _infos(self, where: str, args: Sequence[object]) -> list[SessionInfo]:
        rows = self._read(
            "SELECT s.application, s.session, s.generation, s.created_at, length(p.data), "
            "p.taken_at, (SELECT count(*) FROM messages m WHERE m.application = "
            "s.application AND m.session = s.session), s.behind != 0 FROM sessions s LEFT JOIN "
            "snapshots p "
            f"ON p.application = s.application AND p.session = s.session {where} "
            "ORDER BY s.application, s.session", args)
        return [SessionInfo(*row[:7], behind=bool(row[7])) for row in rows]

    def load(self, application: str, session: str) -> StoredSession | None:
        key = (application, session)
        found = self._infos("WHERE s.application = ? AND s.session = ?", key)
        if not found:
            return None
        rows = self._read("SELECT fmt, data, reflected, clock, taken_at, source FROM "
                          "snapshots WHERE application = ? AND session = ?", key)
        messages = self._read("SELECT seq, message_id, sender, fmt, payload, vc FROM messages "
                              "WHERE application = ? AND session = ? ORDER BY seq", key)
        return self._stored_session(found[0], rows[0] if rows else None, messages)


def open_backend(location: str, *, create: bool = True) -> SQLiteStore:
    """The SQLite store at the path ``location`` (see :func:`~groupcomm.store.backend.open_store`)."""
    return SQLiteStore(location, create=create)
