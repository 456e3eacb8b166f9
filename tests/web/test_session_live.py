"""The live session view in a real headless Chromium: ``groupcomm watch`` following the
trace directory of a real session of three processes in which one message is held (a
delay injected from bob to carol), and ``/session`` on a gateway open in two tabs while
people chat. With ``GROUPCOMM_SCREENSHOTS=DIR`` the tests save the pictures of
docs/web.md there (``GROUPCOMM_SCREENSHOTS=docs/images .venv/bin/python -m pytest -m long
tests/web/test_session_live.py``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.procs import LineProcess, ProcessGroup
from tests.web.conftest import BrowserFactory, GatewayProcess, Tab, TabOpener
from tests.web.test_browser_im import TerminalChat

HELD = """[...document.querySelectorAll('li.held')].map(
  l => [l.closest('tr').dataset.member, l.dataset.msg, l.textContent])"""
ARROWS = """[...document.querySelectorAll('line.arrow')].map(
  a => [a.dataset.msg, a.dataset.to, a.dataset.marks])"""
CLOCK = """const row = document.querySelector(`tr[data-member="${arguments[0]}"]`);
return row ? row.querySelector('td.clock').textContent : null"""


class Watch(LineProcess):
    """``groupcomm watch`` on a free port."""

    def __init__(self, trace_dir: Path) -> None:
        super().__init__("watch", [sys.executable, "-m", "groupcomm.web.watch",
                                   "--trace-dir", str(trace_dir), "--port", "0"])
        try:
            line = self.wait_line(lambda x: x.startswith("watching "), what="the URL")
        except BaseException:
            self.kill()  # reaped also when it never came up
            raise
        self.url = line.split()[-1]




@pytest.mark.long
def test_watch_shows_the_held_message_its_cause_and_its_release(
        tmp_path: Path, browser: BrowserFactory) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "stray.jsonl").write_text("not a trace line\n", encoding="utf-8")
    with ProcessGroup(tmp_path / "run") as group:
        watch = Watch(traces)
        try:
            peers = {name: group.start_peer(name, causality="matrix", trace_dir=str(traces))
                     for name in ("alice", "bob", "carol")}
            group.wait_members(list(peers))
            driver = browser.open(watch.url)
            driver.set_window_size(1100, 760)
            page = Tab(driver, driver.current_window_handle, "session view")
            page.wait("return document.getElementById('status').textContent.startsWith('live')",
                      "the page to connect")
            peers["bob"].command(op="delay", peer="carol", ms=4000)
            peers["bob"].command(op="send", to="others", payload="question", label="q")
            question = peers["bob"].wait_for(lambda e: e.get("event") == "sent")["id"]
            peers["alice"].wait_for(lambda e: e.get("event") == "deliver"
                                    and e.get("id") == question, what="the question")
            peers["alice"].command(op="send", to="others", payload="answer", label="a")
            answer = peers["alice"].wait_for(lambda e: e.get("event") == "sent")["id"]
            # the cause is named once bob's send record is read too (his file may be
            # flushed after carol's)
            held = page.wait(f"return {HELD}.filter(h => h[0] === 'carol' && h[1] === "
                             f"'{answer}' && h[2].includes('waits for {question}'))",
                             "carol's held answer and its cause")
            text = held[0][2]
            assert text.startswith(f"carol holds {answer}: waits for {question}"), text
            assert "needs bob ≥" in text and "carol has bob:" in text, text
            # the dashed line needs bob's send drawn: his file may be read after alice's
            # delivery of his question named it
            waits = page.wait("const w = [...document.querySelectorAll('line.waits-for')]"
                              ".map(l => [l.dataset.msg, l.dataset.cause]); "
                              "return w.length ? w : null", "the waits-for line")
            assert waits == [[answer, question]]
            arrivals = page.wait("const a = [...document.querySelectorAll('line.arrival')]"
                                 ".map(l => [l.dataset.msg, l.dataset.to]); "
                                 "return a.length ? a : null", "the held answer's arrival")
            assert arrivals == [[answer, "carol"]]
            page.screenshot("session_view_held.png")
            peers["carol"].wait_for(lambda e: e.get("event") == "deliver"
                                    and e.get("id") == answer, 20, "the released answer")
            page.wait(f"return {HELD}.length === 0", "the hold to end")
            arrows = page.wait(f"return {ARROWS}.filter(a => a[1] === 'carol')", "arrows to carol")
            page.wait(f"return {ARROWS}.filter(a => a[1] === 'carol').length >= 2",
                      "both arrows to carol")
            arrows = page.js("return " + ARROWS)
            assert {(m, to) for m, to, _ in arrows} >= {
                (question, "alice"), (question, "carol"), (answer, "bob"), (answer, "carol")}
            assert page.js("return document.querySelectorAll('line.held-span').length") >= 1
            assert page.js(CLOCK, "carol").startswith("[alice:")
            # the matrix module's SENT as carol knows it: bob's question and alice's answer
            matrix = page.js("return [...document.querySelectorAll("
                             "'tr[data-member=carol] table.matrix tr')].map(r => r.textContent)")
            assert matrix == ["sent→alicebobcarol", "alice011", "bob101"], matrix
            page.screenshot("session_view_released.png")
            # the slider back to the hold: carol holds the answer again, as then
            hold_step = page.js("return [...document.querySelectorAll('circle.hold')].length")
            assert hold_step == 1
            page.js("""const s = document.getElementById('slider');
              const steps = Number(s.max); s.value = String(steps - 4);
              s.dispatchEvent(new Event('input'));""")
            page.js("""const s = document.getElementById('slider');
              for (let v = Number(s.max); v >= Number(s.min); v--) {
                s.value = String(v); s.dispatchEvent(new Event('input'));
                if (document.querySelectorAll('li.held').length) break; }""")
            assert [h[:2] for h in page.js("return " + HELD)] == [["carol", answer]]
            assert "(live)" not in page.js("return document.getElementById('at').textContent")
            page.js("document.getElementById('live').click()")
            assert page.js("return " + HELD) == []
        finally:
            watch.terminate()
        assert "stray.jsonl:1: bad trace line skipped (not JSON" in watch.stderr_tail(40)


@pytest.mark.long
def test_watch_marks_the_violation_of_a_session_without_causal_order(
        tmp_path: Path, browser: BrowserFactory) -> None:
    """The same exchange under ``none``: carol shows the answer before the question, and
    the diagram marks the question's arrow as the violation, the answer's as early."""
    traces = tmp_path / "traces"
    with ProcessGroup(tmp_path / "run") as group:
        watch = Watch(traces.parent)
        try:
            peers = {name: group.start_peer(name, causality="none", trace_dir=str(traces))
                     for name in ("alice", "bob", "carol")}
            group.wait_members(list(peers))
            peers["bob"].command(op="delay", peer="carol", ms=1500)
            peers["bob"].command(op="send", to="others", payload="question", label="q")
            question = peers["bob"].wait_for(lambda e: e.get("event") == "sent")["id"]
            peers["alice"].wait_for(lambda e: e.get("event") == "deliver"
                                    and e.get("id") == question, what="the question")
            peers["alice"].command(op="send", to="others", payload="answer", label="a")
            answer = peers["alice"].wait_for(lambda e: e.get("event") == "sent")["id"]
            peers["carol"].wait_for(lambda e: e.get("event") == "deliver"
                                    and e.get("id") == question, 20, "the late question")
            driver = browser.open(watch.url + "?view=traces")
            driver.set_window_size(1100, 560)
            page = Tab(driver, driver.current_window_handle, "session view")
            marks = page.wait(f"return {ARROWS}.filter(a => a[1] === 'carol' && a[2])"
                              f".length === 2 && {ARROWS}.filter(a => a[1] === 'carol')",
                              "the marks at carol")
            assert sorted((m, mark) for m, _, mark in marks) == [
                (answer, "early"), (question, "violation")]
            assert page.js("return " + HELD) == []  # none holds nothing
            page.screenshot("session_view_violation.png")
        finally:
            watch.terminate()


@pytest.fixture(scope="module")
def gateway(session_group: ProcessGroup, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path_factory.mktemp("live"),
                             session="live", users=("ann", "ben", "cat"))
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.long
def test_gateway_session_view_in_two_tabs_follows_the_chat(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    refused = tabs.open(gateway.url + "/session", "no credential")
    refused.wait("return document.getElementById('status').textContent.includes('wrong user')",
                 "the refusal")
    views = [tabs.open(gateway.link(user, "session") + "", f"{user}'s view")
             for user in ("ann", "ben")]
    chats = {}
    for user in ("ann", "ben"):
        chats[user] = tabs.open(gateway.link(user, "im"), user)
        chats[user].wait("return document.getElementById('status').className === 'open'",
                         f"{user}'s chat")
    chats["ann"].keys("input", "hello ben", Keys.ENTER)
    for view in views:
        arrows = view.wait(f"return {ARROWS}.filter(a => a[1] === 'ben' && a[0].startsWith('ann#'))",
                           "ann's line delivered at ben")
        assert arrows[0][2] == ""
        assert view.js(CLOCK, "ben").startswith("[ann:")
        assert view.js("return document.getElementById('views').value") == "im"
    assert gateway.stats()["session_view"]["pages"] >= 2
    tabs.leave(*views, *chats.values(), refused)


@pytest.mark.long
def test_gateway_session_view_names_what_a_tab_waits_for_from_a_terminal_member(
        session_group: ProcessGroup, tabs: TabOpener, tmp_path: Path) -> None:
    """bob is a terminal chat (no trace at the gateway) whose lines reach cat's tab 4 s
    late: ann's answer waits at cat for bob's question, named from ann's delivery."""
    gateway = GatewayProcess(session_group, tmp_path, session="held", users=("ann", "cat"))
    try:
        watch_held_at_a_tab(gateway, session_group, tabs)
    finally:
        gateway.stop()


def watch_held_at_a_tab(gateway: GatewayProcess, session_group: ProcessGroup,
                        tabs: TabOpener) -> None:
    view = tabs.open(gateway.link("ann", "session"), "ann's view")
    view.focus().set_window_size(1000, 560)
    chats = {}
    for user in ("ann", "cat"):
        chats[user] = tabs.open(gateway.link(user, "im"), user)
        chats[user].wait("return document.getElementById('status').className === 'open'",
                         f"{user}'s chat")
    bob = TerminalChat(session_group, "bob", "--delay", "cat=4000", session="held")
    try:
        bob.type("a question?")
        chats["ann"].wait("return document.getElementById('log').textContent"
                          ".includes('a question?')", "bob's question at ann")
        chats["ann"].keys("input", "an answer", Keys.ENTER)
        held = view.wait(f"return {HELD}.filter(h => h[0] === 'cat' && "
                         "h[2].includes('waits for bob#'))", "cat's held answer")
        assert held[0][1].startswith("ann") and "needs bob ≥" in held[0][2], held
        view.screenshot("session_view_gateway.png")
        # bob's send is not in the gateway's records: his line's deliveries are marks
        # without an arrow
        view.wait(f"return {HELD}.length === 0 && [...document.querySelectorAll("
                  "'circle.orphan')].some(c => c.dataset.to === 'cat' && "
                  "c.dataset.msg.startsWith('bob#'))", "the release at cat")
        assert any(a[1] == "cat" and a[0] == held[0][1] for a in view.js("return " + ARROWS))
    finally:
        bob.quit()
        tabs.leave(view, *chats.values())
