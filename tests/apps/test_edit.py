"""The shared editor driven in real terminals (tmux) as people would drive it: three
editors typing into the same place at once, with a slow link, a late joiner, the
others' cursors, the files they save, and the traces checked."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from groupcomm.apps.colours import colour_slot
from groupcomm.apps.edit_screen import COLOURS
from groupcomm.tools.procs import ProcessGroup
from trace_analysis.reference import check_directory

#: the ANSI background code of each prompt_toolkit colour the screen uses
BACKGROUNDS = {"ansired": 41, "ansigreen": 42, "ansiyellow": 43, "ansiblue": 44,
               "ansimagenta": 45, "ansicyan": 46}

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 100, 16


class Terminals:
    """tmux sessions on a private tmux server, one per person."""

    def __init__(self, group: ProcessGroup, workdir: Path) -> None:
        self.group = group
        self.workdir = workdir
        self.socket = f"groupcomm-test-{uuid.uuid4().hex[:8]}"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def start(self, name: str, *extra: str, file: bool = True, width: int = WIDTH,
              cwd: Path | None = None) -> None:
        """Start ``name``'s editor (saving to ``NAME.txt`` unless not ``file``) in a
        terminal ``width`` columns wide, in ``cwd``; the pane stays after it exits, so
        that what it printed last can be read (``running`` then turns False)."""
        assert self.group.server is not None
        command = [sys.executable, "-m", "groupcomm.apps.edit", "--name", name,
                   "--session", "paper", "--server", self.group.server.address,
                   "--key-file", str(self.group.key_file), "--trace-dir",
                   str(self.workdir / "traces"),
                   *(["--file", str(self.workdir / f"{name}.txt")] if file else []), *extra]
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(HEIGHT),
                  "-c", str(cwd or self.workdir),
                  " ".join(command) + f" 2> {self.workdir / name}.err")
        self.tmux("set-option", "-w", "-t", f"{name}:0", "remain-on-exit", "on")

    def keys(self, name: str, *keys: str) -> None:
        self.tmux("send-keys", "-t", f"{name}:0", *keys)

    def screen(self, name: str, escapes: bool = False) -> list[str]:
        flags = ["-e"] if escapes else []
        return self.tmux("capture-pane", "-p", *flags, "-t", f"{name}:0").split("\n")

    def printed(self, name: str) -> list[str]:
        """Every line of the pane, its history included, wrapped lines joined."""
        return [line.rstrip() for line in self.tmux(
            "capture-pane", "-p", "-J", "-S", "-", "-t", f"{name}:0").split("\n")]

    def text(self, name: str) -> str:
        """The text area: between the title bar and the status bar."""
        lines = self.screen(name)[1:HEIGHT - 1]
        return "\n".join(line.rstrip() for line in lines).rstrip("\n")

    def running(self, name: str) -> bool:
        listed = subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", name],
                                capture_output=True, timeout=10)
        if listed.returncode != 0:
            return False
        return self.tmux("display-message", "-p", "-t", f"{name}:0",
                         "#{pane_dead}").strip() != "1"

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10)


def wait_for(what: str, check: Callable[[], bool], terminals: Terminals, *names: str,
             timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    screens = "\n\n".join(f"--- {n} ---\n" + "\n".join(terminals.screen(n)) for n in names
                          if terminals.running(n))
    errors = "\n".join((terminals.workdir / f"{n}.err").read_text() for n in names
                       if (terminals.workdir / f"{n}.err").exists())
    pytest.fail(f"timed out waiting for {what}\n{screens}\n{errors}")


@pytest.fixture
def terminals(group: ProcessGroup, tmp_path: Path) -> Iterator[Terminals]:
    started = Terminals(group, tmp_path)
    try:
        yield started
    finally:
        started.close()


def test_three_editors_type_at_one_place_and_converge_and_a_late_joiner_sees_the_text(
        terminals: Terminals, tmp_path: Path) -> None:
    (tmp_path / "alice.txt").write_text("Dear team,\nthe plan:\n")
    # alice's edits reach bob 0.8 s late, with jitter everywhere: bob types before
    # seeing what alice typed at the same place
    terminals.start("alice", "--causality", "matrix", "--delay", "bob=800", "--jitter", "20")
    wait_for("alice's seeded text", lambda: terminals.text("alice") == "Dear team,\nthe plan:",
             terminals, "alice")
    terminals.start("bob", "--causality", "matrix", "--jitter", "20")
    terminals.start("carol", "--causality", "matrix", "--jitter", "20")
    people = ("alice", "bob", "carol")
    for name in people:
        wait_for(f"{name} to see everyone",
                 lambda n=name: "members: alice" in terminals.screen(n)[0]
                 and "carol" in terminals.screen(n)[0], terminals, *people)
        wait_for(f"{name} to have the text",
                 lambda n=name: terminals.text(n) == "Dear team,\nthe plan:", terminals, *people)

    # everyone goes to the end of the second line and types there at once
    for name in people:
        terminals.keys(name, "Down", "End")
    for name, word in zip(people, (" A1 A2", " B1 B2", " C1 C2"), strict=True):
        terminals.keys(name, "-l", word)

    def converged() -> bool:
        texts = {terminals.text(n) for n in people}
        return len(texts) == 1 and all(w in next(iter(texts)) for w in ("A1 A2", "B1 B2",
                                                                          "C1 C2"))

    wait_for("the three screens to show the same text", converged, terminals, *people)
    text = terminals.text("alice")
    assert text.startswith("Dear team,\nthe plan: ") and len(text) == len(
        "Dear team,\nthe plan:") + 18
    # each run stays in one piece: concurrent inserts at one place are ordered, not mixed
    assert all(f"{x}1 {x}2" in text for x in "ABC")

    # presence: bob moves to the start of the text without editing; carol sees his
    # cursor there, in his colour (by his name: the same in every tab and terminal)
    terminals.keys("bob", "Up", "Home")
    background = BACKGROUNDS[COLOURS[colour_slot("bob")]]
    wait_for("bob's cursor on carol's screen",
             lambda: re.search(rf"\x1b\[30m\x1b\[{background}mD", "\n".join(
                 terminals.screen("carol", escapes=True))) is not None, terminals, "carol")

    # a late joiner gets the current text and takes part
    terminals.start("dave", "--causality", "matrix")
    wait_for("dave to have the text", lambda: terminals.text("dave") == text, terminals,
             "dave")
    terminals.keys("dave", "-l", "!")
    wait_for("dave's edit everywhere",
             lambda: len({terminals.text(n) for n in (*people, "dave")}) == 1
             and terminals.text("alice").startswith("!Dear"), terminals, *people, "dave")
    final = terminals.text("alice")

    for name in (*people, "dave"):
        terminals.keys(name, "C-q")
    for name in (*people, "dave"):
        wait_for(f"{name} to leave", lambda n=name: not terminals.running(n), terminals, name)
    saved = {name: (tmp_path / f"{name}.txt").read_text() for name in (*people, "dave")}
    assert len(set(saved.values())) == 1              # byte for byte, the seed's last newline
    assert next(iter(saved.values())).rstrip("\n") == final  # included

    result = check_directory(tmp_path / "traces")
    assert result.causal_violations == 0 and result.fifo_violations == 0
    assert result.duplicates == 0 and result.undelivered == 0
    assert result.deliveries > 20


def test_a_module_that_cannot_carry_the_text_is_refused_with_the_reason(
        group: ProcessGroup) -> None:
    for module, reason in [("none", "no delivery order"),
                           ("cykas", "one unicast per destination")]:
        done = subprocess.run(
            [sys.executable, "-m", "groupcomm.apps.edit", "--name", "eve", "--session",
             "paper", "--server", group.server.address, "--causality", module],
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert f"groupcomm edit: refusing {module}: " in done.stderr and reason in done.stderr
        assert "--allow-divergence" in done.stderr


def status_line(terminals: Terminals, name: str) -> str:
    return terminals.screen(name)[HEIGHT - 1].rstrip()


def test_quitting_without_a_file_asks_first_and_can_save_in_the_current_directory(
        terminals: Terminals, tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    (here / "paper.txt").write_text("someone else's file\n")  # never overwritten
    terminals.start("alice", "--causality", "matrix", file=False, cwd=here)
    terminals.start("bob", "--causality", "matrix", file=False, cwd=here)
    for name in ("alice", "bob"):
        wait_for(f"{name} to see both", lambda n=name: "bob" in terminals.screen(n)[0]
                 and "alice" in terminals.screen(n)[0], terminals, "alice", "bob")
    terminals.keys("alice", "-l", "draft one")
    wait_for("the text at bob's", lambda: terminals.text("bob") == "draft one", terminals,
             "alice", "bob")

    # Ctrl-Q asks; n stays, and the text is still there to edit
    terminals.keys("alice", "C-q")
    wait_for("the question", lambda: status_line(terminals, "alice").startswith(
        " quit without saving? y quit · n stay · s save to ./paper-2.txt · the others "
        "keep the text"), terminals, "alice")
    terminals.keys("alice", "n")
    wait_for("the question gone", lambda: "not quitting" in status_line(terminals, "alice"),
             terminals, "alice")
    assert terminals.running("alice")
    terminals.keys("alice", "-l", "!")
    wait_for("the edit after staying", lambda: terminals.text("bob") == "draft one!",
             terminals, "alice", "bob")

    # Ctrl-Q, s: saved to a new file in the current directory, and it says where
    terminals.keys("alice", "C-q")
    wait_for("the question again", lambda: "quit without saving?" in status_line(
        terminals, "alice"), terminals, "alice")
    terminals.keys("alice", "s")
    wait_for("alice to leave", lambda: not terminals.running("alice"), terminals, "alice")
    saved = here / "paper-2.txt"
    assert saved.read_text() == "draft one!"
    assert (here / "paper.txt").read_text() == "someone else's file\n"
    assert f"saved 10 characters to {saved}" in terminals.printed("alice")

    # the last member is told the text goes with it; y quits without saving
    wait_for("bob alone", lambda: "alice" not in terminals.screen("bob")[0], terminals, "bob")
    terminals.keys("bob", "C-q")
    wait_for("bob's question", lambda: status_line(terminals, "bob").startswith(
        " quit without saving? y quit · n stay · s save to ./paper-3.txt · nobody else "
        "has the text"),
        terminals, "bob")
    terminals.keys("bob", "y")
    wait_for("bob to leave", lambda: not terminals.running("bob"), terminals, "bob")
    assert sorted(p.name for p in here.iterdir()) == ["paper-2.txt", "paper.txt"]


def test_an_empty_text_quits_at_once(terminals: Terminals, tmp_path: Path) -> None:
    terminals.start("alice", "--causality", "matrix", file=False)
    wait_for("the editor", lambda: "members: alice" in terminals.screen("alice")[0],
             terminals, "alice")
    terminals.keys("alice", "C-q")
    wait_for("alice to leave", lambda: not terminals.running("alice"), terminals, "alice")


def test_the_status_line_fits_a_narrow_terminal_and_keeps_what_matters(
        terminals: Terminals) -> None:
    width = 40
    terminals.start("alice", "--causality", "matrix-delta", width=width)
    wait_for("the editor", lambda: "alice" in terminals.screen("alice")[0], terminals,
             "alice")
    terminals.keys("alice", "-l", "abcdefgh")
    terminals.keys("alice", "BSpace", "BSpace", "BSpace")
    wait_for("the text", lambda: terminals.text("alice") == "abcde", terminals, "alice")
    # 40 columns: the keys and the length stay, the module and the deleted count go
    wait_for("the fitted status", lambda: status_line(terminals, "alice") ==
             " 5 chars   ^S save  ^Q quit", terminals, "alice")
    # a note longer than the terminal is cut, never wrapped
    terminals.keys("alice", "C-s")
    wait_for("the save note", lambda: status_line(terminals, "alice").startswith(
        " saved 5 characters to "), terminals, "alice")
    line = status_line(terminals, "alice")
    assert len(line) <= width and line.endswith("…")
    assert terminals.screen("alice")[HEIGHT - 2].strip() == ""  # nothing wrapped
    terminals.keys("alice", "C-q")
    wait_for("alice to leave", lambda: not terminals.running("alice"), terminals, "alice")


def test_the_deleted_characters_are_said_to_be_this_copys_memory(
        terminals: Terminals) -> None:
    terminals.start("alice", "--causality", "matrix")
    wait_for("the editor", lambda: "alice" in terminals.screen("alice")[0], terminals,
             "alice")
    terminals.keys("alice", "-l", "abcdefgh")
    # End sends the typed run first: the Backspaces then delete sent characters (right
    # after typing they would take unsent ones back, which leaves nothing to remember)
    terminals.keys("alice", "End", "BSpace", "BSpace")
    wait_for("the status", lambda: status_line(terminals, "alice").startswith(
        " matrix · 6 chars · 2 deleted chars remembered locally"), terminals, "alice")
    assert "kept" not in status_line(terminals, "alice")
    terminals.keys("alice", "C-q")
    wait_for("alice to leave", lambda: not terminals.running("alice"), terminals, "alice")


def test_the_refusal_names_every_module_that_carries_the_text(group: ProcessGroup) -> None:
    from groupcomm.replicated import supported_modules

    carriers = supported_modules()
    assert {"vector", "matrix", "matrix-delta", "ks"} <= set(carriers)
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.apps.edit", "--name", "eve", "--session",
         "paper", "--server", group.server.address, "--causality", "fifo"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert f"use one of {', '.join(carriers)}; or --allow-divergence" in done.stderr


def test_a_known_bad_module_allowed_to_diverge_is_warned_of_in_one_line(
        group: ProcessGroup) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.apps.edit", "--name", "eve", "--session",
         "paper", "--server", group.server.address, "--key-file", str(group.key_file),
         "--causality", "last-sender", "--allow-divergence", "--batch"],
        input="quit\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "warning" in line] == [
        "groupcomm edit: warning: last-sender is a known-bad module, kept as a "
        "counterexample: last-sender stamp; misses all but one cause; messages may be "
        "delivered out of causal order"]
