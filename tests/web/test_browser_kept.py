"""What a tab keeps, in real headless Chromium through a real gateway (killed and
started again by the ``outage`` fixture): a paste larger than session storage is named
on the page; keys pressed during a resync the drop cut short are kept; a duplicated tab
(with Web Locks, and without: a BroadcastChannel) never sends the original's kept
edits; without Web Locks a reload sends them and another arrival says it did not; the
tab judges "already delivered" by the state's ``seen`` clock (its own modules on the
case outbox_seen_case.mjs, and a real tab whose insert the others deleted and
collected while it was away)."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import Outage, Tab, TabOpener
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor, terminal_editor
from tests.web.test_browser_outage import DOWN, HOLD_RECONNECT, settled
from tests.web.test_browser_paste import PASTE

#: fills the page's session storage up to `arguments[0]` characters short of its quota
#: (under another key), so that a paste of a few hundred thousand characters, not
#: megabytes, meets the quota; returns the characters written
FILL_STORAGE = """
let low = 0, high = 20e6;
while (high - low > 1000) {
  const mid = Math.floor((low + high) / 2);
  try { sessionStorage.setItem('filler', 'x'.repeat(mid)); low = mid; }
  catch (error) { high = mid; }
}
const size = Math.max(0, low - arguments[0]);
sessionStorage.setItem('filler', 'x'.repeat(size));
return size;
"""
KEPT = "return document.getElementById('kept').textContent"


@pytest.mark.long
@pytest.mark.parametrize("outage", [("ann",)], indirect=True)
def test_a_paste_the_session_storage_cannot_hold_is_named_on_the_page_then_sent(
        outage: Outage, tabs: TabOpener) -> None:
    """A paste while the gateway is down that the tab's session storage cannot hold is
    kept in memory only, and the page says so in one line; once the gateway is back it
    goes out and the line goes."""
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        settled(ann)
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        assert ann.js(FILL_STORAGE, 100_000) > 1_000_000
        paste = "pasted while down\n" * 20_000  # 360,000 characters
        ann.js(PASTE, paste)
        line = ann.wait(KEPT, "the line naming what only the tab keeps")
        assert line == ("360,000 characters are kept in this tab only: a reload would "
                        "lose them")
        ann.js("sessionStorage.removeItem('filler')")
        outage.restart()
        settled(ann, gateway=outage.gateway)
        assert ann.js(KEPT) == ""
        assert ann.js(TEXT) == paste  # (ann alone: the session starts empty again)
    finally:
        for tab in opened:
            tab.js("sessionStorage.removeItem('filler')")
        tabs.leave(*opened)


#: the page's resync requests go nowhere: a resync stays under way (as one whose state
#: was on its way when the connection dropped)
HOLD_RESYNC = """
const send = editor.connection.send.bind(editor.connection);
editor.connection.send = (request) => request.type === 'resync' ? true : send(request);
editor.resync();
"""


@pytest.mark.long
def test_keys_pressed_during_a_resync_the_drop_cut_short_are_kept_across_a_reload(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    """Keys pressed while a resync is under way wait for its state; when the connection
    drops first, they are applied and kept like keys typed while it is down (the
    footer counts them), so a reload before the gateway is back keeps them too."""
    opened: list[Tab] = []
    # the terminal keeps the session's text while the gateway is down
    tom = terminal_editor(session_group, "tom", outage.session, "matrix")
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        tom.wait_members(2)
        ann.keys("text", "ab")
        tom.ask('wait-text "ab"', ("seen",), what="the first keys")
        settled(ann)
        ann.js(HOLD_RESYNC)
        ann.keys("text", "cd")
        # both keys wait (gathered in one change set: two characters more)
        assert ann.js("return editor.resyncing && editor.held.newLength - editor.held.length") == 2
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        ann.keys("text", "ef")
        # kept: the two keys that waited (made again as one insert) and the next two
        ann.wait("return editor.outbox.entries.filter(e => !e.wire).length === 3",
                 "the keys kept")
        assert "(3 kept until the connection is back)" in ann.js(
            "return document.getElementById('footer').textContent")
        outage.restart()
        ann.focus().refresh()  # from the tab's session storage
        settled(ann, gateway=outage.gateway)
        tom.ask('wait-text "abcdef"', ("seen",), 30, "the kept keys at the terminal")
        assert ann.js(TEXT) == "abcdef"
    finally:
        tom.quit("quit")
        tabs.leave(*opened)


#: the editor page reconnects only once `window.reconnect` is set
HOLD_EDITOR_RECONNECT = HOLD_RECONNECT.replace("connection", "editor.connection")
TABLINE = "return document.getElementById('tabline').textContent"
NO_LOCKS = "Object.defineProperty(Navigator.prototype, 'locks', {get: () => undefined});"


def duplicate(tabs: TabOpener, tab: Tab, *, locks: bool = True) -> Tab:
    """What the browser's "duplicate tab" does: a new tab with a copy of the tab's
    session storage, opened at its address. With ``locks``, by ``window.open`` from the
    page (Chromium gives a same-origin window it opens a copy of the opener's session
    storage); without (as on a page that is not a secure origin), a new window whose
    pages lack the Web Locks API gets the copy written into it first."""
    driver = tab.driver
    if locks:
        before = set(driver.window_handles)
        tab.js("window.open(location.href)")
        wait_until(lambda: len(driver.window_handles) > len(before), 10, "the copy's window")
        [handle] = set(driver.window_handles) - before
        driver.switch_to.window(handle)
        return Tab(driver, handle, f"{tab.name}'s copy")
    storage = tab.js("return JSON.stringify(Object.assign({}, sessionStorage))")
    url = tab.js("return location.href")
    driver.switch_to.new_window("tab")
    copy = Tab(driver, driver.current_window_handle, f"{tab.name}'s copy")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_LOCKS})
    driver.get(url.split("/edit")[0] + "/static/style.css")  # the origin, for its storage
    copy.js("for (const [k, v] of Object.entries(JSON.parse(arguments[0]))) "
            "sessionStorage.setItem(k, v)", storage)
    driver.get(url)
    return copy


@pytest.mark.long
@pytest.mark.parametrize("locks", [True, False], ids=["web-locks", "broadcast-channel"])
def test_a_duplicated_tab_is_a_member_of_its_own_and_never_sends_the_originals_kept_edits(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener, locks: bool) -> None:
    """The tab is duplicated while keys typed during an outage wait in its session
    storage (the copy gets them too): the copy finds the original holds them (a Web
    Lock, or without Web Locks an answer on a BroadcastChannel), starts with nothing
    kept and says it is a copy; the original sends its keys once; the two are different
    members, each page says which, and what both type next arrives once."""
    opened: list[Tab] = []
    copy: Tab | None = None
    tom = terminal_editor(session_group, "tom", outage.session, "matrix")
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        tom.wait_members(2)
        ann.keys("text", "one ")
        tom.ask('wait-text "one "', ("seen",), what="the first word")
        settled(ann)
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        ann.keys("text", "two")
        ann.wait("return editor.outbox.entries.length === 3", "the keys kept")
        ann.js(HOLD_EDITOR_RECONNECT)
        outage.restart()
        copy = duplicate(tabs, ann, locks=locks)
        copy.wait("return document.getElementById('status').className === 'open'",
                  "the copy to join", 30)
        assert copy.js("return editor.claim.copied") is True
        assert copy.js("return navigator.locks === undefined") is (not locks)
        assert "This tab is a copy of another open tab" in copy.js(TABLINE)
        assert copy.js("return editor.outbox.entries.length") == 0
        ann.js("window.reconnect = true")
        settled(ann, copy, gateway=outage.gateway)
        tom.ask('wait-text "one two"', ("seen",), 30, "the kept keys at the terminal")
        members = {ann.js("return editor.replica.me"), copy.js("return editor.replica.me")}
        assert {m.split("~")[0] for m in members} == {"ann", "ann:2"}
        for tab in (ann, copy):
            me = tab.js("return editor.replica.me").split("~")[0]
            assert f"({me})" in tab.js(TABLINE)
        assert "copy" not in ann.js(TABLINE)
        ann.js("editor.moveTo(editor.replica.text.visibleLength()); editor.insert('A')")
        copy.js("editor.moveTo(0); editor.insert('B')")
        tom.ask('wait-text "Bone twoA"', ("seen",), 30, "what both typed")
        for tab in (ann, copy):
            tab.wait(f"return {TEXT_OF} === 'Bone twoA'", f"both keys at {tab.name}")
        assert "bad_edit" not in outage.gateway.stats()["counters"]
    finally:
        tom.quit("quit")
        if copy is not None:  # not for later tests (a document script may stay)
            copy.focus().close()
            tabs.driver.switch_to.window(opened[0].handle)
        tabs.leave(*opened)


@pytest.mark.long
def test_without_web_locks_a_reload_sends_what_was_kept_and_another_arrival_says_it_did_not(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    """A page without the Web Locks API (as on plain http to another machine): after a
    reload, nobody answers for its key and it is a reload, so the keys kept while the
    gateway was down go once; arriving at the page again by a link (no reload), nobody
    answers either, but that cannot be told from a copy whose original did not answer:
    the keys kept are not sent, and the page says so."""
    tom = terminal_editor(session_group, "tom", outage.session, "matrix")
    if tabs.driver is None:  # the browser, with a window for later tests
        tabs.free.append(tabs.open("about:blank", "blank").handle)
    driver = tabs.driver
    window = None
    try:
        driver.switch_to.new_window("tab")
        window = driver.current_window_handle
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_LOCKS})
        driver.get(outage.gateway.link("ann", "edit"))
        ann = Tab(driver, window, "ann")
        settled(ann)
        assert ann.js("return navigator.locks === undefined") is True
        tom.wait_members(2)
        ann.keys("text", "one ")
        tom.ask('wait-text "one "', ("seen",), what="the first word")
        settled(ann)
        for word, arrive in (("two", "reload"), (" three", "link")):
            outage.kill()
            ann.wait(DOWN, "ann to see the gateway gone")
            ann.keys("text", word)
            ann.wait(f"return editor.outbox.entries.length === {len(word)}", "the keys kept")
            ann.js(HOLD_EDITOR_RECONNECT)
            outage.restart()
            if arrive == "reload":
                ann.focus().refresh()
            else:
                driver.get(ann.js("return location.href"))
            settled(ann, gateway=outage.gateway)
            tom.ask('wait-text "one two"', ("seen",), 30, "the text at the terminal")
        assert ann.js(TEXT) == "one two"
        assert "was not sent again: without Web Locks" in ann.js(TABLINE)
        assert ann.js("return editor.claim.unsure") is True
        ann.keys("text", Keys.END, "!")
        tom.ask('wait-text "one two!"', ("seen",), 30, "the next key")
    finally:
        tom.quit("quit")
        if window is not None:  # not for later tests (its document script stays)
            driver.switch_to.window(window)
            driver.close()
            driver.switch_to.window(driver.window_handles[0])


#: runs outbox_seen_case.mjs (its source: arguments[0]) on the page's own modules
SEEN_CASE = """
const [source, done] = arguments;
const assert = {
  equal(a, b) { if (a !== b) throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`); },
  deepEqual(a, b) {
    if (JSON.stringify(a) !== JSON.stringify(b)) {
      throw new Error(`${JSON.stringify(a)} differs from ${JSON.stringify(b)}`);
    }
  },
};
const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
Promise.all([import("/static/outbox.js"), import("/static/editor.js"),
             import("/static/text_sequence.js"), import(url)])
  .then(([outbox, editor, text, cases]) => {
    cases.checkSeenRule({ Outbox: outbox.Outbox, EditorReplica: editor.EditorReplica,
                          TextSequence: text.TextSequence }, assert);
    done("ok");
  })
  .catch((error) => done(String(error.stack || error)));
"""


@pytest.mark.parametrize("outage", [("ann",)], indirect=True)
def test_the_tabs_own_modules_judge_an_insert_the_others_collected_as_delivered(
        outage: Outage, tabs: TabOpener) -> None:
    """The case of outbox_seen_case.mjs (also run by node) in Chromium, on the modules
    the gateway serves: an own insert the received state's `seen` clock counts is not
    made again, though the others deleted and collected its characters."""
    tab = tabs.open(outage.gateway.url + "/", "a page")
    try:
        source = (Path(__file__).parent / "outbox_seen_case.mjs").read_text()
        assert tab.focus().execute_async_script(SEEN_CASE, source) == "ok"
    finally:
        tabs.leave(tab)


#: the editor page's next `sent` answer is dropped, as when the gateway dies between
#: sending an edit and answering the tab
LOSE_EDIT_ANSWER = """
const event = editor.event.bind(editor);
let lost = false;
editor.event = (e) => { if (!lost && e.type === 'sent') lost = true; else event(e); };
"""


@pytest.mark.long
@pytest.mark.parametrize("outage", [("ann",)], indirect=True)
def test_an_insert_the_others_deleted_and_collected_is_not_made_again_after_a_drop(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    """ann's "x" reached the terminal but its answer never reached the tab; while the
    gateway is down the terminal deletes the "x" and, alone, collects it (no trace of
    it in the text). Back, the tab gets a state whose `seen` clock counts the "x": it is
    not made again, though no character of it is there to match."""
    opened: list[Tab] = []
    # (each key one edit: the terminal collects every 64 edits applied)
    tom = terminal_editor(session_group, "tom", outage.session, "matrix", "--coalesce", "0")
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        tom.wait_members(2)
        ann.keys("text", "Hi")
        tom.ask('wait-text "Hi"', ("seen",), what="the first keys")
        settled(ann)
        ann.js(LOSE_EDIT_ANSWER)
        ann.keys("text", "x")
        tom.ask('wait-text "Hix"', ("seen",), what="the x")
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        assert ann.js("return editor.outbox.entries.map(e => [e.op[2], e.wire])") == [
            ["x", True]]
        tom.type("end")
        tom.type("backspace 1")
        wait_until(lambda: tom.state()["members"] == ["tom"], 30, "ann's member gone")
        for _ in range(64):  # enough edits for the terminal to collect
            tom.type('type "a"')
        tom.ask(f'wait-text "Hi{"a" * 64}"', ("seen",), 30, "the terminal's keys")
        wait_until(lambda: (lambda s: s["kept"] == len(s["text"]))(tom.state()), 30,
                   "the deleted x collected at the terminal")
        outage.restart()
        settled(ann, gateway=outage.gateway)
        wait_until(lambda: tom.state()["text"] == ann.js(TEXT), 30, "the tab and the terminal")
        assert "x" not in ann.js(TEXT)
    finally:
        tom.quit("quit")
        tabs.leave(*opened)
