"""The PostgreSQL backend against a real server (the session fixture ``postgres_server``):
bad URLs and credentials, a server that is down or restarts, a database of another
program, and two stores (two session servers) sharing one database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.store.backend import StoredMessage, StoredSnapshot, StoreError, open_store
from groupcomm.tools.pgserver import TempPostgres

psycopg = pytest.importorskip("psycopg")

from groupcomm.store.postgresql import PostgresStore, redact  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _messages(*ids: str) -> list[StoredMessage]:
    return [StoredMessage(i, i.split("#")[0], 3, i.encode(), vc=((i.split("#")[0], 1),))
            for i in ids]


def _one_line(error: pytest.ExceptionInfo[StoreError]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


@pytest.fixture
def pg(postgres_server: TempPostgres) -> Iterator[TempPostgres]:
    """The shared server, started again after a test that stopped it (also on failure)."""
    yield postgres_server
    if not postgres_server._running:
        postgres_server.start_again()


def test_the_password_never_shows(postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    store = open_store(url)
    try:
        assert postgres_server.password not in store.location
        assert store.location.startswith("postgresql://groupcomm@127.0.0.1:")
    finally:
        store.close()
    assert redact("postgresql://u:secret@h/db?password=secret&sslmode=require") == (
        "postgresql://u@h/db?sslmode=require")


def test_wrong_credentials_a_missing_database_and_a_bad_url_are_one_line_each(
        postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    with pytest.raises(StoreError) as wrong:
        open_store(url.replace(postgres_server.password, "not-the-password"))
    assert "password authentication failed" in _one_line(wrong)
    assert "not-the-password" not in str(wrong.value)
    with pytest.raises(StoreError) as missing:
        open_store(postgres_server.url("no_such_database"))
    assert 'database "no_such_database" does not exist' in _one_line(missing)
    with pytest.raises(StoreError) as bad:
        open_store("postgresql://u@127.0.0.1:notaport/db")
    assert _one_line(bad).startswith("store postgresql://u@127.0.0.1:notaport/db: ")


def test_postgresql_down_at_start_is_one_line(pg: TempPostgres) -> None:
    url = pg.create_database()
    pg.stop()
    with pytest.raises(StoreError) as down:
        open_store(url)
    assert "cannot connect" in _one_line(down) and "Connection refused" in str(down.value)


def test_reading_commands_refuse_a_database_without_a_store(
        postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    with pytest.raises(StoreError) as none:
        open_store(url, create=False)
    assert _one_line(none).endswith("no groupcomm store in this database")
    # and it created nothing
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.schemata WHERE "
                            "schema_name = 'groupcomm'").fetchone() == (0,)


def test_a_store_of_layout_version_1_is_converted_and_keeps_its_sessions(
        postgres_server: TempPostgres, caplog) -> None:
    url = postgres_server.create_database()
    store = open_store(url)
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", _messages("a#1"))
    store.commit()
    store.close()
    with psycopg.connect(url) as conn:  # as version 1 made it: no "behind" column
        conn.execute("ALTER TABLE groupcomm.sessions DROP COLUMN behind")
        conn.execute("UPDATE groupcomm.meta SET value = '1' WHERE key = 'version'")
    store = open_store(url)
    try:
        assert "converted from layout version 1 to 2" in caplog.text
        assert store.behind() == set()
        assert [m.message_id for m in store.load("ed", "doc").messages] == ["a#1"]
        store.set_behind("ed", "doc", True)
        store.commit()
        assert store.behind() == {("ed", "doc")}
    finally:
        store.close()


def test_tables_of_another_program_and_another_layout_are_refused_untouched(
        postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE SCHEMA groupcomm")
        conn.execute("CREATE TABLE groupcomm.orders (id int)")
        conn.execute("INSERT INTO groupcomm.orders VALUES (7)")
    with pytest.raises(StoreError) as foreign:
        open_store(url)
    assert "tables of another program" in _one_line(foreign)
    other = postgres_server.create_database()
    open_store(other).close()
    with psycopg.connect(other) as conn:
        conn.execute("UPDATE groupcomm.meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(StoreError) as newer:
        open_store(other)
    assert "layout version 99" in _one_line(newer)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT id FROM groupcomm.orders").fetchall() == [(7,)]


def test_a_restart_while_idle_goes_unnoticed(pg: TempPostgres) -> None:
    store = open_store(pg.create_database())
    try:
        store.create_session("ed", "doc", "g", 0.0)
        store.append("ed", "doc", _messages("a#1"))
        store.commit()
        pg.stop()
        pg.start_again()
        # nothing was uncommitted: the call is retried once on a new connection
        store.append("ed", "doc", _messages("a#2"))
        store.commit()
        assert [m.message_id for m in store.load("ed", "doc").messages] == ["a#1", "a#2"]
        assert (store.reconnects, store.connection_failures) == (1, 1)
    finally:
        store.close()


def test_a_restart_during_a_transaction_loses_only_its_writes(pg: TempPostgres) -> None:
    store = PostgresStore(pg.create_database(), retry_interval=0.0)
    try:
        store.create_session("ed", "doc", "g", 0.0)
        store.append("ed", "doc", _messages("a#1"))
        store.commit()
        store.append("ed", "doc", _messages("a#2"))  # uncommitted when PostgreSQL stops
        pg.stop()
        pg.start_again()
        with pytest.raises(StoreError) as lost:
            store.append("ed", "doc", _messages("a#3"))
        assert "connection lost (the uncommitted writes are lost)" in _one_line(lost)
        # writing them again is safe: a message is never kept twice
        store.append("ed", "doc", _messages("a#1", "a#2", "a#3"))
        store.commit()
        assert [m.message_id for m in store.load("ed", "doc").messages] == [
            "a#1", "a#2", "a#3"]
    finally:
        store.close()


def test_while_postgresql_is_down_calls_fail_at_once_and_work_again_after(
        pg: TempPostgres) -> None:
    store = PostgresStore(pg.create_database(), retry_interval=3600.0)
    try:
        store.create_session("ed", "doc", "g", 0.0)
        store.put_snapshot("ed", "doc", StoredSnapshot(0, b"state", ("a#0",)), [])
        store.commit()
        pg.stop()
        with pytest.raises(StoreError) as down:
            store.append("ed", "doc", _messages("a#1"))
        assert "cannot connect" in _one_line(down)
        # within the retry interval no connection is tried: the caller is not held up
        with pytest.raises(StoreError) as waiting:
            store.sessions()
        assert "no connection (next attempt in" in _one_line(waiting)
        pg.start_again()
        store.retry_interval = 0.0
        loaded = store.load("ed", "doc")
        assert loaded.snapshot.data == b"state" and loaded.messages == []
        assert store.reconnects == 1
    finally:
        store.close()


def test_two_connections_write_one_database(postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    first, second = open_store(url), open_store(url)
    try:
        first.create_session("ed", "one", "g1", 0.0)
        second.create_session("ed", "two", "g2", 0.0)
        first.append("ed", "one", _messages("a#1"))
        second.append("ed", "two", _messages("b#1", "b#2"))
        assert [i.session for i in first.sessions()] == ["one"]  # not yet committed there
        first.commit()
        second.commit()
        assert [(i.session, i.messages) for i in first.sessions()] == [("one", 1), ("two", 2)]
        # the same session created on both: the second to commit is refused
        first.create_session("im", "room", "x", 0.0)
        first.commit()
        with pytest.raises(StoreError):
            second.create_session("im", "room", "y", 0.0)
        assert second.load("im", "room").info.generation == "x"
    finally:
        first.close()
        second.close()


def test_without_psycopg_a_postgresql_url_is_one_line() -> None:
    # psycopg hidden from the import system, as on an install without the extra
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from groupcomm.store.backend import open_store, StoreError\n"
            "try:\n    open_store('postgresql://u@127.0.0.1/db')\n"
            "except StoreError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("the PostgreSQL store needs psycopg 3, which is not installed "
                           "(pip install 'groupcomm[postgresql]')\n")


def test_a_vanished_database_is_bounded_by_keepalives_unless_the_url_says(
        postgres_server: TempPostgres) -> None:
    url = postgres_server.create_database()
    stores = [open_store(url), open_store(url + "?tcp_user_timeout=5000&keepalives=0")]
    try:
        options = [{o.keyword: o.val for o in s._conn.pgconn.info} for s in stores]
        assert (options[0][b"tcp_user_timeout"], options[0][b"keepalives"]) == (
            b"30000", b"1")
        assert options[0][b"keepalives_idle"] == b"30"
        assert (options[1][b"tcp_user_timeout"], options[1][b"keepalives"]) == (
            b"5000", b"0")
    finally:
        for store in stores:
            store.close()


def test_the_store_command_reads_and_drops_in_postgresql(
        postgres_server: TempPostgres, capsys: pytest.CaptureFixture[str]) -> None:
    from groupcomm.cli.main import main
    from groupcomm.wire.payload import dump_payload

    url = postgres_server.create_database()
    store = open_store(url)
    try:
        store.create_session("im", "office", "g-im", 1.0)
        fmt, data = dump_payload([("ann", "hello", "ann#1")])
        store.put_snapshot("im", "office", StoredSnapshot(fmt, data, ("ann#1",), (), 2.0,
                                                          "ann"), [])
        store.append("im", "office", [StoredMessage("ben#1", "ben", *dump_payload("hi"),
                                                    vc=(("ben", 1),))])
        store.create_session("im", "lobby", "g-2", 1.0)
        store.commit()
    finally:
        store.close()
    assert main(["store", "ls", "--store", url, "--json"]) == 0
    assert [(s["session"], s["messages"]) for s in json.loads(capsys.readouterr().out)] == [
        ("lobby", 0), ("office", 1)]
    assert main(["store", "export", "im/office", "--store", url]) == 0
    assert capsys.readouterr().out == "[ann] hello\n[ben] hi\n"
    assert main(["store", "drop", "im/lobby", "--store", url]) == 0
    assert "dropped im/lobby" in capsys.readouterr().out
    assert main(["store", "ls", "--store", url, "--json"]) == 0
    assert [s["session"] for s in json.loads(capsys.readouterr().out)] == ["office"]
    # a database without a store: one line, and nothing created in it
    empty = postgres_server.create_database()
    assert main(["store", "ls", "--store", empty]) == 2
    assert capsys.readouterr().err.strip().endswith("no groupcomm store in this database")
