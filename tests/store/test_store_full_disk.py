"""A real full file system under the SQLite store: a small tmpfs mounted for the test
fills up while two members type; the server goes on relaying, takes the store up again
once space is freed, and the file passes SQLite's ``quick_check`` with everything a
newcomer then gets (docs/storage.md, "What survives what")."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.protocol import session_events as events
from groupcomm.protocol.store_rules import StorePolicy
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.transport.keys import write_new_key
from groupcomm.transport.server import SessionServer
from tests.helpers import wait_until
from tests.store.test_durable_sessions import Log, settled
from tests.store.test_store_resumes import _member, _newcomer, _type


def _cannot_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount command"
    return None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    reason = _cannot_mount()
    if reason:
        pytest.skip(reason)
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                   check=True, capture_output=True, timeout=30)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` but a few pages, in a file the test removes to
    clean the disk."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as out:
        out.write(b"\0" * max(0, free - 16 * 1024))
    return filler


def test_a_real_full_file_system_stops_the_store_not_the_session_and_it_resumes(
        small_disk: Path, tmp_path: Path, caplog) -> None:
    key = tmp_path / "k"
    secret = write_new_key(key)
    path = small_disk / "store.db"
    server = SessionServer(secret, store=SQLiteStore(path),
                           store_policy=StorePolicy(1000, 1000.0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        logs = {n: Log() for n in ("alice", "bob")}
        comms = {n: _member(server, key, n, logs[n]) for n in logs}
        try:
            wait_until(lambda: all(len(c.members) == 2 for c in comms.values()),
                       what="joins")
            settled(comms)
            _type(logs, range(20), 20)
            filler = _fill(small_disk)
            # lines of 1 KiB: the write-ahead log outgrows the few pages left
            for i in range(20, 80):
                logs[("alice", "bob")[i % 2]].send(f"line {i} " + "x" * 1024)
            wait_until(lambda: all(len(lg.entries) == 80 for lg in logs.values()),
                       what="80 lines everywhere while the disk is full")
            counters = server.counters()
            assert counters["store_failures"] >= 1 and counters["store_down"] == 1
            filler.unlink()  # the disk is cleaned
            wait_until(lambda: server.counters().get("store_resumed", 0) >= 1, 60,
                       what="the store taken up again")
            wait_until(lambda: server.counters()["store_sessions_behind"] == 0, 30,
                       what="the session whole again")
            _type(logs, range(80, 100), 100)
        finally:
            for comm in comms.values():
                comm.close()
        expected = sorted(logs["alice"].texts)
        assert expected == sorted(logs["bob"].texts)
        carol, got = _newcomer(server, key, "carol")
        [installed] = [e for e in got if isinstance(e, events.StateInstalled)]
        assert installed.source == "store"
        assert sorted(carol.texts) == expected
        assert len(carol.entries) == len({i for i, _ in carol.entries}) == 100
    finally:
        server.stop()
        thread.join(10)
    said = [r.getMessage() for r in caplog.records]
    assert any("full" in s and "goes on without its store" in s for s in said), said
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
