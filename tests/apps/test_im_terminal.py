"""The IM's input line in a terminal: lines of any length typed or pasted arrive whole,
a line too large for a frame is refused with its size, what arrives while a person
types does not break the line being typed, there is a prompt, and a sent line is shown
once. Piped input (scripted use) reads lines of any length too."""

from __future__ import annotations

import random
import re
import shutil
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from groupcomm.tools.procs import LineProcess, ProcessGroup
from tests.apps.im_harness import Start, paste_text, people, read_message, shown, type_text


@pytest.fixture
def chat(group: ProcessGroup) -> Iterator[Start]:
    yield from people(group)


def words(length: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + "    ") for _ in range(length)).strip()


@pytest.mark.long  # 6 s of typing into a terminal
def test_a_long_typed_line_and_a_long_paste_arrive_whole(chat) -> None:
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    alice.expect(r"\* bob joined")

    typed = words(12_000, 1)  # a terminal's own line editing would stop at 4,095
    type_text(alice, typed)
    alice.send("\r")
    assert read_message(bob, "[alice] ") == typed
    assert read_message(alice, "[you -> bob] ") == typed

    pasted = words(200_000, 2)
    paste_text(alice, pasted)
    alice.send("\r")
    assert read_message(bob, "[alice] ") == pasted
    assert read_message(alice, "[you -> bob] ") == pasted


def test_a_line_larger_than_a_frame_is_not_sent_and_the_sender_is_told(chat) -> None:
    # a frame of 64 KiB leaves 46,080 bytes of payload
    alice = chat("alice", "--causality", "matrix", "--max-frame", "65536")
    bob = chat("bob", "--causality", "matrix", "--max-frame", "65536")
    alice.expect(r"\* bob joined")
    paste_text(alice, "é" * 25_000)  # two bytes each
    alice.send("\r")
    alice.expect_exact("! not sent: 50,000 bytes, the limit is 46,080", timeout=60)
    paste_text(alice, "/to bob " + "x" * 46_081)
    alice.send("\r")
    alice.expect_exact("! not sent: 46,081 bytes, the limit is 46,080", timeout=60)
    alice.sendline("small enough")
    # the first message bob sees is the small one: nothing of the large ones left
    bob.expect(r"(alice·\d+) \d\d:\d\d \[alice\] small enough")
    assert bob.match.group(1) == "alice·1"
    assert "[you ->" not in shown(alice).split("small enough")[0]


def test_what_arrives_while_typing_goes_above_the_line_being_typed(chat) -> None:
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    alice.expect(r"\* bob joined")
    alice.expect_exact("alice>")  # the prompt
    type_text(alice, "half-a-sen")
    bob.sendline("interrupting you")
    alice.expect(r"\S+ \d\d:\d\d \[bob\] interrupting you\r?\n")
    # the input line comes back below it, with what was typed so far
    alice.expect_exact("alice>")
    alice.expect_exact("half-a-sen")
    type_text(alice, "tence")
    alice.send("\r")
    bob.expect(r"\S+ \d\d:\d\d \[alice\] half-a-sentence\r?\n")
    alice.expect(r"\S+ \d\d:\d\d \[you -> bob\] half-a-sentence")


def test_piped_input_reads_lines_of_any_length(group: ProcessGroup, chat) -> None:
    """Scripted use (the demo): stdin a pipe, the plain reader."""
    bob = chat("bob", "--causality", "matrix")
    assert group.server is not None
    alice = LineProcess("alice", [
        sys.executable, "-m", "groupcomm.apps.im", "--name", "alice", "--session", "office",
        "--server", group.server.address, "--key-file", str(group.key_file),
        "--causality", "matrix"])
    try:
        alice.wait_line(lambda s: "joined office with causality" in s, what="the join")
        bob.expect(r"\* alice joined")
        long_line = words(100_000, 3)
        alice.type(long_line)
        assert read_message(bob, "[alice] ") == long_line
        alice.wait_line(lambda s: s.startswith("alice·1 "), what="its own line")
        assert all(long_line not in line for line in alice.lines if not line.startswith("alice·1 "))
    finally:
        alice.quit()


tmux_only = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Tmux:
    """One person's terminal screen (tmux), to look at what is on it."""

    def __init__(self) -> None:
        self.socket = f"groupcomm-im-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> list[str]:
        return [line.rstrip() for line in self.run("capture-pane", "-p", "-t", "alice:0")
                .split("\n")]

    def wait(self, what: str, check, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.screen()
            if check(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} on the screen:\n" + "\n".join(lines))
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10)


@tmux_only
def test_the_screen_shows_a_sent_line_once_above_a_prompt(group: ProcessGroup, chat,
                                                          tmp_path) -> None:
    bob = chat("bob", "--causality", "matrix")
    assert group.server is not None
    tmux = Tmux()
    command = [sys.executable, "-m", "groupcomm.apps.im", "--name", "alice", "--session",
               "office", "--server", group.server.address, "--key-file",
               str(group.key_file), "--causality", "matrix"]
    try:
        tmux.run("new-session", "-d", "-s", "alice", "-x", "100", "-y", "20",
                 " ".join(command) + f" 2> {tmp_path / 'alice.err'}")
        tmux.wait("prompt", lambda lines: any(line == "alice>" for line in lines))
        bob.expect(r"\* alice joined")
        tmux.run("send-keys", "-t", "alice:0", "-l", "hello bob")
        tmux.run("send-keys", "-t", "alice:0", "Enter")
        bob.expect(r"\S+ \d\d:\d\d \[alice\] hello bob")
        tmux.run("send-keys", "-t", "alice:0", "-l", "half typed")
        bob.sendline("and hello alice")
        lines = tmux.wait("bob's answer above the input line",
                          lambda lines: any("[bob] and hello alice" in line for line in lines))
        text = [line for line in lines if line]
        assert [re.sub(r" \d\d:\d\d ", " HH:MM ", line) for line in text
                if "hello bob" in line] == ["alice·1 HH:MM [you -> bob] hello bob"]
        assert text[-1] == "alice> half typed"
        assert re.sub(r" \d\d:\d\d ", " HH:MM ", text[-2]) == "bob·1 HH:MM [bob] and hello alice"
    finally:
        tmux.close()
