"""Nothing typed in a browser is lost, in real headless Chromium through a real gateway:
edits and chat lines made while the gateway is down are kept in the tab and sent once
it is back (also across a reload), exactly once, the cursor at its text; and several
tabs of one person are members of their own that never replace each other."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, Tab, TabOpener
from tests.web.test_browser_edit import CHARS_BEFORE, TEXT, TEXT_OF, open_editor, terminal_editor
from tests.web.test_browser_im import LINES, TerminalChat, line_with, open_chat, say
from tests.web.test_browser_paste import PASTE

SETTLED = ("return document.getElementById('status').className === 'open' "
           "&& document.getElementById('text').dataset.unconfirmed === '0' "
           "&& !editor.resyncing && editor.outbox.entries.length === 0")
DOWN = "return document.getElementById('status').className === 'connecting'"
CARET = "return document.querySelector('#text .caret')"


class Outage:
    """A gateway that a test kills and starts again on the same port with the same
    users (the tabs' login links stay good)."""

    def __init__(self, group: ProcessGroup, workdir: Path, session: str,
                 users: tuple[str, ...]) -> None:
        self.group = group
        self.workdir = workdir
        self.session = session
        self.gateway = GatewayProcess(group, workdir, session=session, users=users)

    def kill(self) -> None:
        self.gateway.kill()  # SIGKILL: no member leaves gracefully

    def restart(self) -> GatewayProcess:
        old = self.gateway
        deadline = time.monotonic() + 20
        while True:  # the port may take a moment to be free again
            try:
                self.gateway = GatewayProcess(self.group, self.workdir, session=self.session,
                                              http=old.host_port, tokens=old.tokens)
                return self.gateway
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self.gateway.stop()


@pytest.fixture
def outage(request: pytest.FixtureRequest, session_group: ProcessGroup,
           tmp_path: Path) -> Iterator[Outage]:
    users = getattr(request, "param", ("ann", "ben"))
    session = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[-40:]
    down = Outage(session_group, tmp_path, f"outage{session}", users)
    try:
        yield down
    finally:
        down.stop()


def settled(*tabs: Tab, gateway: GatewayProcess | None = None) -> None:
    for tab in tabs:
        try:
            tab.wait(SETTLED, f"{tab.name} to be back and settled", 60)
        except AssertionError as error:
            if gateway is None:
                raise
            raise AssertionError(f"{error}; gateway: {gateway.stderr_tail(40)}") from None


@pytest.mark.long
def test_keys_typed_while_the_gateway_is_down_reach_every_screen_once_the_cursor_kept(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    opened: list[Tab] = []
    # the terminal keeps the session's text while the gateway is down
    tom = terminal_editor(session_group, "tom", outage.session, "matrix")
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        ben = open_editor(tabs, outage.gateway, "ben", opened)
        tom.wait_members(3)
        ann.keys("text", "Hello world")
        tom.ask('wait-text "Hello world"', ("seen",), what="the seed text")
        settled(ann, ben)
        ann.keys("text", Keys.HOME, *[Keys.ARROW_RIGHT] * 5)
        settled(ann)
        # keys on their way as the gateway dies, then keys typed while it is down
        ann.keys("text", "abc")
        outage.kill()
        for tab in (ann, ben):
            tab.wait(DOWN, f"{tab.name} to see the gateway gone")
        ann.keys("text", " there")
        # ben deletes the last letter and adds a "!"; the terminal, still in the
        # session, deletes that letter too: ben's delete cannot be sent, and says so
        ben.keys("text", Keys.END, Keys.BACKSPACE, "!")
        tom.type("end")
        tom.type("backspace 1")
        wait_until(lambda: tom.state()["text"].endswith(" worl"), 20, "the terminal's delete")
        ann.wait("return editor.outbox.entries.filter(e => !e.wire).length >= 6",
                 "ann's keys kept")
        assert "kept until the connection is back" in ann.js(
            "return document.getElementById('footer').textContent")
        gateway = outage.restart()
        expected = "Helloabc there worl!"
        settled(ann, ben, gateway=gateway)
        try:
            tom.ask(f'wait-text "{expected}"', ("seen",), 30, "the typed keys at the terminal")
        except Exception:
            print("DEBUG", tom.state(), ann.js(TEXT), ben.js(TEXT), gateway.stderr_tail(40))
            raise
        for tab in (ann, ben):
            tab.wait(f"return {TEXT_OF} === arguments[0]", f"the keys at {tab.name}", 30,
                     expected)
        assert tom.state()["text"] == expected
        # the cursor stayed at its text: after " there", and the next key goes there
        assert ann.js(CHARS_BEFORE, ann.js(CARET)) == len("Helloabc there")
        ann.keys("text", "X")
        tom.ask('wait-text "Helloabc thereX worl!"', ("seen",), 30, "the next key")
        assert ben.wait(f"return {TEXT_OF} === 'Helloabc thereX worl!'", "the next key")
        assert ben.js("return document.getElementById('notice').textContent") == (
            "not sent: the delete of 'd' (someone deleted it already)")
        assert ann.js("return editor.replica.me") != "ann"  # a new incarnation
        assert ann.js("return document.getElementById('notice').textContent") == ""
        assert "bad_edit" not in outage.gateway.stats()["counters"]
    finally:
        tom.quit("quit")
        tabs.leave(*opened)


@pytest.mark.long
def test_a_reload_keeps_the_edits_the_gateway_has_not_confirmed(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    opened: list[Tab] = []
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
        outage.restart()
        # reloaded at once (the page comes from the gateway): the kept keys come back
        # from the tab's session storage, whether or not they went out before
        ann.focus().refresh()
        settled(ann)
        tom.ask('wait-text "one two"', ("seen",), 30, "the kept keys at the terminal")
        assert ann.js(TEXT) == "one two" == tom.state()["text"]
        assert ann.js(CHARS_BEFORE, ann.js(CARET)) == len("one two")
        ann.keys("text", "!")
        tom.ask('wait-text "one two!"', ("seen",), 30, "the next key")
    finally:
        tom.quit("quit")
        tabs.leave(*opened)


@pytest.mark.long
def test_a_chat_line_said_while_the_gateway_is_down_waits_then_reaches_everyone_once(
        outage: Outage, session_group: ProcessGroup, tabs: TabOpener) -> None:
    tom = TerminalChat(session_group, "tom", session=outage.session)
    opened: list[Tab] = []
    try:
        ann = open_chat(tabs, outage.gateway, "ann")
        ben = open_chat(tabs, outage.gateway, "ben")
        opened += [ann, ben]
        line_with(ann, f"* {ben.js('return chat.me')} joined")
        say(ann, "just before")  # on its way as the gateway dies
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        say(ann, "said during the outage")
        waiting = ann.wait("return [...document.querySelectorAll('#waiting div')]"
                           ".map(d => d.textContent).join('|')", "the waiting line")
        assert "(waiting to be sent) said during the outage" in waiting
        assert ann.js("return document.getElementById('input').value") == ""
        outage.restart()
        line_with(ann, "] said during the outage", "the line sent")
        ann.wait("return document.querySelectorAll('#waiting div').length === 0",
                 "no line left waiting")
        line_with(ben, "] said during the outage")
        tom.wait_line(lambda x: x.endswith("] said during the outage"), 30, "the line at tom")
        # anything sent twice would come before this (one sender's order)
        say(ann, "after")
        tom.wait_line(lambda x: x.endswith("] after"), 30, "the next line at tom")
        line_with(ben, "] after")
        for text in ("just before", "said during the outage"):
            assert sum(x.endswith(f"] {text}") for x in tom.lines) == 1, tom.lines
            assert sum(x.startswith("#") and x.endswith(f"] {text}")
                       for x in ben.js(LINES)) == 1, (text, ben.js(LINES))
    finally:
        tom.quit()
        tabs.leave(*opened)


#: types `letter` at the end of the text every `pause` ms for `seconds` s (in the page)
TYPE_FOR = """
const [letter, pause, seconds] = arguments;
window.typed = 0;
window.typing = true;
const until = Date.now() + seconds * 1000;
function step() {
  editor.moveTo(editor.replica.text.visibleLength());
  editor.insert(letter);
  window.typed += 1;
  if (Date.now() < until) setTimeout(step, pause); else window.typing = false;
}
step();
"""


def two_tabs_of_one_person_type(outage: Outage, tabs: TabOpener, seconds: float) -> None:
    opened: list[Tab] = []
    try:
        first = open_editor(tabs, outage.gateway, "ann", opened)
        second = open_editor(tabs, outage.gateway, "ann", opened)
        second.name = "ann's second tab"
        assert first.js("return editor.replica.me") == "ann"
        assert second.js("return editor.replica.me") == "ann:2"
        assert "tab 2 of ann, a member of its own (ann:2)" in second.js(
            "return document.getElementById('tabline').textContent")
        first.wait("return editor.replica.members.length === 2", "the second tab at the first")
        logins = outage.gateway.stats()["counters"]["logins"]
        first.js(TYPE_FOR, "a", 40, seconds)
        second.js(TYPE_FOR, "b", 40, seconds)
        for tab in (first, second):
            tab.wait("return !window.typing", f"{tab.name}'s typing", seconds + 60)
        settled(first, second)
        typed = {"a": first.js("return window.typed"), "b": second.js("return window.typed")}
        wait_until(lambda: first.js(TEXT) == second.js(TEXT), 30, "the two tabs to agree")
        text = first.js(TEXT)
        assert {c: text.count(c) for c in "ab"} == typed and len(text) == sum(typed.values())
        # no tab replaced the other: the same two members, no login since
        stats = outage.gateway.stats()
        assert stats["counters"]["logins"] == logins
        assert sorted(stats["tabs"]) == ["edit/ann", "edit/ann:2"]
        assert first.js("return editor.replica.me") == "ann"
        assert second.js("return editor.replica.me") == "ann:2"
        # a reload of the second tab keeps its number and does not touch the first
        second.focus().refresh()
        settled(second)
        assert second.js("return editor.replica.me") == "ann:2~2"
        assert second.js(TEXT) == text
        assert outage.gateway.stats()["counters"]["logins"] == logins + 1
        assert first.js("return editor.replica.me") == "ann"
    finally:
        tabs.leave(*opened)


@pytest.mark.parametrize("outage", [("ann",)], indirect=True)
def test_two_tabs_of_one_person_type_at_once_without_replacing_each_other(
        outage: Outage, tabs: TabOpener) -> None:
    two_tabs_of_one_person_type(outage, tabs, 1)


@pytest.mark.long
@pytest.mark.parametrize("outage", [("ann",)], indirect=True)
def test_two_tabs_of_one_person_type_for_30_seconds_without_a_replacement_or_a_lost_key(
        outage: Outage, tabs: TabOpener) -> None:
    two_tabs_of_one_person_type(outage, tabs, 30)


#: the chat page's first `sent` answer for a line with this text is dropped, as when
#: the gateway dies between sending the line and answering the tab
LOSE_ANSWER = """
const text = arguments[0];
const event = chat.event.bind(chat);
let lost = false;
chat.event = (e) => {
  if (!lost && e.type === 'sent' && e.text === text) lost = true; else event(e);
};
"""


#: the page reconnects only once `window.reconnect` is set
HOLD_RECONNECT = """
const open = connection.open.bind(connection);
connection.open = () => {
  if (window.reconnect) open(); else setTimeout(() => connection.open(), 50);
};
"""


@pytest.mark.long
def test_a_private_line_whose_answer_the_dying_gateway_lost_reaches_its_receiver_once(
        outage: Outage, tabs: TabOpener) -> None:
    """ann's /to ben went out and reached ben, but the gateway died before telling ann's
    tab: the tab sends it again once back (nothing tells it the line arrived, no
    conversation holds private lines), and ben's tab shows it once, by the id the line
    carries both times; the next line shows it was the resent copy that was dropped."""
    opened: list[Tab] = []
    try:
        ann = open_chat(tabs, outage.gateway, "ann")
        ben = open_chat(tabs, outage.gateway, "ben")
        opened += [ann, ben]
        line_with(ann, f"* {ben.js('return chat.me')} joined")
        ann.js(LOSE_ANSWER, "only once please")
        say(ann, "/to ben only once please")
        line_with(ben, "[ann -> you] only once please", "the first copy at ben")
        assert ann.js("return chat.outbox.length") == 1  # no answer: still kept
        outage.kill()
        for tab in (ann, ben):
            tab.wait(DOWN, f"{tab.name} to see the gateway gone")
        # ann's tab comes back after ben's (else its line could go before ben is there)
        ann.js(HOLD_RECONNECT)
        outage.restart()
        ben.wait("return document.getElementById('status').className === 'open'",
                 "ben back", 60)
        ann.js("window.reconnect = true")
        ann.wait("return chat.outbox.length === 0 && document.getElementById('status')"
                 ".className === 'open'", "ann's line sent again and answered", 60)
        ann.wait("return [...document.querySelectorAll('#log div')].some(d => "
                 "d.textContent.endsWith('] only once please') && d.textContent.includes("
                 "'you -> '))", "the resent line at ann")
        say(ann, "/to ben the next one")
        line_with(ben, "[ann~2 -> you] the next one", "the next line at ben")
        shown = [x for x in ben.js(LINES) if x.endswith("] only once please")]
        assert len(shown) == 1, ben.js(LINES)
        counters = outage.gateway.stats()["counters"]
        assert "malformed" not in counters and "refused" not in counters
    finally:
        tabs.leave(*opened)


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
        assert ann.js("return editor.resyncing && editor.waiting.length") == 2
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        ann.keys("text", "ef")
        ann.wait("return editor.outbox.entries.filter(e => !e.wire).length === 4",
                 "the keys kept")
        assert "(4 kept until the connection is back)" in ann.js(
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
