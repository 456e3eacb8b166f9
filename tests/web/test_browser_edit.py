"""The editor page in a real headless Chromium, next to a terminal editor: typing at the
same place at once converges, a late tab gets the text, others' cursors are drawn at
their characters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.apps.batch_editors import EditorProcess
from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from trace_analysis.reference import check_directory

#: the text CodeMirror shows (its document: the page draws only the lines in sight)
TEXT_OF = "editor.text()"
TEXT = f"return {TEXT_OF}"
READY = "return document.getElementById('status').className === 'open'"
#: the number of text characters (code points) before a drawn cursor: where CodeMirror
#: put the element
CHARS_BEFORE = """
const offset = editor.view.posAtDOM(arguments[0].closest('.cm-remote'));
return [...editor.view.state.doc.sliceString(0, offset)].length;
"""
#: another person's cursor as drawn
REMOTE_CURSOR = "return document.querySelector('#text .cm-remote .cursor[data-member=\"{}\"]')"


def terminal_editor(group: ProcessGroup, name: str, session: str, causality: str,
                    *extra: str) -> EditorProcess:
    """``groupcomm edit --batch`` in the group's session."""
    assert group.server is not None
    return EditorProcess(name, session, group.server.address, group.key_file, causality,
                         *extra)


@pytest.fixture(scope="module", params=["matrix", "ks"])
def editing(request: pytest.FixtureRequest, session_group: ProcessGroup,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, GatewayProcess]]:
    causality = request.param
    gateway = GatewayProcess(session_group, tmp_path_factory.mktemp(f"edit-{causality}"),
                             causality=causality, session=f"doc-{causality}",
                             users=("ann", "ben", "cat"))
    try:
        yield causality, gateway
    finally:
        gateway.stop()


def open_editor(tabs: TabOpener, gateway: GatewayProcess, user: str,
                opened: list[Tab]) -> Tab:
    tab = tabs.open(gateway.link(user, "edit"), user)
    opened.append(tab)
    try:
        tab.wait(READY, f"{user}'s editor to join")
    except AssertionError as error:
        raise AssertionError(f"{error}; gateway: {gateway.stderr_tail()}") from None
    return tab


def test_two_tabs_and_a_terminal_type_at_one_place_at_once_and_converge(
        editing: tuple[str, GatewayProcess], session_group: ProcessGroup, tabs: TabOpener,
        tmp_path: Path) -> None:
    causality, gateway = editing
    opened: list[Tab] = []
    ann = open_editor(tabs, gateway, "ann", opened)
    ben = open_editor(tabs, gateway, "ben", opened)
    # tom's edits reach ann's member 400 ms late: the three typings overlap
    tom = terminal_editor(session_group, "tom", f"doc-{causality}", causality,
                         "--delay", "ann=400", "--trace-dir", str(gateway.trace_dir / "edit"))
    try:
        tom.wait_members(3)
        ann.keys("text", "Hello world")
        tom.ask('wait-text "Hello world"', ("seen",), what="the seed text")
        ben.wait(f"return {TEXT_OF} === 'Hello world'", "the seed text at ben")
        # everyone puts the cursor after "Hello", then all three type there at once
        for tab in (ann, ben):
            tab.keys("text", Keys.HOME, *[Keys.ARROW_RIGHT] * 5)
        tom.type("goto 5")
        tom.type('type "CCC"')
        ann.keys("text", "AAA")
        ben.keys("text", "BBB")
        expected_length = len("Hello world") + 9

        def converged() -> bool:
            texts = {ann.js(TEXT), ben.js(TEXT), tom.state()["text"]}
            return len(texts) == 1 and len(texts.pop()) == expected_length

        wait_until(converged, 30, "the three copies to converge")
        final = ann.js(TEXT)
        assert final.startswith("Hello") and final.endswith(" world")
        for run in ("AAA", "BBB", "CCC"):
            assert run in final  # each one's typing stays together
        assert ann.js("return editor.replica.failures") == 0 == ben.js(
            "return editor.replica.failures")

        # a late tab gets the text and edits
        cat = open_editor(tabs, gateway, "cat", opened)
        cat.wait(f"return {TEXT_OF} === arguments[0]", "the text at the late tab", 20, final)
        cat.keys("text", Keys.END, "!")
        for tab in (ann, ben):
            tab.wait(f"return {TEXT_OF} === arguments[0]", "cat's edit", 20, final + "!")
        tom.ask(f"wait-text {json.dumps(final + '!')}", ("seen",), what="cat's edit")
        if causality == "matrix":
            # a late terminal gets the text from the longest-standing member: ann's tab,
            # through its mirror in the gateway
            uli = terminal_editor(session_group, "uli", f"doc-{causality}", causality)
            try:
                assert uli.state()["text"] == final + "!"
            finally:
                uli.quit("quit")

        # others' cursors are drawn at their characters: ben's after his "BBB"
        where = final.index("BBB") + 3
        assert ben.js("return editor.position") == where
        for tab in (ann, cat):
            cursor = tab.wait(REMOTE_CURSOR.format("ben"), "ben's cursor")
            assert tab.js(CHARS_BEFORE, cursor) == where
        cat_cursor = ann.wait(REMOTE_CURSOR.format("cat"), "cat's cursor")
        assert ann.js(CHARS_BEFORE, cat_cursor) == len(final) + 1
        # the members line shows each in a colour of its own
        colours = ann.js("return [...document.querySelectorAll('#members span')]"
                         ".map(s => s.className)")
        assert len(colours) == 4 and len(set(colours)) == 4
        if causality == "matrix":
            ann.focus().save_screenshot(str(tmp_path / "editor.png"))
    finally:
        tom.quit("quit")
        tabs.leave(*opened)
    # the tabs' members traced like the terminal: one session, checked as one
    wait_until(lambda: not gateway.stats()["tabs"], 20, "the tabs' members to leave")
    checked = check_directory(gateway.trace_dir / "edit")
    traced = {path.stem for path in (gateway.trace_dir / "edit").glob("*.jsonl")}
    assert {"ann", "ben", "cat", "tom"} <= traced
    assert {"ann", "ben", "tom"} <= set(checked.per_process)  # cat only sent
    assert checked.causal_violations == 0 and checked.duplicates == 0
    assert checked.messages > 20 and checked.abrupt_endings == []


#: types, deletes and moves at random in the page, ``count`` edits ``pause`` ms apart
RANDOM_EDITS = """
const [count, pause, seed] = arguments;
let state = seed;
const random = () => { state = (state * 1103515245 + 12345) % 2147483648; return state / 2147483648; };
window.randomDone = false;
let left = count;
function step() {
  const length = editor.replica.text.visibleLength();
  if (length && random() < 0.3) {
    editor.moveTo(1 + Math.floor(random() * length));
    editor.backspace();
  } else {
    editor.moveTo(Math.floor(random() * (length + 1)));
    editor.insert("abc".slice(0, 1 + Math.floor(random() * 3)));
  }
  left -= 1;
  if (left > 0) setTimeout(step, pause); else window.randomDone = true;
}
step();
"""


@pytest.mark.slow
def test_random_edits_in_two_tabs_and_a_terminal_at_once_converge(
        session_group: ProcessGroup, tabs: TabOpener,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    gateway = GatewayProcess(session_group, tmp_path_factory.mktemp("random"),
                             causality="matrix", session="doc-random", users=("ann", "ben"))
    opened: list[Tab] = []
    tom = None
    try:
        # the terminal is first: the tabs get its text through state transfer
        tom = terminal_editor(session_group, "tom", "doc-random", "matrix",
                             "--delay", "ann=150", "--jitter", "30", "--coalesce", "0")
        tom.type('type "seed "')
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        for tab in (ann, ben):
            tab.wait(f"return {TEXT_OF} === 'seed '", f"the terminal's text at {tab.name}")
        tom.wait_members(3)
        ann.js(RANDOM_EDITS, 300, 5, 1)
        ben.js(RANDOM_EDITS, 300, 5, 2)
        tom.command("random 300 3", ("done",))
        for tab in (ann, ben):
            tab.wait("return window.randomDone", f"{tab.name}'s edits", 120)
        assert tom.answer(120, "tom's edits") == "done 300"

        def converged() -> bool:
            texts = {ann.js(TEXT), ben.js(TEXT), tom.state()["text"]}
            pending = ann.js("return editor.replica.unconfirmed.length") + ben.js(
                "return editor.replica.unconfirmed.length")
            return len(texts) == 1 and pending == 0

        wait_until(converged, 60, "the three copies to converge")
        assert ann.js("return editor.replica.failures") == 0 == ben.js(
            "return editor.replica.failures")
        # the gateway's check of each edit refused none of the tabs' real edits
        assert "bad_edit" not in gateway.stats()["counters"]
        assert len(ann.js(TEXT)) > 100
    finally:
        if tom is not None:
            tom.quit("quit")
        tabs.leave(*opened)
        gateway.stop()
