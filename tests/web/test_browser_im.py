"""The chat page in a real headless Chromium, with terminal chats in the same session:
a reply that overtakes its cause is held and shown after it, concurrent messages are
marked, /held and /release work, a newcomer sees the conversation so far; and the
refusals a browser meets (wrong credential, another origin, an oversized message) and
a dropped connection."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.keys import Keys

from groupcomm.tools.procs import LineProcess, ProcessGroup
from tests.web.conftest import GatewayProcess, Tab, TabOpener

#: the log's lines as text: a message as "ann·3 [ann] text  (concurrent with bob·1)" (its
#: identity, who, its text, its marks; the time is in MESSAGES), a notice as it reads
LINES = """return [...document.querySelectorAll('#log > div')].map(d => {
  if (!d.classList.contains('message')) return d.textContent;
  const part = (c) => { const e = d.querySelector('.' + c); return e ? e.textContent : ''; };
  return `${d.dataset.ident} [${part('who')}] ${part('text')}` +
    (part('concurrent') ? `  (${part('concurrent')})` : '') +
    (part('waiting-for') ? `  (${part('waiting-for')})` : '') +
    (part('released') ? `  (${part('released')})` : '');
})"""
#: the messages shown: [identity, who, time, text, classes]
MESSAGES = """return [...document.querySelectorAll('#log > div.message')].map(d => [
  d.dataset.ident, d.querySelector('.who').textContent, d.querySelector('time').textContent,
  d.querySelector('.text').textContent, d.className])"""
READY = "return document.getElementById('status').className === 'open'"


@pytest.fixture(scope="module")
def gateway(session_group: ProcessGroup, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path_factory.mktemp("im"),
                             session="chat", users=("ann", "ben", "cat", "dan"))
    try:
        yield process
    finally:
        process.stop()


class TerminalChat(LineProcess):
    """``groupcomm im`` with piped input."""

    def __init__(self, group: ProcessGroup, name: str, *extra: str, session: str = "chat",
                 causality: str = "matrix") -> None:
        assert group.server is not None
        super().__init__(name, [sys.executable, "-m", "groupcomm.apps.im", "--name", name,
                                "--session", session, "--server", group.server.address,
                                "--key-file", str(group.key_file), "--causality", causality,
                                *extra])
        self.wait_line(lambda line: line.startswith(f"* {name} joined"), what="the join")


def open_chat(tabs: TabOpener, gateway: GatewayProcess, user: str) -> Tab:
    tab = tabs.open(gateway.link(user, "im"), user)
    try:
        tab.wait(READY, f"{user}'s chat to join")
    except AssertionError as error:
        raise AssertionError(f"{error}; gateway: {gateway.stderr_tail()}") from None
    return tab


def say(tab: Tab, text: str) -> None:
    tab.keys("input", text, Keys.ENTER)


def line_with(tab: Tab, text: str, what: str = "") -> str:
    return tab.wait(f"{LINES}.find(l => l.includes(arguments[0]))",
                    what or repr(text), 20, text)


@pytest.mark.long
def test_causal_order_marks_held_release_and_the_conversation_so_far(
        gateway: GatewayProcess, session_group: ProcessGroup, tabs: TabOpener) -> None:
    ann = open_chat(tabs, gateway, "ann")
    ben = open_chat(tabs, gateway, "ben")
    # tom's messages reach ann's member 3 s late; uma's never before she leaves
    tom = TerminalChat(session_group, "tom", "--delay", "ann=3000")
    uma = None
    try:
        line_with(ann, "* tom joined")
        line_with(ben, "* tom joined")
        # ben answers tom's question at once; ann gets the answer first: held
        tom.type("question?")
        line_with(ben, "[tom] question?")
        say(ben, "answer!")
        line_with(ben, "[you -> ann, tom] answer!")
        # shown at once as waiting, for tom's question (by its identity at every viewer)
        waiting = line_with(ann, "[ben] answer!  (waiting for ", "the answer waiting")
        question = line_with(ben, "[tom] question?").split(" ")[0]
        assert waiting.endswith(f"(waiting for {question})"), waiting
        ann.screenshot("chat_held.png")
        say(ann, "/held")
        held = line_with(ann, "from ben: 'answer!'", "the held answer in /held")
        assert held.endswith("from ben: 'answer!' (waits on tom)")
        released = line_with(ann, f"(was waiting for {question}; released)")
        lines = [x for x in ann.js(LINES) if "] " in x and not x.startswith(("*", " "))]
        assert [x.split("] ", 1)[1].partition("  (")[0] for x in lines[-2:]] == [
            "question?", "answer!"]
        assert lines[-1] == released and "concurrent" not in released
        assert not any("(waiting for" in x for x in ann.js(LINES))  # it moved, released
        ann.screenshot("chat_released.png")

        # ann speaks before tom's next message reaches her: concurrent at ben
        tom.type("tom speaks")
        line_with(ben, "[tom] tom speaks")
        say(ann, "ann speaks")
        number = line_with(ben, "[tom] tom speaks").split(" ")[0]
        marked = line_with(ben, "[ann] ann speaks")
        assert marked.endswith(f"(concurrent with {number})")
        line_with(ann, "[tom] tom speaks")
        tom.quit()  # (its join marker for uma would reach ann late too)
        line_with(ann, "* tom left")

        # uma leaves before her message reaches ann; ben's reply to it waits on her
        uma = TerminalChat(session_group, "uma", "--delay", "ann=60000")
        line_with(ann, "* uma joined")
        uma.type("from uma")
        line_with(ben, "[uma] from uma")
        say(ben, "re uma")
        line_with(ben, "re uma")
        uma.quit()
        line_with(ann, "* uma left")
        line_with(ann, "* 1 held message(s) wait on uma; /release uma delivers them anyway")
        say(ann, "/held")
        assert line_with(ann, "'re uma'").endswith("from ben: 're uma' (waits on uma)")
        say(ann, "/release uma")
        line_with(ann, "* released 1 message(s) that waited on uma")
        line_with(ann, "[ben] re uma")

        # a newcomer sees the conversation so far, each line named as the others name it
        cat = open_chat(tabs, gateway, "cat")
        line_with(cat, "* up to date")
        history = cat.js(LINES)
        for expected, viewer in (("[tom] question?", ben), ("[ben] answer!", ann),
                                 ("[ann] ann speaks", ben), ("[ben] re uma", ann)):
            [at_cat] = [x for x in history if x.endswith(expected)]
            [there] = [x for x in viewer.js(LINES) if expected in x and "(waiting for" not in x]
            assert at_cat.split(" ")[0] == there.split(" ")[0], (at_cat, there)
        tabs.leave(cat)
    finally:
        tom.quit()
        if uma is not None:
            uma.quit()
        tabs.leave(ann, ben)


def test_a_browser_is_refused_a_wrong_credential_another_origin_and_oversized_messages(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    before = gateway.stats()["counters"]
    wrong = tabs.open(f"{gateway.url}/im#user=dan&token=guessed", "wrong")
    line_with(wrong, "! wrong user name or token (ask for a new login link)")
    # a page of another origin (localhost is not 127.0.0.1) opens a WebSocket here
    elsewhere = tabs.open(gateway.url.replace("127.0.0.1", "localhost") + "/", "elsewhere")
    outcome = elsewhere.focus().execute_async_script("""
        const done = arguments[arguments.length - 1];
        const ws = new WebSocket(arguments[0]);
        ws.onopen = () => done('opened');
        ws.onclose = (event) => done('closed ' + event.code);
    """, f"ws://{gateway.host_port}/ws/im")
    assert outcome == "closed 1006"
    dan = open_chat(tabs, gateway, "dan")
    dan.js("connection.ws.send('x'.repeat(200000))")
    line_with(dan, "! message of 200,000 bytes; at most 131,072")
    after = gateway.stats()["counters"]
    assert after.get("login_failed", 0) - before.get("login_failed", 0) == 1
    assert after.get("refused_origin", 0) - before.get("refused_origin", 0) == 1
    assert after.get("oversized", 0) - before.get("oversized", 0) == 1
    # still connected, still dan
    assert dan.js(READY) and dan.js("return chat.me") == "dan"
    tabs.leave(wrong, elsewhere, dan)


def test_a_dropped_connection_comes_back_as_the_next_incarnation_with_the_conversation(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    ann = open_chat(tabs, gateway, "ann")
    ben = open_chat(tabs, gateway, "ben")
    try:
        line_with(ann, "* ben joined")
        say(ben, "before the drop")
        line_with(ann, "before the drop")
        first = ann.js("return chat.me")
        ann.js("connection.ws.close()")  # the connection drops (not a /quit)
        line_with(ann, "* reconnected")
        ann.wait(f"return chat.me && chat.me !== {first!r}", "ann's next member", 20)
        # the conversation handed over again adds nothing: the line was shown already
        assert sum("] before the drop" in x for x in ann.js(LINES)) == 1, ann.js(LINES)
        say(ann, "after the drop")
        line_with(ben, "] after the drop")
        # ben's tab names ann's next member ann (no incarnation suffix anywhere)
        assert "[ann] after the drop" in line_with(ben, "] after the drop")
        assert not any("ann~" in x for x in ben.js(LINES)), ben.js(LINES)
    finally:
        tabs.leave(ann, ben)


#: the tab reconnects only once ``window.reconnect`` is set
HOLD_RECONNECT = """
const open = connection.open.bind(connection);
connection.open = () => {
  if (window.reconnect) open(); else setTimeout(() => connection.open(), 50);
};
"""


@pytest.mark.long
def test_a_reconnect_adds_only_the_missed_lines_in_their_place(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    """ann's connection drops; ben says a line while she is away. Back, ann's tab adds
    that line only (the conversation handed over holds the earlier ones too), under
    the identity ben's tab gave it, after the line before it."""
    ann = open_chat(tabs, gateway, "ann")
    ben = open_chat(tabs, gateway, "ben")
    cat = open_chat(tabs, gateway, "cat")  # someone for ben to talk to meanwhile
    try:
        line_with(ann, "* cat joined")
        say(ben, "before the drop")
        line_with(ann, "[ben] before the drop")
        first = ann.js("return chat.me")
        ann.js(HOLD_RECONNECT)
        ann.js("connection.ws.close()")
        ben.wait(f"return !chat.members.includes({first!r})", "ann's member gone", 30)
        say(ben, "while you were away")
        said = line_with(ben, "] while you were away").split(" ")[0]
        ann.js("window.reconnect = true")
        line_with(ann, "* 1 missed message(s) added", "the missed line added")
        lines = [x for x in ann.js(LINES) if "] " in x and not x.startswith(("*", " "))]
        assert [x.split("] ", 1)[1] for x in lines[-2:]] == [
            "before the drop", "while you were away"], lines
        assert lines[-1].split(" ")[0] == said
        assert sum("before the drop" in x for x in ann.js(LINES)) == 1
        # its time, as said by ben's clock, in ann's local time
        [[_, who, time, _, _]] = [m for m in ann.js(MESSAGES) if m[3] == "while you were away"]
        assert who == "ben" and re.fullmatch(r"\d\d:\d\d", time), time
    finally:
        tabs.leave(ann, ben, cat)


def test_an_own_message_a_sender_side_module_holds_is_shown_pending_then_sent(
        session_group: ProcessGroup, tabs: TabOpener,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    gateway = GatewayProcess(session_group, tmp_path_factory.mktemp("mfss"),
                             causality="mfss", session="chat-mfss", users=("ann",))
    # tom's acknowledgements reach ann's member 1.5 s late: mfss holds ann's second
    # message to tom until the first is acknowledged
    tom = TerminalChat(session_group, "tom", "--delay", "ann=1500", session="chat-mfss",
                       causality="mfss")
    ann = None
    try:
        ann = open_chat(tabs, gateway, "ann")
        assert "tom" in ann.js("return chat.members")
        say(ann, "one")
        line_with(ann, "ann·1 [you -> tom] one")
        say(ann, "two")
        line_with(ann, "* ann·2 pending: the causality module has not sent it yet")
        line_with(ann, "* ann·2 sent")
        # the same identity at the terminal
        tom.wait_line(lambda line: line.startswith("ann·2 ") and line.endswith("[ann] two"),
                      what="the second message")
        assert not any(x.startswith("* ann·1 pending") for x in ann.js(LINES))
    finally:
        tom.quit()
        if ann is not None:
            tabs.leave(ann)
        gateway.stop()


def test_a_line_longer_than_the_gateway_takes_is_refused_with_its_reason_and_kept(
        gateway: GatewayProcess, tabs: TabOpener) -> None:
    ann = open_chat(tabs, gateway, "ann")
    ben = open_chat(tabs, gateway, "ben")
    try:
        line_with(ann, "* ben joined")
        long_line = "x" * 20_000
        ann.js("document.getElementById('input').value = arguments[0]", long_line)
        ann.keys("input", Keys.ENTER)
        line_with(ann, "! not sent: the line has 20,000 characters; at most 16,384 (split it)")
        # nothing sent, the line still in the box to be split
        assert ann.js("return document.getElementById('input').value") == long_line
        assert ann.js("return chat.outbox.length") == 0
        ann.js("document.getElementById('input').value = ''")
        say(ann, "short")
        line_with(ben, "] short")
        assert not any("xxxx" in x for x in ben.js(LINES))
    finally:
        tabs.leave(ann, ben)
