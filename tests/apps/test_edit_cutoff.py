"""The shared editor in real terminals (tmux) cut off while people type: a member
frozen (SIGSTOP) past the heartbeat timeout, with keys typed meanwhile, comes back as a
new member and sends what the session did not get; the session server killed (SIGKILL)
and restarted on its port during typing. Every character typed is then in every
member's text exactly once, and the cursor stays by the character before it."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.apps.im_harness import fixed_port_group
from tests.apps.test_edit import HEIGHT, Terminals, wait_for

__all__ = ["fixed_port_group"]  # a fixture, used by name


@pytest.fixture
def terminals(fixed_port_group: ProcessGroup, tmp_path: Path) -> Iterator[Terminals]:
    started = Terminals(fixed_port_group, tmp_path)
    try:
        yield started
    finally:
        started.close()


def editor_pid(terminals: Terminals, name: str) -> int:
    """The editor's process (the pane runs it under a shell that redirects stderr)."""
    pid = int(terminals.tmux("display-message", "-p", "-t", f"{name}:0",
                             "#{pane_pid}").strip())
    for _ in range(50):
        # the editor's own arguments (the shell has the whole command as one)
        if "groupcomm.apps.edit" in Path(f"/proc/{pid}/cmdline").read_text().split("\0"):
            return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            pid = int(children[0])
        else:
            time.sleep(0.1)
    raise AssertionError(f"no editor process under {name}'s pane")


def status_line(terminals: Terminals, name: str) -> str:
    return terminals.screen(name)[HEIGHT - 1].rstrip()


def start_two(terminals: Terminals, *extra: str, width: int = 100) -> None:
    for name in ("alice", "bob"):
        terminals.start(name, "--causality", "matrix", *extra, width=width)
    for name in ("alice", "bob"):
        wait_for(f"{name} to see both", lambda n=name: "alice" in terminals.screen(n)[0]
                 and "bob" in terminals.screen(n)[0], terminals, "alice", "bob")


def tokens(prefix: str, first: int, count: int) -> list[str]:
    return [f"<{prefix}{k}>" for k in range(first, first + count)]


def saved_texts(terminals: Terminals, tmp_path: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Quit every editor (each saves its text to NAME.txt) and read the files."""
    for name in names:
        terminals.keys(name, "C-q")
    for name in names:
        wait_for(f"{name} to leave", lambda n=name: not terminals.running(n), terminals, name)
    return {name: (tmp_path / f"{name}.txt").read_text() for name in names}


def assert_each_once(texts: dict[str, str], typed: list[str]) -> None:
    assert len(set(texts.values())) == 1, texts
    text = next(iter(texts.values()))
    counts = {token: text.count(token) for token in typed}
    assert [t for t, n in counts.items() if n != 1] == [], text
    # nothing but what was typed
    assert re.sub(r"<[ab]\d+>", "", text).strip() == "", text


def test_a_frozen_editor_comes_back_as_a_new_member_and_sends_what_it_typed_once(
        terminals: Terminals, tmp_path: Path) -> None:
    start_two(terminals)
    terminals.keys("alice", "-l", "<a0><a1>")
    terminals.keys("bob", "-l", "<b0><b1>")
    wait_for("both edits everywhere", lambda: all(
        "<a1>" in terminals.text(n) and "<b1>" in terminals.text(n) for n in ("alice", "bob")),
        terminals, "alice", "bob")
    bob = editor_pid(terminals, "bob")
    os.kill(bob, signal.SIGSTOP)
    try:
        # typed at bob's frozen terminal: the keys wait in it until he resumes
        frozen = tokens("b", 2, 4)
        terminals.keys("bob", "-l", "".join(frozen))
        terminals.keys("alice", "-l", "<a2>")
        wait_for("alice to see bob gone", lambda: "bob" not in terminals.screen("alice")[0],
                 terminals, "alice")
    finally:
        os.kill(bob, signal.SIGCONT)
    wait_for("bob back as bob~2", lambda: "bob~2" in terminals.screen("alice")[0]
             and "bob~2 (you)" in terminals.screen("bob")[0], terminals, "alice", "bob")
    wait_for("the texts to agree", lambda: terminals.text("alice") == terminals.text("bob")
             and "<b5>" in terminals.text("alice") and "<a2>" in terminals.text("bob"),
             terminals, "alice", "bob")
    wait_for("bob told what went again", lambda: "made while cut off sent again"
             in status_line(terminals, "bob"), terminals, "bob")
    # the cursor stayed after what bob typed while frozen
    terminals.keys("bob", "-l", "<b6>")
    wait_for("bob's next key after his frozen typing", lambda: "<b5><b6>"
             in terminals.text("alice"), terminals, "alice", "bob")
    texts = saved_texts(terminals, tmp_path, ("alice", "bob"))
    assert_each_once(texts, ["<a0>", "<a1>", "<a2>", "<b0>", "<b1>", *frozen, "<b6>"])


@pytest.mark.long
@pytest.mark.parametrize("frozen_first", [False, True], ids=["killed", "frozen-then-killed"])
def test_editors_typing_through_a_killed_and_restarted_server_lose_nothing(
        fixed_port_group: ProcessGroup, terminals: Terminals, tmp_path: Path,
        frozen_first: bool) -> None:
    """With the editors' default options (the reliable layer under the module); frozen
    first, the server dies holding frames it was sent, which the layer retransmits
    (with --no-reliable those are lost: docs/sessions.md)."""
    start_two(terminals, width=250)
    typed: list[str] = []
    # alice types on the second line, bob at the start of the first, a token at a time,
    # before, during and after the outage
    terminals.keys("alice", "-l", "<a0>")
    terminals.keys("alice", "Enter")
    wait_for("alice's first line at bob", lambda: "<a0>" in terminals.text("bob"),
             terminals, "bob")
    typed.append("<a0>")
    k = 1

    def type_round(count: int) -> None:
        nonlocal k
        for _ in range(count):
            for name, prefix in (("alice", "a"), ("bob", "b")):
                token = f"<{prefix}{k}>"
                terminals.keys(name, "-l", token)
                typed.append(token)
            k += 1
            time.sleep(0.05)

    type_round(10)
    assert fixed_port_group.server is not None
    if frozen_first:
        fixed_port_group.server.process.send_signal(signal.SIGSTOP)
        type_round(5)                        # read by its socket, never relayed
    fixed_port_group.server.kill()          # SIGKILL: frames inside it die with it
    type_round(10)
    fixed_port_group.start_server()
    type_round(10)
    wait_for("the texts to agree", lambda: terminals.text("alice") == terminals.text("bob")
             and f"<a{k - 1}>" in terminals.text("bob")
             and f"<b{k - 1}>" in terminals.text("alice"),
             terminals, "alice", "bob", timeout=40)
    texts = saved_texts(terminals, tmp_path, ("alice", "bob"))
    assert_each_once(texts, typed)
