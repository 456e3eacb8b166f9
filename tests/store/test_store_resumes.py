"""A store that fails while the server serves is taken up again by itself: sessions are
marked behind, a member holding the state gives a snapshot at once, and only then does
a newcomer get the stored state; a newcomer into a session behind with nobody holding
its state gets none, told why (docs/storage.md, "What survives what")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.protocol import session_events as events
from groupcomm.protocol.store_rules import StorePolicy
from groupcomm.store.backend import StoreError
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners, StateTransfer
from groupcomm.transport.keys import write_new_key
from groupcomm.transport.server import SessionServer
from tests.helpers import wait_until
from tests.store.test_durable_sessions import Log, settled


class FillingDisk(SQLiteStore):
    """A SQLite store whose writes fail once ``room`` messages were appended, until the
    test frees the disk (``full`` False), as a disk that fills up and is cleaned."""

    room = 30
    full = False

    def _write(self, sql, args=()):
        if self.full:
            self.rollback()
            raise StoreError(f"store {self.location}: write failed: database or disk is "
                             "full")
        return super()._write(sql, args)

    def append(self, application, session, messages):
        if self.room < len(messages):
            self.full = True
        self.room -= len(messages)
        return super().append(application, session, messages)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[SessionServer, Path, FillingDisk]]:
    key = tmp_path / "k"
    secret = write_new_key(key)
    disk = FillingDisk(tmp_path / "store.db")
    server = SessionServer(secret, store=disk, store_policy=StorePolicy(1000, 1000.0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, key, disk
    finally:
        server.stop()
        thread.join(10)


def _member(server: SessionServer, key: Path, name: str, log: Log,
            session: str = "s") -> Communicator:
    comm = Communicator(name, session, server=server.address, key_file=str(key),
                        state=StateTransfer(provider=log.provide, consumer=log.consume),
                        listeners=Listeners(message=log.on_message, event=log.on_event))
    log.comm = comm
    return comm


def _type(logs: dict[str, Log], lines: range, total: int) -> None:
    names = sorted(logs)
    for i in lines:
        logs[names[i % len(names)]].send(f"line {i}")
    wait_until(lambda: all(len(lg.entries) == total for lg in logs.values()),
               what=f"{total} lines everywhere")


def _newcomer(server: SessionServer, key: Path, name: str,
              session: str = "s") -> tuple[Log, list[events.SessionEvent]]:
    log = Log()
    comm = _member(server, key, name, log, session)
    try:
        wait_until(lambda: any(isinstance(e, (events.StateInstalled, events.StateUnavailable))
                               for e in log.events), what=f"{name}'s state transfer")
        return log, list(log.events)
    finally:
        comm.close()


def test_the_store_resumes_and_a_newcomer_after_everyone_left_gets_everything(
        served, caplog) -> None:
    server, key, disk = served
    logs = {n: Log() for n in ("alice", "bob")}
    comms = {n: _member(server, key, n, logs[n]) for n in logs}
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)
        _type(logs, range(20), 20)  # kept and committed
        _type(logs, range(20, 100), 100)  # the disk fills up among these
        counters = server.counters()
        assert counters["store_failures"] == 1 and counters["store_down"] == 1
        assert counters["store_relays_not_stored"] > 0
        disk.full, disk.room = False, 10**9  # the disk is cleaned
        wait_until(lambda: server.counters().get("store_resumed") == 1, what="the resume")
        # a holder was asked at once: its snapshot covers what the store missed
        wait_until(lambda: server.counters()["store_sessions_behind"] == 0,
                   what="the session whole again")
        _type(logs, range(100, 120), 120)  # kept after the snapshot
    finally:
        for comm in comms.values():
            comm.close()
    expected = logs["alice"].texts
    assert sorted(expected) == sorted(logs["bob"].texts)
    carol, got = _newcomer(server, key, "carol")
    [installed] = [e for e in got if isinstance(e, events.StateInstalled)]
    assert installed.source == "store"
    assert sorted(carol.texts) == sorted(expected)
    assert len(carol.entries) == len({i for i, _ in carol.entries}) == 120
    said = [r.getMessage() for r in caplog.records]
    assert any("goes on without its store" in s and "tries it again in 1 s" in s
               for s in said)
    assert any("works again: 1 session(s) behind" in s for s in said)
    assert disk.behind() == set()


def test_a_newcomer_into_a_session_behind_with_no_holder_gets_no_state_and_is_told(
        served, caplog) -> None:
    server, key, disk = served
    logs = {n: Log() for n in ("alice", "bob")}
    comms = {n: _member(server, key, n, logs[n]) for n in logs}
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)
        _type(logs, range(40), 40)  # the disk fills up among these
        assert server.counters()["store_down"] == 1
    finally:
        for comm in comms.values():
            comm.close()  # everyone leaves while the store fails
    disk.full, disk.room = False, 10**9
    wait_until(lambda: server.counters().get("store_resumed") == 1, what="the resume")
    assert server.counters()["store_sessions_behind"] == 1  # nobody left to give it
    assert len(disk.behind()) == 1  # marked in the store: it outlives the server
    carol, got = _newcomer(server, key, "carol")
    assert any(isinstance(e, events.StateUnavailable) for e in got)
    assert carol.texts == []  # no state with a hole
    assert server.counters()["store_newcomers_refused"] == 1
    [told] = [r.getMessage() for r in caplog.records
              if "no state from the session store" in r.getMessage()]
    assert told.startswith("carol") and "\n" not in told
