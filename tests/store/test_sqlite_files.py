"""Bad store files and locations: one line each, and nothing stored is damaged."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from groupcomm.store.backend import StoredMessage, StoredSnapshot, StoreError, open_store
from groupcomm.store.sqlite import SQLiteStore


def test_a_new_store_is_in_wal_mode(tmp_path: Path):
    path = tmp_path / "s.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"my notes, not a database\n" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database") as caught:
        open_store(str(path))
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == b"my notes, not a database\n" * 100


def test_a_foreign_sqlite_file_is_refused_and_left_alone(tmp_path: Path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (name TEXT)")
        db.execute("INSERT INTO accounts VALUES ('alice')")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        open_store(str(path))
    assert path.read_bytes() == before


def test_a_sqlite_file_with_a_meta_table_of_its_own_is_refused(tmp_path: Path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', 'somebody-else')")
    with pytest.raises(StoreError, match="another program"):
        open_store(str(path))


def test_another_layout_version_is_refused_not_converted(tmp_path: Path):
    path = tmp_path / "s.db"
    store = open_store(str(path))
    store.create_session("ed", "doc", "g", 0.0)
    store.commit()
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(StoreError, match="layout version 99"):
        open_store(str(path))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT generation FROM sessions").fetchall() == [("g",)]


def test_a_file_of_layout_version_1_is_converted_and_keeps_its_sessions(tmp_path: Path,
                                                                         caplog):
    path = tmp_path / "s.db"
    store = open_store(str(path))
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", [StoredMessage("a#1", "a", 0, b"x")])
    store.commit()
    store.close()
    with sqlite3.connect(path) as db:  # as version 1 made it: no "behind" column
        db.execute("ALTER TABLE sessions DROP COLUMN behind")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    store = open_store(str(path))
    try:
        assert "converted from layout version 1 to 2" in caplog.text
        assert store.behind() == set()
        assert [m.message_id for m in store.load("ed", "doc").messages] == ["a#1"]
        store.set_behind("ed", "doc", True)
        store.commit()
        assert store.behind() == {("ed", "doc")}
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("2",)


def test_a_damaged_file_is_refused(tmp_path: Path):
    path = tmp_path / "s.db"
    store = open_store(str(path))
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", [StoredMessage(f"a#{n}", "a", 0, os.urandom(3000))
                               for n in range(50)])
    store.commit()
    store.close()
    data = bytearray(path.read_bytes())
    data[4096 * 2:4096 * 6] = os.urandom(4096 * 4)  # pages of the tables, not the header
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged|not a usable") as caught:
        store = open_store(str(path))
        store.load("ed", "doc")
    assert "\n" not in str(caught.value)


def test_a_damaged_row_is_refused_in_one_line_naming_the_session(tmp_path: Path):
    path = tmp_path / "s.db"
    store = open_store(str(path))
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", [StoredMessage("a#1", "a", 0, b"x", vc=(("a", 1),))])
    store.put_snapshot("ed", "doc", StoredSnapshot(0, b"s", ("a#0",), (("a", 0),)), ())
    store.commit()
    loaded = store.load("ed", "doc")
    assert loaded is not None and loaded.messages[0].vc == (("a", 1),)
    assert loaded.snapshot is not None and loaded.snapshot.reflected == ("a#0",)
    store.close()
    for table, column, what in (("messages", "vc", "a message of ed/doc is damaged"),
                                ("snapshots", "clock", "the snapshot of ed/doc is damaged")):
        with sqlite3.connect(path) as db:
            db.execute(f"UPDATE {table} SET {column} = x'c1'")  # not msgpack
        store = open_store(str(path))
        with pytest.raises(StoreError, match=what) as caught:
            store.load("ed", "doc")
        store.close()
        assert "\n" not in str(caught.value)


def test_reading_commands_do_not_create_a_store(tmp_path: Path):
    with pytest.raises(StoreError, match="no such file"):
        open_store(str(tmp_path / "missing.db"), create=False)
    assert not (tmp_path / "missing.db").exists()


def test_a_postgresql_url_without_the_backend_module_fails_in_one_line(monkeypatch):
    # an install whose groupcomm has no PostgreSQL backend module (None in sys.modules
    # makes its import fail as a missing module does); psycopg itself missing is
    # test_postgresql.py's test_without_psycopg_a_postgresql_url_is_one_line
    monkeypatch.setitem(sys.modules, "groupcomm.store.postgresql", None)
    with pytest.raises(StoreError, match="^this groupcomm has no PostgreSQL store "
                       "backend; give --store a file path \\(SQLite\\)$"):
        open_store("postgresql://localhost/sessions")


def test_an_unknown_url_scheme_is_refused():
    with pytest.raises(StoreError, match="not a path"):
        open_store("mysql://localhost/x")


def test_a_failed_write_raises_one_line_and_keeps_what_was_committed(tmp_path: Path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", [StoredMessage("a#1", "a", 0, b"x")])
    store.commit()
    # a second connection holds the write lock: this one's write fails (SQLITE_BUSY),
    # as a write fails on a full disk (SQLITE_FULL)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")
    store._db.execute("PRAGMA busy_timeout=0")
    with pytest.raises(StoreError, match="write failed"):
        store.append("ed", "doc", [StoredMessage("a#2", "a", 0, b"y")])
    other.execute("ROLLBACK")
    other.close()
    store.append("ed", "doc", [StoredMessage("a#3", "a", 0, b"z")])
    store.commit()
    assert [m.message_id for m in store.load("ed", "doc").messages] == ["a#1", "a#3"]
    store.close()
