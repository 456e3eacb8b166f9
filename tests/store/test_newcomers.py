"""Who gets the stored state, through real communicators and a real ``groupcomm serve
--store`` process: newcomers joining together while no member present holds the
session's state, and a new process under a name the session had before."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.protocol import session_events as events
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners, StateTransfer
from tests.helpers import wait_until
from tests.store.test_durable_sessions import Log, _member, settled


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(tmp_path / "sessions.db"),
            "--snapshot-every", "5", "--snapshot-seconds", "0.3"]) as group:
        yield group


def _history(group: ProcessGroup, lines: int) -> list[str]:
    """alice and bob write ``lines`` lines and leave; returns the texts."""
    assert group.server is not None
    logs = {name: Log() for name in ("alice", "bob")}
    comms = {name: _member(group.server.address, group.key_file, name, log)
             for name, log in logs.items()}
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)
        for i in range(lines):
            logs[("alice", "bob")[i % 2]].send(f"line {i}")
        wait_until(lambda: all(len(lg.entries) == lines for lg in logs.values()),
                   what="every line everywhere")
    finally:
        for comm in comms.values():
            comm.close()
    return logs["alice"].texts


def _installed(log: Log) -> list[events.SessionEvent]:
    return [e for e in list(log.events)
            if isinstance(e, events.StateInstalled | events.StateUnavailable)]


def _newcomer(group: ProcessGroup, name: str, log: Log) -> Communicator:
    assert group.server is not None
    comm = _member(group.server.address, group.key_file, name, log)
    wait_until(lambda: _installed(log), what=f"{name}'s state transfer")
    return comm


def test_newcomers_joining_together_beside_a_member_without_the_state_get_it_all(
        stored: ProcessGroup) -> None:
    """A watcher (a provider, no consumer: it has none of the history) is present, so
    neither newcomer is alone: the store answers, the watcher's empty state is never
    installed nor kept, and a later newcomer still gets everything."""
    expected = _history(stored, 12)
    assert stored.server is not None
    watched = Log()
    watcher = Communicator("watcher", "s", server=stored.server.address,
                           key_file=str(stored.key_file), causality="matrix",
                           state=StateTransfer(provider=watched.provide),
                           listeners=Listeners(message=watched.on_message))
    comms: dict[str, Communicator] = {}
    logs = {name: Log() for name in ("carol", "dan")}
    errors: list[BaseException] = []

    def join(name: str) -> None:
        try:
            comms[name] = _newcomer(stored, name, logs[name])
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            errors.append(error)

    try:
        wait_until(lambda: len(watcher.members) == 1, what="the watcher's join")
        threads = [threading.Thread(target=join, args=(name,)) for name in logs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        for log in logs.values():
            [settled] = _installed(log)
            assert isinstance(settled, events.StateInstalled), settled
            assert sorted(log.texts) == sorted(expected)
        # more lines, so that snapshots are asked for (every 0.3 s) while all are here
        for i in range(6):
            logs["carol" if i % 2 else "dan"].send(f"more {i}")
        wait_until(lambda: all(len(lg.entries) == 18 for lg in logs.values()),
                   what="the new lines at carol and dan")
        wait_until(lambda: len(watched.entries) == 6, what="the new lines at the watcher")
        expected = logs["carol"].texts
        # one more newcomer while carol and dan hold the state: it asks the watcher
        # first (the longest-standing), which says it has none to give
        fay = Log()
        comms["fay"] = _newcomer(stored, "fay", fay)
        [settled] = _installed(fay)
        assert isinstance(settled, events.StateInstalled)
        assert settled.source in (comms["carol"].member_id, comms["dan"].member_id)
        assert sorted(fay.texts) == sorted(expected)
    finally:
        for comm in (*comms.values(), watcher):
            comm.close()
    eve = Log()
    comm = _newcomer(stored, "eve", eve)
    try:
        [settled] = _installed(eve)
        assert isinstance(settled, events.StateInstalled) and settled.source == "store"
        assert sorted(eve.texts) == sorted(expected)
    finally:
        comm.close()


@pytest.mark.parametrize("restart", [False, True])
def test_a_new_process_under_a_name_the_session_had_gets_the_stored_state(
        stored: ProcessGroup, restart: bool) -> None:
    """alice left; a fresh process named alice holds nothing: it gets the stored state,
    as anyone new. It is alice~2 (the server remembers alice, or after a restart its
    store names her), so that its message ids are not alice's: a newcomer after it,
    whose state reflects alice's, still gets what the new alice sends."""
    expected = _history(stored, 10)
    assert stored.server is not None
    if restart:
        stored.server.kill()
        stored.start_server()
    alice = Log()
    comm = _newcomer(stored, "alice", alice)
    comms = [comm]
    try:
        [settled_] = _installed(alice)
        assert isinstance(settled_, events.StateInstalled), settled_
        assert settled_.source == "store"
        assert sorted(alice.texts) == sorted(expected)
        assert comm.member_id == "alice~2"
        bob = Log()
        comms.append(_newcomer(stored, "bob", bob))
        assert sorted(bob.texts) == sorted(expected)
        alice.send("from the new alice")
        wait_until(lambda: "from the new alice" in bob.texts, what="the new alice's line")
    finally:
        for each in comms:
            each.close()
