"""Durable sessions in PostgreSQL: a real ``groupcomm serve --store postgresql://...``
process, real communicators and the session's real PostgreSQL server (tests/conftest.py).
The server is killed (-9) and restarted on the same database; PostgreSQL is restarted
and stopped under it while members type (those three are ``long``: the same server behaviour runs with
SQLite in the default suite); bad URLs and a PostgreSQL that is down refuse the start."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.protocol import session_events as events
from groupcomm.tools.pgserver import TempPostgres
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.keys import write_new_key
from tests.helpers import wait_until
from tests.store.test_durable_sessions import Log, _member, settled

pytest.importorskip("psycopg")


@pytest.fixture
def pg(postgres_server: TempPostgres) -> Iterator[TempPostgres]:
    """The shared server, started again after a test that stopped it (also on failure)."""
    yield postgres_server
    if not postgres_server._running:
        postgres_server.start_again()


@pytest.fixture
def stored(tmp_path: Path, pg: TempPostgres) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", pg.create_database(),
            "--snapshot-every", "20", "--snapshot-seconds", "0.5"]) as group:
        yield group


def _talk(group: ProcessGroup, lines: range, names: tuple[str, str] = ("alice", "bob"), *,
          restored: bool = False) -> list[str]:
    """Two members join, say ``lines`` in turn, see all of them, and leave; the texts.
    ``restored``: the first, joining alone, gets the stored state before the second joins
    (the store hands its state to a newcomer alone in the session)."""
    assert group.server is not None
    first, second = names
    logs = {name: Log() for name in names}
    comms = {first: _member(group.server.address, group.key_file, first, logs[first])}
    if restored:
        wait_until(lambda: any(isinstance(e, events.StateInstalled)
                               for e in logs[first].events), what="the stored state")
    comms[second] = _member(group.server.address, group.key_file, second, logs[second])
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)
        before = len(logs[first].entries)
        for i in lines:
            logs[names[i % 2]].send(f"line {i}")
        wait_until(lambda: all(len(lg.entries) == before + len(lines)
                               for lg in logs.values()), what="every line everywhere")
    finally:
        for comm in comms.values():
            comm.close()
    assert sorted(logs[first].texts) == sorted(logs[second].texts)
    return logs[first].texts


def _newcomer(group: ProcessGroup) -> list[str]:
    """What carol, alone in the session, gets from the store."""
    assert group.server is not None
    carol = Log()
    comm: Communicator = _member(group.server.address, group.key_file, "carol", carol)
    try:
        wait_until(lambda: any(isinstance(e, events.StateInstalled) for e in carol.events),
                   what="the stored state")
        [installed] = [e for e in carol.events if isinstance(e, events.StateInstalled)]
        assert installed.source == "store"
        assert len(carol.entries) == len({i for i, _ in carol.entries})
        return carol.texts
    finally:
        comm.close()


def _counters(group: ProcessGroup) -> dict[str, int]:
    """The server's counters, from the line it prints when it stops."""
    assert group.server is not None
    group.stop_server()
    [line] = [s for s in group.server.stderr_lines if s.startswith("counters: ")]
    return {k: int(v) for k, v in (p.split("=") for p in line[10:].split(", "))}


@pytest.mark.long
def test_a_newcomer_after_everyone_left_and_the_server_was_killed_gets_everything(
        stored: ProcessGroup) -> None:
    assert stored.server is not None
    server = stored.server
    wait_until(lambda: any(line.startswith("store: postgresql://groupcomm@127.0.0.1:")
                           for line in server._output), what="the store's line")
    expected = _talk(stored, range(60))
    stored.server.kill()  # SIGKILL: no chance to close the store
    stored.start_server()
    assert sorted(_newcomer(stored)) == sorted(expected)


@pytest.mark.long
def test_postgresql_restarted_under_a_running_server_loses_nothing(
        stored: ProcessGroup, pg: TempPostgres) -> None:
    assert stored.server is not None
    first = _talk(stored, range(30))
    pg.stop()  # every connection is cut; the server is idle meanwhile
    pg.start_again()
    second = _talk(stored, range(30, 50), ("dave", "erin"), restored=True)
    assert sorted(_newcomer(stored)) == sorted(set(first + second))
    counts = _counters(stored)
    # the store reconnected on its next call, with nothing uncommitted to lose: one line
    assert counts.get("store_failures", 0) == 0 and counts["store_messages"] >= 50
    assert stored.server is not None
    [line] = [s for s in stored.server.stderr_lines if "postgresql://" in s]
    assert line.endswith("connected again")


@pytest.mark.long
def test_postgresql_down_while_two_members_type_the_store_resumes_and_loses_nothing(
        stored: ProcessGroup, pg: TempPostgres) -> None:
    """PostgreSQL stops while alice and bob type: the server relays without its store,
    takes it up again once PostgreSQL is back, marks the session behind, gets a
    snapshot from a member holding the state, and a newcomer after everyone left gets
    every line once."""
    server = stored.server
    assert server is not None
    logs = {name: Log() for name in ("alice", "bob")}
    comms = {name: _member(server.address, stored.key_file, name, logs[name])
             for name in logs}

    def typed(lines: range) -> None:
        for i in lines:
            logs[("alice", "bob")[i % 2]].send(f"line {i}")
        wait_until(lambda: all(len(lg.entries) == lines.stop for lg in logs.values()),
                   what=f"{lines.stop} lines everywhere")

    def logged(text: str) -> bool:
        return any(text in line for line in server.stderr_lines)

    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)
        typed(range(20))
        pg.stop()
        typed(range(20, 50))  # relayed, not stored
        wait_until(lambda: logged("goes on without its store"), what="the failure's line")
        pg.start_again()
        typed(range(50, 60))
        wait_until(lambda: logged("works again"), what="the store taken up again")
        wait_until(lambda: logged("is whole again"), what="a holder's snapshot kept")
        typed(range(60, 70))
    finally:
        for comm in comms.values():
            comm.close()
    expected = logs["alice"].texts
    assert sorted(expected) == sorted(logs["bob"].texts) == sorted(
        f"line {i}" for i in range(70))
    assert sorted(_newcomer(stored)) == sorted(expected)
    counts = _counters(stored)
    assert counts["store_failures"] >= 1 and counts["store_resumed"] >= 1
    assert counts["store_relays_not_stored"] > 0 and counts["store_sessions_behind"] == 0


def _serve(store: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if not (tmp_path / "k.key").exists():
        write_new_key(tmp_path / "k.key")
    return subprocess.run([sys.executable, "-m", "groupcomm.cli.serve", "--bind",
                           "tcp://127.0.0.1:0", "--key-file", str(tmp_path / "k.key"),
                           "--store", store], capture_output=True, text=True, timeout=60)


def test_the_server_refuses_to_start_on_a_postgresql_it_cannot_use(
        pg: TempPostgres, tmp_path: Path) -> None:
    url = pg.create_database()
    wrong = _serve(url.replace(pg.password, "wrong-password"), tmp_path)
    assert wrong.returncode == 2 and wrong.stdout == ""
    [line] = wrong.stderr.splitlines()
    assert line.startswith("groupcomm serve: --store: store postgresql://groupcomm@127.0.0.1")
    assert "password authentication failed" in line and "wrong-password" not in line
    pg.stop()
    down = _serve(url, tmp_path)
    assert down.returncode == 2
    [line] = down.stderr.splitlines()
    assert "cannot connect" in line and "Connection refused" in line
