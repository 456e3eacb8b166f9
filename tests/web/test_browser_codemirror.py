"""The editor page's CodeMirror driven in a real headless Chromium as a person drives it:
a click puts the cursor where it lands, Shift+arrows and a mouse drag select and typing
replaces the selection, undo and redo take back one's own edits only (another tab's
edits in between stay), an input method's composition and `Input.insertText` insert,
an emoji with a skin tone goes with one Backspace, CJK text, a paste of 100,000
characters, others' cursors and selections with their names (one label for cursors at
one place), and
in the end every tab and a terminal editor hold the same text."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from groupcomm.apps.batch_editors import EditorProcess
from groupcomm.apps.colours import colour_slot
from groupcomm.tools.procs import ProcessGroup
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from tests.web.test_browser_edit import (
    CHARS_BEFORE,
    REMOTE_CURSOR,
    TEXT,
    TEXT_OF,
    open_editor,
    terminal_editor,
)
from tests.web.test_browser_paste import PASTE, SETTLED

pytestmark = pytest.mark.long

#: the viewport point just inside the left edge of the character at code point `p`
#: (the end of the text: after the last), and the content element's centre
POINT = """
const doc = editor.view.state.doc;
const text = doc.toString();
const p = arguments[0];
const offset = [...text].slice(0, p).join('').length;
const at = editor.view.coordsAtPos(offset, 1) || editor.view.coordsAtPos(offset, -1);
const box = document.querySelector('#text .cm-content').getBoundingClientRect();
return [at.left + 1 - (box.left + box.width / 2), (at.top + at.bottom) / 2 - (box.top + box.height / 2)];
"""
#: the own selection in code points: [from, to]
SELECTION = """
const range = editor.view.state.selection.main;
const text = editor.view.state.doc.toString();
return [[...text.slice(0, range.from)].length, [...text.slice(0, range.to)].length];
"""


def session_name(request: pytest.FixtureRequest) -> str:
    """A session of the test's own."""
    return "cm-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[-30:]


@pytest.fixture
def gateway(session_group: ProcessGroup, tmp_path: Path,
            request: pytest.FixtureRequest) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path, session=session_name(request),
                             users=("ann", "ben", "cat"))
    try:
        yield process
    finally:
        process.stop()




def content(tab: Tab):
    return tab.focus().find_element(By.CSS_SELECTOR, "#text .cm-content")


def click_at(tab: Tab, position: int) -> None:
    """A click just inside the character at ``position`` (code points)."""
    x, y = tab.js(POINT, position)
    ActionChains(tab.focus()).move_to_element_with_offset(content(tab), int(x), int(y)) \
        .click().perform()


def settled(*tabs: Tab) -> None:
    for tab in tabs:
        tab.wait(SETTLED, f"{tab.name}'s edits confirmed", 30)


def same_text(text: str, *tabs: Tab, timeout: float = 30) -> None:
    for tab in tabs:
        tab.wait(f"return {TEXT_OF} === arguments[0]", f"the text at {tab.name}", timeout, text)


def cdp(tab: Tab, command: str, **params) -> None:
    tab.focus().execute_cdp_cmd(command, params)


def terminal(group: ProcessGroup, request: pytest.FixtureRequest) -> EditorProcess:
    """A terminal editor, tom, in the test's session."""
    return terminal_editor(group, "tom", session_name(request), "matrix")


def test_click_shift_selection_and_a_mouse_drag_select_and_typing_replaces(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        content(ann).click()
        ann.keys("text", "alpha beta gamma")
        same_text("alpha beta gamma", ann, ben)
        # a click between "alpha " and "beta" puts the cursor there
        click_at(ann, 6)
        assert ann.js("return editor.position") == 6
        # Shift+Right four times selects "beta"; typing replaces it
        ann.keys("text", Keys.SHIFT, *[Keys.ARROW_RIGHT] * 4, Keys.NULL)
        assert ann.js(SELECTION) == [6, 10]
        ann.keys("text", "BETA")
        same_text("alpha BETA gamma", ann, ben)
        # a drag from the start of "gamma" to its end selects it; typing replaces it
        start = ann.js(POINT, 11)
        end = ann.js(POINT, 16)
        ActionChains(ann.focus()).move_to_element_with_offset(
            content(ann), int(start[0]), int(start[1])).click_and_hold() \
            .move_to_element_with_offset(content(ann), int(end[0]), int(end[1])) \
            .release().perform()
        assert ann.js(SELECTION) == [11, 16]
        ann.keys("text", "G")
        same_text("alpha BETA G", ann, ben)
        # Ctrl-A selects the text only (not the page), Delete empties it everywhere
        ann.keys("text", Keys.CONTROL + "a")
        assert ann.js(SELECTION) == [0, 12]
        ann.keys("text", Keys.DELETE)
        same_text("", ann, ben)
        settled(ann, ben)
        assert ann.js("return editor.replica.failures") == 0 == ben.js(
            "return editor.replica.failures")
    finally:
        tabs.leave(*opened)


def test_undo_and_redo_take_back_only_ones_own_edits(
        gateway: GatewayProcess, tabs: TabOpener, session_group: ProcessGroup,
        request: pytest.FixtureRequest) -> None:
    opened: list[Tab] = []
    tom = terminal(session_group, request)
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        tom.wait_members(3)
        content(ann).click()
        ann.keys("text", "aaa ")
        same_text("aaa ", ann, ben)
        settled(ann)
        # ben types after ann's text, the terminal at the start
        content(ben).click()
        ben.keys("text", Keys.END, "bbb")
        tom.type("goto 0")
        tom.type('type "ccc "')
        same_text("ccc aaa bbb", ann, ben)
        # ann's undo takes back her "aaa " only
        ann.keys("text", Keys.CONTROL + "z")
        same_text("ccc bbb", ann, ben)
        assert ann.js("return editor.binding.undoStack.length") == 0
        # redo puts it back where it was (between the others' edits)
        ann.keys("text", Keys.CONTROL + Keys.SHIFT + "z")
        same_text("ccc aaa bbb", ann, ben)
        # ann deletes ben's "bbb" with three Backspaces; ben types meanwhile elsewhere
        ann.keys("text", Keys.END, Keys.BACKSPACE, Keys.BACKSPACE, Keys.BACKSPACE)
        same_text("ccc aaa ", ann, ben)
        ben.keys("text", Keys.HOME, ">")
        same_text(">ccc aaa ", ann, ben)
        # undo of the delete makes the text again in its place; Ctrl-Y redoes the delete
        ann.keys("text", Keys.CONTROL + "z")
        same_text(">ccc aaa bbb", ann, ben)
        ann.keys("text", Keys.CONTROL + "y")
        same_text(">ccc aaa ", ann, ben)
        # ben's undo takes back ben's own edits only: his ">" (his "bbb" is deleted)
        ben.keys("text", Keys.CONTROL + "z")
        same_text("ccc aaa ", ann, ben)
        settled(ann, ben)
        tom.ask(f"wait-text {json.dumps('ccc aaa ')}", ("seen",), what="the text at tom")
        assert tom.state()["text"] == ann.js(TEXT) == ben.js(TEXT)
    finally:
        tom.quit("quit")
        tabs.leave(*opened)


def test_composition_emoji_with_a_skin_tone_and_cjk_text(
        gateway: GatewayProcess, tabs: TabOpener, session_group: ProcessGroup,
        request: pytest.FixtureRequest) -> None:
    opened: list[Tab] = []
    tom = terminal(session_group, request)
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        tom.wait_members(3)
        content(ann).click()
        ann.keys("text", "CJK: 漢字テキスト ")
        same_text("CJK: 漢字テキスト ", ann, ben)
        # an input method composes "にほん", then commits "日本"
        content(ann).click()
        ann.keys("text", Keys.END)
        cdp(ann, "Input.imeSetComposition", text="にほん", selectionStart=3, selectionEnd=3)
        cdp(ann, "Input.insertText", text="日本")
        same_text("CJK: 漢字テキスト 日本", ann, ben)
        # an emoji with a skin tone (two code points, four UTF-16 units) from an emoji
        # picker, then one Backspace takes the whole of it
        cdp(ann, "Input.insertText", text=" 👍🏽")
        same_text("CJK: 漢字テキスト 日本 👍🏽", ann, ben)
        tom.ask(f"wait-text {json.dumps('CJK: 漢字テキスト 日本 👍🏽')}", ("seen",),
                what="the emoji at tom")
        ann.keys("text", Keys.BACKSPACE)
        final = "CJK: 漢字テキスト 日本 "
        same_text(final, ann, ben)
        # ben deletes a CJK character in the middle with Delete
        content(ben).click()
        ben.keys("text", Keys.HOME, *[Keys.ARROW_RIGHT] * 5, Keys.DELETE)
        final = "CJK: 字テキスト 日本 "
        same_text(final, ann, ben)
        settled(ann, ben)
        tom.ask(f"wait-text {json.dumps(final)}", ("seen",), what="the text at tom")
        assert tom.state()["text"] == final
        assert ann.js("return editor.replica.failures") == 0 == ben.js(
            "return editor.replica.failures")
    finally:
        tom.quit("quit")
        tabs.leave(*opened)


def test_a_paste_of_100000_characters_converges_while_the_other_types(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        content(ann).click()
        ann.keys("text", "top ")
        same_text("top ", ann, ben)
        pasted = ("lorem ipsum dolor 😀 sit amet\n" * 4000)[:100_000]
        ann.js(PASTE, pasted)
        content(ben).click()
        ben.keys("text", Keys.CONTROL, Keys.HOME, Keys.NULL, "ben ")
        text = "ben top " + pasted
        same_text(text, ben, ann, timeout=60)
        settled(ann, ben)
        # the view holds the whole text; the replicas agree with it
        for tab in (ann, ben):
            assert tab.js("return editor.replica.text.value === editor.text()")
            assert tab.js("return editor.replica.failures") == 0
    finally:
        tabs.leave(*opened)


def test_others_cursors_and_selections_show_their_names_in_their_colours_without_overprinting(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        cat = open_editor(tabs, gateway, "cat", opened)
        content(ann).click()
        ann.keys("text", "one two\nthree")
        same_text("one two\nthree", ann, ben, cat)
        # ann and cat put their cursors after "one": one widget at ben's, both names
        click_at(ann, 3)
        content(cat).click()
        cat.keys("text", Keys.CONTROL, Keys.HOME, Keys.NULL, *[Keys.ARROW_RIGHT] * 3)
        widget = ("return [...document.querySelectorAll('#text .cm-remote')]"
                  ".map(w => [w.dataset.members, [...w.querySelectorAll('.cm-remote-label span')]"
                  ".map(s => s.textContent).join(' ')])")
        ben.wait(f"{widget}.some(([m]) => m.split(' ').length === 2)", "one widget for two")
        [(members, label)] = ben.js(widget)
        assert sorted(members.split()) == ["ann", "cat"]
        assert sorted(label.split()) == ["ann", "cat"]
        colours = ben.js("return Object.fromEntries([...document.querySelectorAll("
                         "'#text .cm-remote .cursor')].map(c => [c.dataset.member, "
                         "c.className.split(' ')[1]]))")
        assert colours == {name: f"c{colour_slot(name)}" for name in ("ann", "cat")}
        # the label shows on hover, above the line
        ActionChains(ben.focus()).move_to_element(
            ben.focus().find_element(By.CSS_SELECTOR, "#text .cm-remote")).perform()
        assert ben.js("return getComputedStyle(document.querySelector("
                      "'#text .cm-remote-label')).display") == "block"
        # the same person's colour in every tab: ann's in the members line of each
        for tab in (ben, cat):
            assert tab.js("return document.querySelector('#members [data-member=\"ann\"]')"
                          ".className") == f"c{colour_slot('ann')}"
        # cat moves on: two widgets, each its own name
        cat.keys("text", Keys.END)
        ben.wait(f"{widget}.length === 2", "two widgets")
        assert sorted(m for m, _ in ben.js(widget)) == ["ann", "cat"]
        # ann selects "two" (Shift+End from after "one "): ben sees it in her colour
        # with her name, and her cursor at its end
        click_at(ann, 4)
        ann.keys("text", Keys.SHIFT, Keys.END, Keys.NULL)
        assert ann.js(SELECTION) == [4, 7]
        shown = ("return [...document.querySelectorAll('#text .cm-remote-selection')]"
                 ".map(m => [m.dataset.member, m.textContent, m.className])")
        ben.wait(f"{shown}.length > 0", "ann's selection at ben")
        assert ben.js(shown) == [["ann", "two", f"cm-remote-selection c{colour_slot('ann')}"]]
        assert ben.js(CHARS_BEFORE, ben.js(REMOTE_CURSOR.format("ann"))) == 7
        if os.environ.get("GROUPCOMM_SCREENSHOTS"):
            ActionChains(ben.focus()).move_to_element(ben.focus().find_element(
                By.CSS_SELECTOR, "#text .cm-remote[data-members~='cat']")).perform()
            ben.screenshot("web_editor.png")
        # a click ends the selection: gone at ben
        click_at(ann, 2)
        ben.wait(f"{shown}.length === 0", "ann's selection gone at ben")
    finally:
        tabs.leave(*opened)
