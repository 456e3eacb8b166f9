"""Durable sessions through the web gateway, with the store in PostgreSQL (the session's
real server, tests/conftest.py) and real headless Chromium tabs: two editor tabs type
and two chat tabs talk, every tab leaves, the session server is killed (-9) and
restarted on the same database under the same gateway; a new editor tab gets the exact
text and edits on, a new chat tab shows the conversation."""

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
from tests.web.test_browser_im import LINES, line_with, open_chat, say

pytest.importorskip("psycopg")


@pytest.fixture
def stored(tmp_path: Path, postgres_server: TempPostgres) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "3", "--store", postgres_server.create_database(),
            "--snapshot-every", "20", "--snapshot-seconds", "1"]) as group:
        yield group


@pytest.mark.long
def test_new_tabs_get_the_text_and_the_chat_after_a_killed_server_with_postgresql(
        stored: ProcessGroup, tabs: TabOpener, tmp_path: Path) -> None:
    assert stored.server is not None
    gateway = GatewayProcess(stored, tmp_path, session="paper",
                             users=("ann", "ben", "cat", "dan"))
    opened = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        ann.keys("text", "Kept in PostgreSQL")
        ben.wait(f"return {TEXT_OF} === 'Kept in PostgreSQL'", "ann's text at ben")
        ben.keys("text", Keys.END, ", typed by two.")
        final = "Kept in PostgreSQL, typed by two."
        ann.wait(f"return {TEXT_OF} === arguments[0]", "ben's text at ann", 20, final)
        chats = [open_chat(tabs, gateway, name) for name in ("ann", "ben")]
        opened += chats
        lines = [f"line {i} from {('ann', 'ben')[i % 2]}" for i in range(6)]
        for i, line in enumerate(lines):
            say(chats[i % 2], line)
            line_with(chats[1 - i % 2], line)
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
        # alone in the chat: the conversation so far is the store's
        dan = open_chat(tabs, gateway, "dan")
        opened.append(dan)
        line_with(dan, "* up to date (6 earlier message(s))", "the stored conversation")
        shown = dan.js(LINES)
        # each line under its identity: its sender and their own count
        assert [s for s in shown if "] line " in s] == [
            f"{who}·{i // 2 + 1} [{who}] {line}"
            for i, line in enumerate(lines) for who in [line.rsplit(' ', 1)[1]]], shown
    finally:
        tabs.leave(*opened)
        gateway.stop()
