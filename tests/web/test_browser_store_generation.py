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
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor
from tests.web.test_browser_im import LINES, line_with, open_chat, say

pytestmark = pytest.mark.long

NOTICE = "return document.getElementById('notice').textContent"
REPLACED = "the stored session was replaced; your unsent edits were re-applied"
REPLACED_LINE = (f"return {NOTICE[7:]}.startsWith('the stored session was replaced') "
                 f"&& {NOTICE[7:]}")


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[ProcessGroup, Path]]:
    store = tmp_path / "sessions.db"
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "3", "--store", str(store)]) as group:
        yield group, store


def drop(store: Path, session: str) -> None:
    """``groupcomm store drop`` (the server is down)."""
    run = subprocess.run([sys.executable, "-m", "groupcomm.cli", "store", "drop",
                          session, "--store", str(store)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr


def test_an_editor_tab_makes_its_edits_again_on_the_fresh_text_of_a_dropped_store(
        stored: tuple[ProcessGroup, Path], tabs: TabOpener, tmp_path: Path) -> None:
    """ann types while the session server is down (the gateway sends her keys into her
    member's queue: ben never gets them), the store is dropped, the server starts
    again: both tabs say the store was replaced, ann's keys are made again on the
    fresh text as new edits, once, and both tabs agree and edit on."""
    group, store = stored
    gateway = GatewayProcess(group, tmp_path, session="gen", users=("ann", "ben"))
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        ann.wait("return editor.replica.members.length === 2", "ben at ann")
        ann.keys("text", "hello ")
        ben.wait(f"return {TEXT_OF} === 'hello '", "the first word at ben")
        group.stop_server()
        ann.keys("text", "world")
        ann.wait("return document.getElementById('text').dataset.unconfirmed === '0'",
                 "the gateway's answers")
        drop(store, "gen")
        group.start_server()
        try:
            assert ann.wait(REPLACED_LINE, "the line at ann", 60) == REPLACED
        except AssertionError:
            print("GATEWAY", gateway.stderr_tail(60))
            raise
        ben.wait(REPLACED_LINE, "the line at ben", 30)
        for tab in (ann, ben):
            tab.wait("return editor.outbox.entries.length === 0 && !editor.replacing "
                     "&& document.getElementById('text').dataset.unconfirmed === '0'",
                     f"{tab.name} settled on the fresh text", 30)
        wait_until(lambda: ann.js(TEXT) == ben.js(TEXT), 30, "the two tabs to agree")
        text = ann.js(TEXT)
        # "hello " was held by both (gone with the store) unless ben's acknowledgement
        # had not come: ann's keys the others never got are there, once
        assert text in ("world", "hello world"), text
        assert "bad_edit" not in gateway.stats()["counters"]
        ann.keys("text", "!")
        ben.wait(f"return {TEXT_OF} === arguments[0]", "the next key at ben", 30, text + "!")
    finally:
        tabs.leave(*opened)
        gateway.stop()


def test_chat_tabs_say_the_store_was_replaced_and_talk_on(
        stored: tuple[ProcessGroup, Path], tabs: TabOpener, tmp_path: Path) -> None:
    """The chat's store is dropped while the server is down: both tabs say the stored
    session was replaced (no line waited for an answer: the gateway answered the one
    said meanwhile, which its member's queue carries), and talk on; that line reaches
    the other tab once."""
    group, store = stored
    gateway = GatewayProcess(group, tmp_path, session="genchat", users=("ann", "ben"))
    opened: list[Tab] = []
    try:
        ann = open_chat(tabs, gateway, "ann")
        ben = open_chat(tabs, gateway, "ben")
        opened += [ann, ben]
        line_with(ann, "* ben joined")
        say(ann, "before")
        line_with(ben, "[ann] before")
        group.stop_server()
        say(ann, "during")
        line_with(ann, "] during", "the line said while the server is down")
        drop(store, "genchat")
        group.start_server()
        for tab in (ann, ben):
            # (the fresh conversation may hold the line said meanwhile already)
            line_with(tab, "* the stored session was replaced; no line of yours was "
                      "waiting (conversation so far: ", f"the line at {tab.name}")
            tab.wait("return document.getElementById('status').className === 'open'",
                     f"{tab.name}'s status line back")
        say(ann, "after")
        line_with(ben, "[ann] after", "the next line at ben")
        # the line said meanwhile reaches ben once: delivered, or in the fresh
        # conversation the replacement shows
        shown = [x for x in ben.js(LINES) if not x.startswith(("*", "!"))]
        assert sum(x.endswith("] during") for x in shown) == 1, shown
    finally:
        tabs.leave(*opened)
        gateway.stop()
