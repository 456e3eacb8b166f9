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

from groupcomm.tools.procs import ProcessGroup
from trace_analysis.reference import check_directory

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

    def start(self, name: str, *extra: str) -> None:
        assert self.group.server is not None
        command = [sys.executable, "-m", "groupcomm.apps.edit", "--name", name,
                   "--session", "paper", "--server", self.group.server.address,
                   "--key-file", str(self.group.key_file), "--trace-dir",
                   str(self.workdir / "traces"), "--file", str(self.workdir / f"{name}.txt"),
                   *extra]
        self.tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT),
                  " ".join(command) + f" 2> {self.workdir / name}.err")

    def keys(self, name: str, *keys: str) -> None:
        self.tmux("send-keys", "-t", f"{name}:0", *keys)

    def screen(self, name: str, escapes: bool = False) -> list[str]:
        flags = ["-e"] if escapes else []
        return self.tmux("capture-pane", "-p", *flags, "-t", f"{name}:0").split("\n")

    def text(self, name: str) -> str:
        """The text area: between the title bar and the status bar."""
        lines = self.screen(name)[1:HEIGHT - 1]
        return "\n".join(line.rstrip() for line in lines).rstrip("\n")

    def running(self, name: str) -> bool:
        listed = subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", name],
                                capture_output=True, timeout=10)
        return listed.returncode == 0

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
    # cursor there, in his colour (the second member she sees: green)
    terminals.keys("bob", "Up", "Home")
    wait_for("bob's cursor on carol's screen",
             lambda: re.search(r"\x1b\[30m\x1b\[42mD", "\n".join(
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
