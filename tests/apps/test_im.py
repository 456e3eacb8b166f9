"""The IM application driven through a terminal (a pseudo-terminal) by three people."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pexpect
import pytest

from groupcomm.tools.procs import ProcessGroup


@pytest.fixture
def chat(group: ProcessGroup) -> Iterator:
    started: list[pexpect.spawn] = []

    def start(name: str, *extra: str) -> pexpect.spawn:
        assert group.server is not None
        child = pexpect.spawn(
            sys.executable,
            ["-m", "apps.im", "--name", name, "--session", "office", "--server",
             group.server.address, "--key-file", str(group.key_file), *extra],
            encoding="utf-8", timeout=20, dimensions=(40, 160),
        )
        started.append(child)
        child.expect(f"{name} joined office with causality")
        return child

    yield start
    for child in started:
        if child.isalive():
            child.sendline("/quit")
            try:
                child.expect(pexpect.EOF, timeout=5)
            except pexpect.ExceptionPexpect:
                pass
        child.close(force=True)


@pytest.mark.parametrize("causality", ["none", "matrix", "cykas"])
def test_three_people_chat_through_terminals(chat, causality: str) -> None:
    # alice's messages to bob are delayed, so bob can answer before seeing hers
    alice = chat("alice", "--causality", causality, "--delay", "bob=1500")
    bob = chat("bob", "--causality", causality)
    alice.expect(r"\* bob joined")
    carol = chat("carol", "--causality", causality)
    for person in (alice, bob):
        person.expect(r"\* carol joined \(alice, bob, carol\)")

    alice.sendline("hello everyone")
    alice.expect(r"#1 \[you -> bob, carol\] hello everyone")
    bob.expect(r"#1 \[alice\] hello everyone")
    carol.expect(r"#1 \[alice\] hello everyone")

    bob.sendline("/to carol psst, just you")
    bob.expect(r"#2 \[you -> carol\] psst, just you")
    carol.expect(r"#2 \[bob\] psst, just you")

    carol.sendline("/who")
    carol.expect(r"\* members: alice, bob, carol")
    carol.sendline("/frobnicate")
    carol.expect(r"unknown command /frobnicate; commands: .*/to NAME text")
    carol.sendline("/to mallory hi")
    carol.expect(r"! unknown user\(s\) 'mallory'")

    # concurrent messages are marked: alice and bob speak without seeing each other
    alice.sendline("lunch at noon?")
    bob.sendline("lunch at one?")
    carol.expect(r"#(\d) \[(alice|bob)\] lunch at (noon|one)\?")
    first = carol.match.group(1)
    carol.expect(r"\[(alice|bob)\] lunch at (noon|one)\?  \(concurrent with [#\d, ]*#" + first)
    bob.expect(r"#3 \[you -> alice, carol\] lunch at one\?")
    bob.expect(r"#4 \[alice\] lunch at noon\?  \(concurrent with #2, #3\)")

    bob.sendline("/quit")
    bob.expect(r"\* bye")
    alice.expect(r"\* bob left")
    carol.expect(r"\* bob left")
