"""The PostgreSQL session store (psycopg 3), for session servers on several machines
sharing one database (docs/storage_postgresql.md).

Everything lives in the schema ``groupcomm`` of the database the URL names; it is created
on first use (under an advisory lock, so servers starting together do not race). A
message counts as stored when the transaction holding it commits, as with SQLite.

When the connection breaks (PostgreSQL restarted or unreachable), the writes of the open
transaction are lost and the call raises :class:`StoreError`; the next call reconnects
(at most one attempt per :attr:`PostgresStore.retry_interval`, so an outage does not stall
the session server on connection timeouts). A call that had nothing uncommitted is
retried once on a fresh connection, so an idle server does not notice a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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

try:
    import psycopg
    from psycopg import sql
except ModuleNotFoundError as missing:  # an install without the [postgresql] extra
    if missing.name not in ("psycopg", "psycopg.sql"):
        raise
    psycopg = None  # type: ignore[assignment]

__all__ = ["PG_SCHEMA", "PostgresStore", "open_backend", "redact"]

log = logging.getLogger(__name__)

#: the PostgreSQL schema (namespace) holding the store's tables
PG_SCHEMA = "groupcomm"

#: a lock id of our own for pg_advisory_xact_lock while the schema is created
_SCHEMA_LOCK = 0x6772_6F75_7063_6F6D  # "groupcom"

_TABLES = """
CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE {s}.sessions (
    application text NOT NULL, session text NOT NULL, generation text NOT NULL,
    created_at double precision NOT NULL, behind boolean NOT NULL DEFAULT false,
    PRIMARY KEY (application, session));
CREATE TABLE {s}.snapshots (
    application text NOT NULL, session text NOT NULL, fmt integer NOT NULL,
    data bytea NOT NULL, reflected bytea NOT NULL, clock bytea NOT NULL,
    taken_at double precision NOT NULL, source text NOT NULL,
    PRIMARY KEY (application, session));
CREATE TABLE {s}.messages (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, application text NOT NULL,
    session text NOT NULL, message_id text NOT NULL, sender text NOT NULL,
    fmt integer NOT NULL, payload bytea NOT NULL, vc bytea NOT NULL,
    UNIQUE (application, session, message_id))
"""

#: libpq settings unless the URL gives them: the wait for a connection (seconds), TCP
#: keepalives, and the longest wait for the database to acknowledge data (milliseconds)
DEFAULT_CONNECTION: dict[str, str | int] = {
    "connect_timeout": 5, "application_name": "groupcomm", "keepalives": 1,
    "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
    "tcp_user_timeout": 30000}

T = TypeVar("T")


def redact(url: str) -> str:
    """``url`` without its password (in the authority or as ``password=``), for
    messages and logs."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, hosts = netloc.rpartition("@")
        netloc = f"{credentials.split(':', 1)[0]}@{hosts}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _pack_clock(clock: Sequence[tuple[str, int]]) -> bytes:
    return msgpack.packb([list(pair) for pair in clock])


def open_backend(url: str, *, create: bool = True) -> PostgresStore:
    """The store at ``url`` (``postgresql://`` or ``postgres://``); what
    :func:`groupcomm.store.backend.open_store` calls."""
    if psycopg is None:
        raise StoreError("the PostgreSQL store needs psycopg 3, which is not installed "
                         "(pip install 'groupcomm[postgresql]')")
    return PostgresStore(url, create=create)


class PostgresStore(StoreBackend):
    """A store in the database at ``url``; ``create`` False refuses a database without
    one. ``retry_interval``: the least time between two reconnection attempts."""

    def __init__(self, url: str, *, create: bool = True, retry_interval: float = 1.0
                 ) -> None:
        self.location = redact(url)
        self.retry_interval = retry_interval
        #: connections made after the first (PostgreSQL restarted or unreachable)
        self.reconnects = 0
        #: calls that failed because the connection broke
        self.connection_failures = 0
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as error:
            raise StoreError(f"store {self.location}: not a usable PostgreSQL URL "
                             f"({_one_line(error)})") from None
        # a database on another machine can vanish without a word (a cable, a firewall):
        # TCP keepalives find an idle connection dead, and tcp_user_timeout bounds how
        # long a statement waits for unacknowledged data, so the server's turn is not
        # held for the kernel's 15-minute default. The URL can say otherwise.
        for key, value in DEFAULT_CONNECTION.items():
            params.setdefault(key, value)
        self._params = params
        self._conn: psycopg.Connection[Any] | None = None
        self._dirty = False  # writes since the last commit
        self._rowcount = 0  # rows the last write touched
        self._last_attempt = 0.0
        self._connect()
        try:
            self._prepare(create)
        except psycopg.Error as error:
            self.close()
            raise StoreError(f"store {self.location}: cannot set up the store: "
                             f"{_one_line(error)}") from None
        except StoreError:
            self.close()
            raise

    # -- the connection ------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        self._last_attempt = time.monotonic()
        try:
            self._conn = psycopg.connect(**self._params)
        except psycopg.Error as error:
            self._conn = None
            raise StoreError(f"store {self.location}: cannot connect: {_one_line(error)}") \
                from None
        return self._conn

    def _connection(self) -> psycopg.Connection[Any]:
        """The open connection, reconnecting when it broke (not more often than every
        ``retry_interval``)."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        wait = self._last_attempt + self.retry_interval - time.monotonic()
        if wait > 0:
            raise StoreError(f"store {self.location}: no connection (next attempt in "
                             f"{wait:.1f} s)")
        conn = self._connect()
        self.reconnects += 1
        log.warning("store %s: connected again", self.location)
        return conn

    def _run(self, work: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """``work`` on the connection; a broken connection with nothing uncommitted is
        retried once on a new one. Errors become one-line :class:`StoreError`."""
        for attempt in (1, 2):
            pending = self._dirty
            try:
                return work(self._connection())
            except psycopg.OperationalError as error:
                broken = self._conn is None or self._conn.closed or self._conn.broken
                if not broken:
                    self._abort()
                    raise StoreError(f"store {self.location}: {what} failed: "
                                     f"{_one_line(error)}") from None
                self.connection_failures += 1
                self._drop_connection()
                if pending or attempt == 2:
                    lost = " (the uncommitted writes are lost)" if pending else ""
                    raise StoreError(f"store {self.location}: connection lost{lost}: "
                                     f"{_one_line(error)}") from None
                self._last_attempt = 0.0  # retry at once: nothing was pending
            except psycopg.Error as error:
                self._abort()
                raise StoreError(f"store {self.location}: {what} failed: "
                                 f"{_one_line(error)}") from None
        raise AssertionError("unreachable")

    def _drop_connection(self) -> None:
        self._dirty = False
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
        self._conn = None

    def _abort(self) -> None:
        """Roll the open transaction back after a failed statement (PostgreSQL refuses
        every later statement of it)."""
        self._dirty = False
        if self._conn is not None and not self._conn.closed:
            try:
                self._conn.rollback()
            except psycopg.Error as error:
                log.warning("store %s: rollback: %s", self.location, _one_line(error))
                self._drop_connection()

    def _prepare(self, create: bool) -> None:
        conn = self._connection()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            tables = {row[0] for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (PG_SCHEMA,))}
            if not tables:
                if not create:
                    raise StoreError(f"store {self.location}: no groupcomm store in this "
                                     "database")
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(PG_SCHEMA)))
                for statement in _TABLES.split(";"):
                    conn.execute(sql.SQL(statement).format(s=sql.Identifier(PG_SCHEMA)))
                conn.execute(f"INSERT INTO {PG_SCHEMA}.meta VALUES (%s, %s), (%s, %s)",
                             ("schema", SCHEMA_NAME, "version", str(SCHEMA_VERSION)))
            elif "meta" not in tables:
                raise StoreError(f"store {self.location}: the schema {PG_SCHEMA!r} holds "
                                 "tables of another program; give --store another database")
            meta = dict(conn.execute(f"SELECT key, value FROM {PG_SCHEMA}.meta").fetchall())
            if (meta.get("schema") == SCHEMA_NAME
                    and meta.get("version") == SCHEMA_UPGRADABLE):
                # version 1 to 2: the sessions' "behind" mark (none is behind), under
                # the schema lock and in this transaction
                conn.execute(f"ALTER TABLE {PG_SCHEMA}.sessions ADD COLUMN behind boolean "
                             "NOT NULL DEFAULT false")
                conn.execute(f"UPDATE {PG_SCHEMA}.meta SET value = %s WHERE key = 'version'",
                             (str(SCHEMA_VERSION),))
                meta["version"] = str(SCHEMA_VERSION)
                log.warning("store %s: converted from layout version %s to %d",
                            self.location, SCHEMA_UPGRADABLE, SCHEMA_VERSION)
        if meta.get("schema") != SCHEMA_NAME:
            raise StoreError(f"store {self.location}: the schema {PG_SCHEMA!r} belongs to "
                             f"another program ({meta.get('schema')!r}); give --store "
                             "another database")
        if meta.get("version") != str(SCHEMA_VERSION):
            raise StoreError(f"store {self.location}: layout version {meta.get('version')} "
                             f"(this groupcomm reads version {SCHEMA_VERSION}); refused "
                             "rather than converted")

    # -- writes --------------------------------------------------------------------------
    def _write(self, statement: str, args: Sequence[object], what: str) -> list[tuple]:
        def work(conn: psycopg.Connection[Any]) -> list[tuple]:
            cursor = conn.execute(statement, args)
            self._dirty = True
            rows = cursor.fetchall() if cursor.description else []
            self._rowcount = cursor.rowcount
            return rows
        return self._run(work, what)

    def create_session(self, application: str, session: str, generation: str,
                       created_at: float) -> None:
        try:
            self._write(f"INSERT INTO {PG_SCHEMA}.sessions (application, session, "
                        "generation, created_at) VALUES (%s, %s, %s, %s)",
                        (application, session, generation, created_at), "write")
        except StoreError as error:
            raise StoreError(f"{error} (session {application}/{session})") from None
        for table in ("snapshots", "messages"):  # left by a server that wrote after a drop
            self._write(f"DELETE FROM {PG_SCHEMA}.{table} WHERE application = %s AND "
                        "session = %s", (application, session), "write")

    def append(self, application: str, session: str,
               messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        if not messages:
            return []
        # one statement for the batch; ON CONFLICT leaves out ids the session has (also
        # repeats within the batch), RETURNING says which went in and their seq
        rows = self._write(
            f"INSERT INTO {PG_SCHEMA}.messages (application, session, message_id, sender, "
            "fmt, payload, vc) SELECT %s, %s, m.id, m.sender, m.fmt, m.payload, m.vc FROM "
            "unnest(%s::text[], %s::text[], %s::integer[], %s::bytea[], %s::bytea[]) "
            "WITH ORDINALITY AS m(id, sender, fmt, payload, vc, n) ORDER BY m.n "
            "ON CONFLICT (application, session, message_id) DO NOTHING "
            "RETURNING message_id, seq",
            (application, session, [m.message_id for m in messages],
             [m.sender for m in messages], [m.fmt for m in messages],
             [m.payload for m in messages], [_pack_clock(m.vc) for m in messages]),
            "write")
        seqs = dict(rows)
        added = []
        for message in messages:
            seq = seqs.pop(message.message_id, None)
            if seq is not None:
                added.append(StoredMessage(message.message_id, message.sender, message.fmt,
                                           message.payload, int(seq), message.vc))
        added.sort(key=lambda m: m.seq)
        return added

    def put_snapshot(self, application: str, session: str, snapshot: StoredSnapshot,
                     covered: Collection[str]) -> int:
        self._write(
            f"INSERT INTO {PG_SCHEMA}.snapshots VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (application, session) DO UPDATE SET fmt = EXCLUDED.fmt, "
            "data = EXCLUDED.data, reflected = EXCLUDED.reflected, clock = EXCLUDED.clock, "
            "taken_at = EXCLUDED.taken_at, source = EXCLUDED.source",
            (application, session, snapshot.fmt, snapshot.data,
             msgpack.packb(list(snapshot.reflected)), _pack_clock(snapshot.clock),
             snapshot.taken_at, snapshot.source), "write")
        if not covered:
            return 0
        self._write(f"DELETE FROM {PG_SCHEMA}.messages WHERE application = %s AND "
                    "session = %s AND message_id = ANY(%s::text[])",
                    (application, session, list(covered)), "write")
        return self._rowcount

    def set_behind(self, application: str, session: str, behind: bool) -> None:
        self._write(f"UPDATE {PG_SCHEMA}.sessions SET behind = %s WHERE application = %s "
                    "AND session = %s", (behind, application, session), "write")

    def drop(self, application: str, session: str) -> bool:
        key = (application, session)
        self._write(f"DELETE FROM {PG_SCHEMA}.sessions WHERE application = %s AND "
                    "session = %s", key, "write")
        found = self._rowcount > 0
        for table in ("snapshots", "messages"):
            self._write(f"DELETE FROM {PG_SCHEMA}.{table} WHERE application = %s AND "
                        "session = %s", key, "write")
        return found

    def commit(self) -> None:
        if not self._dirty:
            return
        conn = self._conn
        try:
            if conn is None or conn.closed:
                raise psycopg.OperationalError("the connection is closed")
            conn.commit()
        except psycopg.Error as error:
            # a commit cut off by a broken connection may or may not have taken effect:
            # writing the same messages again is safe (a message is never kept twice)
            self.connection_failures += conn is None or conn.closed or conn.broken
            self._abort()
            raise StoreError(f"store {self.location}: commit failed (the uncommitted "
                             f"writes are lost): {_one_line(error)}") from None
        self._dirty = False

    def rollback(self) -> None:
        self._abort()

    def close(self) -> None:
        self._abort()
        self._drop_connection()

    # -- reads ---------------------------------------------------------------------------
    def _reading(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work``'s reads in one transaction (a consistent view of the store)."""
        def wrapped(conn: psycopg.Connection[Any]) -> T:
            result = work(conn)
            if not self._dirty:
                # end the read's transaction: an idle server holds no snapshot open
                conn.rollback()
            return result
        return self._run(wrapped, "read")

    def sessions(self) -> list[SessionInfo]:
        return self._reading(lambda conn: self._infos(conn, "", ()))

    def behind(self) -> set[tuple[str, str]]:
        return self._reading(lambda conn: {(a, s) for a, s in conn.execute(
            f"SELECT application, session FROM {PG_SCHEMA}.sessions WHERE behind")})

    def _infos(self, conn: psycopg.Connection[Any], where: str, args: Sequence[object]
               ) -> list[SessionInfo]:
        rows = conn.execute(
            "SELECT s.application, s.session, s.generation, s.created_at, "
            "octet_length(p.data), p.taken_at, (SELECT count(*) FROM "
            f"{PG_SCHEMA}.messages m WHERE m.application = s.application AND m.session = "
            f"s.session), s.behind FROM {PG_SCHEMA}.sessions s LEFT JOIN {PG_SCHEMA}.snapshots p ON "
            f"p.application = s.application AND p.session = s.session {where} "
            # byte order, as SQLite sorts, whatever the database's collation
            'ORDER BY s.application COLLATE "C", s.session COLLATE "C"', args).fetchall()
        return [SessionInfo(application, session, generation, created_at, size, taken_at,
                            int(count), bool(behind))
                for application, session, generation, created_at, size, taken_at, count,
                behind in rows]

    def load(self, application: str, session: str) -> StoredSession | None:
        key = (application, session)

        def work(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
            found = self._infos(conn, "WHERE s.application = %s AND s.session = %s", key)
            if not found:
                return None
            snapshot = conn.execute(
                f"SELECT fmt, data, reflected, clock, taken_at, source FROM {PG_SCHEMA}."
                "snapshots WHERE application = %s AND session = %s", key).fetchone()
            messages = conn.execute(
                f"SELECT seq, message_id, sender, fmt, payload, vc FROM {PG_SCHEMA}.messages "
                "WHERE application = %s AND session = %s ORDER BY seq", key).fetchall()
            return found[0], snapshot, messages

        read = self._reading(work)
        if read is None:
            return None
        return self._stored_session(*read)
