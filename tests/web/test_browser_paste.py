"""Pastes in the editor page, in a real headless Chromium through a real gateway: a paste
of any size goes out as inserts within the gateway's limits and reaches both tabs; a
paste the gateway refuses is taken back in the paster's tab, the reason on screen."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.web.requests import MAX_MESSAGE, MAX_TEXT
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor

pytestmark = pytest.mark.long

#: a paste as the browser makes one: a `paste` event carrying the clipboard's text, on
#: CodeMirror's content
PASTE = """
const data = new DataTransfer();
data.setData('text/plain', arguments[0]);
document.querySelector('#text .cm-content').dispatchEvent(
  new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
"""
SETTLED = ("return document.getElementById('text').dataset.unconfirmed === '0' "
           "&& !editor.resyncing")
NOTICE = "return document.getElementById('notice').textContent"
AT_END = "editor.moveTo(editor.replica.text.visibleLength())"
#: characters a paste carries: lines, quotes and backslashes (escaped in JSON), accents
#: (2 bytes), an emoji (4 bytes, 2 UTF-16 units, one character), a control character
ALPHABET = "abcdefghij klmnop\n\"\\éü😀\x01"


def clipboard(size: int) -> str:
    return (ALPHABET * (size // len(ALPHABET) + 1))[:size]


@pytest.fixture(scope="module")
def gateway(session_group: ProcessGroup,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path_factory.mktemp("paste"),
                             session="doc-paste", users=("ann", "ben"))
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def two_tabs(gateway: GatewayProcess, tabs: TabOpener) -> Iterator[tuple[Tab, Tab]]:
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, gateway, "ann", opened)
        ben = open_editor(tabs, gateway, "ben", opened)
        ann.wait("return editor.replica.members.length === 2", "ben at ann")
        ann.keys("text", "seed ")
        for tab in (ann, ben):
            tab.wait(f"return {TEXT_OF}.endsWith('seed ')", f"the seed at {tab.name}")
            tab.wait(SETTLED, f"{tab.name} to settle")
        yield ann, ben
    finally:
        tabs.leave(*opened)


def refusals(gateway: GatewayProcess) -> int:
    counters = gateway.stats()["counters"]
    return sum(counters.get(c, 0) for c in ("malformed", "oversized", "refused"))


@pytest.mark.parametrize("size", [20_400, 200 * 1024, 1024 * 1024])
def test_a_paste_larger_than_one_insert_reaches_both_tabs(
        gateway: GatewayProcess, two_tabs: tuple[Tab, Tab], size: int) -> None:
    ann, ben = two_tabs
    before, refused = ann.js(TEXT), refusals(gateway)
    pasted = clipboard(size)
    ann.js(AT_END)
    started = time.monotonic()
    ann.js(PASTE, pasted)
    for tab in (ann, ben):
        tab.wait(f"return {TEXT_OF}.length === arguments[0]", f"the paste at {tab.name}",
                 120, len((before + pasted).encode("utf-16-le")) // 2)
        tab.wait(SETTLED, f"{tab.name} to settle", 120)
    # the figure docs/web.md ("Speed") gives (-s shows it; not checked: timing is noisy)
    print(f"a paste of {size:,} characters: in both tabs, settled, after "
          f"{time.monotonic() - started:.1f} s")
    assert ann.js(TEXT) == before + pasted == ben.js(TEXT)
    assert ann.js(NOTICE) == "" and refusals(gateway) == refused
    assert ann.js("return editor.replica.failures") == 0 == ben.js(
        "return editor.replica.failures")
    # sent as inserts within the gateway's limits
    assert ann.js("return editor.runLimit") == MAX_TEXT


def test_a_refused_paste_is_taken_back_with_its_reason(
        gateway: GatewayProcess, two_tabs: tuple[Tab, Tab]) -> None:
    ann, ben = two_tabs
    before, refused = ann.js(TEXT), refusals(gateway)
    # a tab that splits pastes more coarsely than the gateway takes (a page of another
    # version): its 20,400 characters go out as one insert, which is refused
    for run_limit, size, reason in (
            (30_000, 20_400, f"inserted text has 20,400 characters; at most {MAX_TEXT:,}"),
            # a message too large to be read: the refusal names no edit
            (10**6, 200 * 1024, f"bytes; at most {MAX_MESSAGE:,}")):
        ann.js(f"editor.runLimit = editor.replica.runLimit = {run_limit}; {AT_END}")
        ann.js(PASTE, clipboard(size))
        notice = ann.wait(NOTICE, "the reason on screen", 30)
        assert notice.startswith("edit refused and taken back: ") and reason in notice
        ann.wait(SETTLED, "ann to take the paste back", 30)
        assert ann.js(TEXT) == before
        assert ann.js("return document.getElementById('status').className") == "open"
        ben.wait(SETTLED, "ben to settle")
        assert ben.js(TEXT) == before
    assert refusals(gateway) == refused + 2
    # the tab goes on editing with the others, the reason gone with its next edit
    ann.js(f"editor.runLimit = editor.replica.runLimit = {MAX_TEXT}; {AT_END}")
    ann.keys("text", "!")
    for tab in (ann, ben):
        tab.wait(f"return {TEXT_OF} === arguments[0]", f"the next edit at {tab.name}", 20,
                 before + "!")
    assert ann.js(NOTICE) == ""
