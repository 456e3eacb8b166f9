"""A browser tab that only reads, in a real headless Chromium, beside a terminal editor
making random edits: the tab's member acknowledges what the tab applied, so the terminal
collects everything (docs/replicated.md, "Members that never send")."""

from __future__ import annotations

import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from tests.web.test_browser_edit import TEXT, open_editor, terminal_editor


@pytest.mark.long  # real processes and seconds of work: CI runs it
def test_a_reading_tab_lets_the_terminal_collect(
        session_group: ProcessGroup, tabs: TabOpener,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    gateway = GatewayProcess(session_group, tmp_path_factory.mktemp("reader"),
                             causality="matrix", session="doc-reader", users=("ann",))
    opened: list[Tab] = []
    tom = None
    try:
        tom = terminal_editor(session_group, "tom", "doc-reader", "matrix")
        ann = open_editor(tabs, gateway, "ann", opened)
        tom.wait_members(2)
        tom.ask("random 1500 4", ("done",), 120, "tom's edits")
        last: dict = {}

        def collected() -> bool:
            state = tom.state()
            last.update(state)
            # the terminal holds the text and nothing else: every delete's tombstone
            # went, which needs the tab's acknowledgement (it never sends)
            return state["kept"] == len(state["text"]) and ann.js(TEXT) == state["text"]

        wait_until(collected, 60, "the terminal to collect everything")
        assert last["clock_acks_received"] >= 1 and len(last["text"]) > 500
        assert ann.js("return editor.replica.failures") == 0
        assert ann.js("return editor.replica.collected") > 0
    finally:
        if tom is not None:
            tom.quit("quit")
        tabs.leave(*opened)
        gateway.stop()
