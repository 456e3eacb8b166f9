"""Shared fixtures: real processes on 127.0.0.1, always reaped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.pgserver import PostgresNotFound, TempPostgres
from groupcomm.tools.procs import ProcessGroup


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ProcessGroup]:
    """A session key and a running server process; peers are started by the test."""
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"]) as started:
        yield started


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TempPostgres]:
    """A real PostgreSQL server for the whole run (groupcomm.tools.pgserver: initdb and
    pg_ctl in a temporary directory, as ``nobody`` when the tests run as root), always
    stopped and removed. Tests take a database each (``create_database()`` gives its
    URL). It runs with fsync off: the tests stop and kill groupcomm's processes and
    restart PostgreSQL cleanly, never crash its machine. Skips, saying why, when
    PostgreSQL's programs or psycopg are missing (./run test installs both)."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]')")
    try:
        server = TempPostgres(settings={"fsync": "off"})
    except PostgresNotFound as error:
        pytest.skip(str(error))
    with server:
        yield server


@pytest.fixture(autouse=True)
def _reset_selectors() -> Iterator[None]:
    """Tests that install a module through the selectors must not leak it."""
    yield
    from groupcomm.core.filtering import ReceivedMessageFilterSelector, SendMessageFilterSelector

    SendMessageFilterSelector.reset()
    ReceivedMessageFilterSelector.reset()
