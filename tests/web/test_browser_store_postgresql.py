"""Durable sessions through the web gateway, with the store in PostgreSQL (the session's
real server, tests/conftest.py) and real headless Chromium tabs: two editor tabs type,
both leave, the session server is killed (-9) and restarted on the same database; a new
editor tab gets the exact text and edits on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.pgserver import TempPostgres
from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, TabOpener
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor

pytest.importorskip("psycopg")


@pytest.fixture
def stored(tmp_path: Path, postgres_server: TempPostgres) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "3", "--store", postgres_server.create_database(),
            "--snapshot-every", "20", "--snapshot-seconds", "1"]) as group:
        yield group


@pytest.mark.long
def test_a_new_tab_gets_the_text_after_a_killed_server_with_postgresql(
        stored: ProcessGroup, tabs: TabOpener, tmp_path: Path) -> None:
    assert stored.server is not None
    gateway = GatewayProcess(stored, tmp_path, session="paper",
                             users=("ann", "ben", "cat"))
    opened = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        ann.keys("text", "Kept in PostgreSQL")
        ben.wait(f"return {TEXT_OF} === 'Kept in PostgreSQL'", "ann's text at ben")
        ben.keys("text", Keys.END, ", typed by two.")
        final = "Kept in PostgreSQL, typed by two."
        ann.wait(f"return {TEXT_OF} === arguments[0]", "ben's text at ann", 20, final)
        tabs.leave(*opened)
        opened.clear()
        wait_until(lambda: not gateway.stats()["tabs"], 20, "the tabs' members to leave")

        stored.server.kill()  # SIGKILL: no chance to close the store
        stored.start_server()  # same address: the gateway's next members find it

        cat = open_editor(tabs, gateway, "cat", opened)
        cat.wait(f"return {TEXT_OF} === arguments[0]", "the stored text at a new tab", 30,
                 final)
        assert cat.js(TEXT) == final and cat.js("return editor.replica.failures") == 0
        cat.keys("text", Keys.END, "!")
        ann = open_editor(tabs, gateway, "ann", opened)
        ann.wait(f"return {TEXT_OF} === arguments[0]", "cat's edit at ann", 20, final + "!")
    finally:
        tabs.leave(*opened)
        gateway.stop()
