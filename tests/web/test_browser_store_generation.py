"""A session whose store is dropped while the session server is down, under a running
gateway, in real headless Chromium: the tabs' members come back to another store
generation (StoreGenerationChanged); each tab is told, gets the fresh state, and makes
its edits that every member may not hold again on it as new edits (the editor), or
sends its unanswered lines again (the chat), saying so in one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor, terminal_editor
from tests.web.test_browser_im import LINES, line_with, open_chat, say

pytestmark = pytest.mark.long

NOTICE = "return document.getElementById('notice').textContent"
REPLACED = "the stored session was replaced; your unsent edits were re-applied"


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[ProcessGroup, Path]]:
    store = tmp_path / "sessions.db"
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "3", "--store", str(store)]) as group:
        yield group, store


def drop(store: Path, session: str) -> None:
    """``groupcomm store drop`` (the server is down)."""
    run = subprocess.run([sys.executable, "-m", "groupcomm.cli.main", "store", "drop",
                          session, "--store", str(store)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr


def test_an_editor_tab_makes_its_edits_again_on_the_fresh_text_of_a_dropped_store(
        stored: tuple[ProcessGroup, Path], tabs: TabOpener, tmp_path: Path) -> None:
    group, store = stored
    gateway = GatewayProcess(group, tmp_path, session="gen", users=("ann",))
    opened: list[Tab] = []
    tom = terminal_editor(group, "tom", "gen", "matrix")
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        tom.wait_members(2)
        ann.keys("text", "hello ")
        tom.ask('wait-text "hello "', ("seen",), what="the first word")
        group.stop_server()
        # the gateway sends these into its member's queue; no one else has them
        ann.keys("text", "world")
        ann.wait("return document.getElementById('text').dataset.unconfirmed === '0'",
                 "the gateway's answers")
        drop(store, "gen")
        group.start_server()
        try:
            line = ann.wait(NOTICE + ".startsWith('the stored session was replaced; your') "
                            f"&& {NOTICE[7:]}", "the line saying the store was replaced", 60)
        except AssertionError:
            print("GATEWAY", gateway.stderr_tail(60))
            print("TOM", tom.state())
            print("SERVER", group.server.stderr_tail(40) if group.server else None)
            raise
        assert line == REPLACED
        ann.wait("return editor.outbox.entries.length === 0 && !editor.replacing",
                 "the edits made again", 30)
        wait_until(lambda: tom.state()["text"] == ann.js(TEXT), 30,
                   "the terminal and the tab to agree")
        text = ann.js(TEXT)
        assert text.count("world") == 1, text
        assert ann.js("return editor.replica.failures") == 0
        assert "bad_edit" not in gateway.stats()["counters"]
        ann.keys("text", "!")
        tom.ask(f'wait-text "{text}!"', ("seen",), 30, "the next key")
    finally:
        tom.quit("quit")
        tabs.leave(*opened)
        gateway.stop()
