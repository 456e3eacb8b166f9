"""The editor with a paper-sized text (100,000 characters): a late joiner gets the exact
text and can edit; a person in a terminal opens the file, moves through it, types, and
sees another member's edit where it was made."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.procs import LineProcess, ProcessGroup
from tests.apps.test_edit import HEIGHT, Terminals, status_line, wait_for

CHARS = 100_000


def paper() -> str:
    """About 100,000 characters in lines of 80, each starting with its number."""
    words = "the of and a to in is that for it as was with be by on not he this".split()
    lines = []
    total = 0
    while total < CHARS:
        number = len(lines) + 1
        body = " ".join(words[(number * 7 + k) % len(words)] for k in range(20))
        line = f"L{number:04d} {body}"[:79]
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


@pytest.fixture
def editors(group: ProcessGroup) -> Iterator:
    started: list[LineProcess] = []

    def start(name: str, *extra: str) -> LineProcess:
        assert group.server is not None
        person = LineProcess(name, [
            sys.executable, "-m", "groupcomm.apps.edit", "--batch", "--name", name,
            "--session", "paper", "--server", group.server.address, "--key-file",
            str(group.key_file), "--causality", "matrix", *extra])
        started.append(person)
        person.wait_line(lambda line: f"{name} joined paper" in line, 60, "its join")
        return person

    try:
        yield start
    finally:
        for person in started:
            person.quit("quit")


def show(person: LineProcess) -> dict:
    """The editor's state, from the answer to a new ``show``."""
    shown = sum(1 for line in list(person.lines) if line.startswith("text "))
    person.type("show")
    answers: list[str] = []

    def answered(_line: str) -> bool:
        answers[:] = [line for line in list(person.lines) if line.startswith("text ")]
        return len(answers) > shown

    person.wait_line(answered, 30, "show")
    return json.loads(answers[shown][5:])


def test_a_late_joiner_into_a_paper_with_a_history_gets_the_exact_text_and_edits(
        editors, tmp_path: Path) -> None:
    (tmp_path / "paper.txt").write_text(paper())
    alice = editors("alice", "--file", str(tmp_path / "paper.txt"))
    carol = editors("carol")
    alice.type("random 300 1")
    carol.type("random 300 2")
    for person in (alice, carol):
        person.wait_line(lambda s: s.startswith("done"), 60, "its edits")
        person.type("quiet 0.3")
        person.wait_line(lambda s: s == "quiet", 60, "quiet")
    bob = editors("bob")  # returns once bob has the text and can edit
    expected = show(alice)["text"]
    got = show(bob)
    assert len(expected) > CHARS and got["text"] == expected and got["failures"] == 0
    bob.type("goto 50000")
    bob.type('type "NEWCOMER"')
    alice.type('wait-text "NEWCOMER" 30')
    alice.wait_line(lambda s: s.startswith(("seen", "error")), 40, "bob's edit")
    assert alice.lines[-1] == 'seen "NEWCOMER"'
    assert show(alice)["text"] == show(bob)["text"] == expected[:50000] + "NEWCOMER" + \
        expected[50000:]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_person_edits_a_paper_sized_file_in_a_terminal_and_sees_the_others(
        group: ProcessGroup, editors, tmp_path: Path) -> None:
    text = paper()
    (tmp_path / "alice.txt").write_text(text)
    terminals = Terminals(group, tmp_path)
    try:
        terminals.start("alice", "--causality", "matrix")
        wait_for("the paper on screen", lambda: terminals.screen("alice")[1].startswith(
            "L0001 "), terminals, "alice", timeout=60)
        assert f"{len(text)} chars" in status_line(terminals, "alice")
        terminals.keys("alice", "PageDown", "PageDown", "PageDown")  # to line 61
        wait_for("line 61 in view, at the bottom", lambda: terminals.screen("alice")[
            HEIGHT - 2].startswith("L0061 "), terminals, "alice")
        terminals.keys("alice", "-l", "HELLO")
        wait_for("the typing where the cursor is", lambda: terminals.screen("alice")[
            HEIGHT - 2].startswith("HELLOL0061 "), terminals, "alice")
        bob = editors("bob")
        at = text.index("L0060 ")  # the line above alice's
        bob.type(f"goto {at}")
        bob.type('type "WORLD"')
        wait_for("bob's edit on alice's screen", lambda: terminals.screen("alice")[
            HEIGHT - 3].startswith("WORLDL0060 "), terminals, "alice")
        terminals.keys("alice", "Up", "End")  # the end of line 60
        terminals.keys("alice", "-l", "!")
        wait_for("typing at the end of a line", lambda: terminals.screen("alice")[
            HEIGHT - 3].rstrip().endswith("!"), terminals, "alice")
        terminals.keys("alice", "PageUp", "PageUp", "PageUp", "PageUp")
        wait_for("back at the top", lambda: terminals.screen("alice")[1].startswith(
            "L0001 "), terminals, "alice")
        terminals.keys("alice", "C-q")
        wait_for("alice to leave", lambda: not terminals.running("alice"), terminals, "alice")
        line_60_end = text.index("\nL0061 ")
        expected = (text[:at] + "WORLD" + text[at:line_60_end] + "!" + "\nHELLO"
                    + text[line_60_end + 1:])
        assert (tmp_path / "alice.txt").read_text() == expected
        bob.type('wait-text "!\\nHELLOL0061" 30')
        bob.wait_line(lambda s: s.startswith(("seen", "error")), 40, "alice's edits")
        assert show(bob)["text"] == expected
    finally:
        terminals.close()
