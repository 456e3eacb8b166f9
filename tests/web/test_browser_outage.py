"""Nothing typed in a browser is lost, in real headless Chromium through a real gateway:
edits and chat lines made while the gateway is down are kept in the tab and sent once
it is back (also across a reload), exactly once, the cursor at its text; and several
tabs of one person are members of their own that never replace each other."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.procs import ProcessGroup
from tests.helpers import wait_until
from tests.web.conftest import GatewayProcess, Outage, Tab, TabOpener
from tests.web.test_browser_edit import TEXT, TEXT_OF, open_editor, terminal_editor
from tests.web.test_browser_im import LINES, TerminalChat, line_with, open_chat, say

SETTLED = ("return document.getElementById('status').className === 'open' "
           "&& document.getElementById('text').dataset.unconfirmed === '0' "
           "&& !editor.resyncing && editor.outbox.entries.length === 0")
DOWN = "return document.getElementById('status').className === 'connecting'"
#: the own cursor's place (code points)
CARET = "return editor.position"


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
        assert ann.js(CARET) == len("Helloabc there")
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
        assert ann.js(CARET) == len("one two")
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
        line_with(ann, "* ben joined")
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
            # ben sees each line once: live, or, for the line on its way as the gateway
            # died, added from the history its new member gets after reconnecting
            lines = ben.js(LINES)
            assert sum(x.endswith(f"[ann] {text}") for x in lines) == 1, (text, lines)
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


@pytest.mark.long
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
        line_with(ann, "* ben joined")
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
        ann.wait(f"{LINES}.some(x => x.endsWith('] only once please') && x.includes("
                 "'you -> '))".replace("return ", "return (", 1) + ")",
                 "the resent line at ann")
        say(ann, "/to ben the next one")
        line_with(ben, "[ann -> you] the next one", "the next line at ben")
        shown = [x for x in ben.js(LINES) if x.endswith("] only once please")]
        assert len(shown) == 1, ben.js(LINES)
        counters = outage.gateway.stats()["counters"]
        assert "malformed" not in counters and "refused" not in counters
    finally:
        tabs.leave(*opened)
