"""The same as test_apps_survive.py with the store in PostgreSQL (the session's real
server, tests/conftest.py): two ``groupcomm edit --batch`` editors type and two
``groupcomm im`` chats talk, everyone leaves, the server is killed (-9) and restarted
on the same database; a new editor gets the exact text and a new chat the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.pgserver import TempPostgres
from groupcomm.tools.procs import ProcessGroup
from tests.store.test_apps_survive import (
    test_the_text_and_the_chat_survive_everyone_leaving_and_a_killed_server as survive,
)

pytest.importorskip("psycopg")


@pytest.fixture
def stored_in_postgresql(tmp_path: Path,
                         postgres_server: TempPostgres) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", postgres_server.create_database(),
            "--snapshot-every", "50", "--snapshot-seconds", "1"]) as group:
        yield group


@pytest.mark.long
def test_the_text_and_the_chat_survive_a_killed_server_with_the_store_in_postgresql(
        stored_in_postgresql: ProcessGroup) -> None:
    survive(stored_in_postgresql)
