"""A chat line or an edit the gateway answered as sent is not lost when the gateway dies
before it left (docs/web.md, "Kept until the session has it"), also across a reload, in
real headless Chromium through a real gateway killed with SIGKILL: the gateway holds
every tab's frames to tom 3 s (``--delay tom=3000``), so the moment between the answer
and the frame leaving lasts long enough to kill the gateway in it, every time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.web.conftest import Outage, Tab, TabOpener
from tests.web.test_browser_edit import TEXT_OF, open_editor, terminal_editor
from tests.web.test_browser_im import LINES, READY, TerminalChat, open_chat, say
from tests.web.test_browser_outage import DOWN, HOLD_RECONNECT

#: the page does not hear the gateway's `stable` events (as when the gateway dies
#: before it can tell them): what it keeps, it keeps until it is a member again
DEAF_TO_STABLE = """
const event = chat.event;
chat.event = function (e) { if (e.type !== 'stable') event.call(chat, e); };
window.hearStable = () => { chat.event = event; };
"""
KEPT = "return chat.kept.map(e => e.text).join('|')"


@contextmanager
def ann_chatting_with_tom(session_group: ProcessGroup, tmp_path: Path, tabs: TabOpener,
                          name: str) -> Iterator[tuple[Outage, TerminalChat, Tab]]:
    """ann's chat tab on a gateway of her own that holds her frames to tom (a terminal
    chat) 3 s, once tom is among her members; everything stopped after, also on failure."""
    outage = Outage(session_group, tmp_path, name, ("ann",), extra=("--delay", "tom=3000"))
    tom = TerminalChat(session_group, "tom", session=outage.session)
    opened: list[Tab] = []
    try:
        ann = open_chat(tabs, outage.gateway, "ann")
        opened.append(ann)
        ann.wait("return chat.members.includes('tom')", "tom among ann's members")
        yield outage, tom, ann
    finally:
        tom.quit()
        tabs.leave(*opened)
        outage.stop()


def each_once_after(ann: Tab, tom: TerminalChat, texts: tuple[str, ...]) -> None:
    """ann says one more line; once tom has it, tom and ann's page show each of
    ``texts`` and that line exactly once."""
    say(ann, "after")
    tom.wait_line(lambda x: x.endswith("] after"), 30, "the next line at tom")
    for text in (*texts, "after"):
        assert sum(x.endswith(f"] {text}") for x in tom.lines) == 1, (text, tom.lines)
        assert shown_at(ann, text) == 1, (text, ann.js(LINES))


def shown_at(tab: Tab, text: str) -> int:
    return sum(line.endswith(f"] {text}") for line in tab.js(LINES))


@pytest.mark.long
def test_a_line_answered_just_before_the_gateway_dies_reaches_everyone_once(
        session_group: ProcessGroup, tmp_path: Path, tabs: TabOpener) -> None:
    """ann says two lines: the first reaches tom (the page is not told it is stable),
    the second is answered, still held in the gateway, when the gateway is killed. Back
    through the restarted gateway, the tab sends the second again (the conversation it
    gets does not hold it) and not the first (it does); tom and ann's page show each
    once, and once stable the page keeps nothing."""
    with ann_chatting_with_tom(session_group, tmp_path, tabs, "answered") as (outage, tom, ann):
        ann.js(DEAF_TO_STABLE)
        say(ann, "reached tom")
        tom.wait_line(lambda x: x.endswith("] reached tom"), 30, "the first line at tom")
        say(ann, "answered then lost")
        # answered (no longer waiting), kept, and held 3 s in the gateway: killed now
        assert ann.wait(f"return chat.outbox.length === 0 && {KEPT[7:]}",
                        "the second line answered") == "reached tom|answered then lost"
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        assert not any(x.endswith("] answered then lost") for x in tom.lines)
        ann.js("window.hearStable()")
        outage.restart()
        tom.wait_line(lambda x: x.endswith("] answered then lost"), 30,
                      "the lost line at tom, sent again")
        ann.wait("return chat.kept.length === 0 && chat.outbox.length === 0",
                 "nothing kept once tom has it", 30)
        each_once_after(ann, tom, ("reached tom", "answered then lost"))


@pytest.mark.long
def test_edits_confirmed_just_before_the_gateway_dies_reach_the_text_once(
        session_group: ProcessGroup, tmp_path: Path, tabs: TabOpener) -> None:
    """The editor page: ann's keys are confirmed (the gateway answered each) while their
    frames wait 3 s inside the gateway for tom's terminal editor; the gateway is killed
    then. Back through the restarted gateway, the page puts its kept edits back on the
    state it gets (tom's, without them): tom's text has each key once, as ann's has."""
    outage = Outage(session_group, tmp_path, "confirmed", ("ann",),
                    extra=("--delay", "tom=3000"))
    tom = terminal_editor(session_group, "tom", outage.session, "matrix")
    opened: list[Tab] = []
    try:
        ann = open_editor(tabs, outage.gateway, "ann", opened)
        tom.wait_members(2)
        ann.keys("text", "seed")
        tom.ask('wait-text "seed"', ("seen",), 30, "the seed text at tom")
        ann.wait("return editor.outbox.kept.length === 0", "the seed stable", 30)
        ann.keys("text", "abc")
        ann.wait("return editor.replica.unconfirmed.length === 0 && "
                 "editor.outbox.entries.length === 0 && editor.outbox.kept.length === 3",
                 "the keys confirmed and kept")
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        assert tom.state()["text"] == "seed"
        outage.restart()
        tom.ask('wait-text "seedabc"', ("seen",), 30, "the keys at tom, made again")
        ann.wait(f"return {TEXT_OF} === 'seedabc' && editor.outbox.kept.length === 0",
                 "ann's text, nothing kept", 30)
        ann.keys("text", "!")
        tom.ask('wait-text "seedabc!"', ("seen",), 30, "the next key")
        assert tom.state()["text"] == "seedabc!"
    finally:
        tom.quit("quit")
        tabs.leave(*opened)
        outage.stop()


@pytest.mark.long
def test_a_reload_keeps_a_line_answered_just_before_the_gateway_died(
        session_group: ProcessGroup, tmp_path: Path, tabs: TabOpener) -> None:
    """The answered line held in the killed gateway is kept in the tab's session
    storage: the page reloaded before it reconnects sends it from there, once."""
    with ann_chatting_with_tom(session_group, tmp_path, tabs, "reloaded") as (outage, tom, ann):
        say(ann, "kept across a reload")
        ann.wait(f"return chat.outbox.length === 0 && {KEPT[7:]}", "the line answered")
        ann.js(HOLD_RECONNECT)  # this page never reconnects: the reloaded one does
        outage.kill()
        ann.wait(DOWN, "ann to see the gateway gone")
        outage.restart()
        ann.focus().refresh()
        ann.wait(READY, "the reloaded page in the session", 30)
        tom.wait_line(lambda x: x.endswith("] kept across a reload"), 30,
                      "the line at tom, sent by the reloaded page")
        ann.wait("return chat.kept.length === 0", "nothing kept once tom has it", 30)
        each_once_after(ann, tom, ("kept across a reload",))
