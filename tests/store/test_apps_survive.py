"""The apps' state survives everyone leaving and the server being killed (-9): real
``groupcomm serve --store``, scripted ``groupcomm edit --batch`` editors and ``groupcomm
im`` in pseudo-terminals."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from groupcomm.tools.procs import LineProcess, ProcessGroup
from tests.apps.im_harness import drain, people, read_message, shown


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(tmp_path / "sessions.db"),
            "--snapshot-every", "50", "--snapshot-seconds", "1"]) as group:
        yield group


def _editor(group: ProcessGroup, name: str) -> LineProcess:
    assert group.server is not None
    person = LineProcess(name, [
        sys.executable, "-m", "groupcomm.apps.edit", "--batch", "--name", name,
        "--session", "paper", "--server", group.server.address, "--key-file",
        str(group.key_file), "--causality", "matrix"])
    person.wait_line(lambda line: f"{name} joined paper" in line, 60, "its join")
    return person


def _show(person: LineProcess) -> dict:
    shown = sum(1 for line in list(person.lines) if line.startswith("text "))
    person.type("show")
    answers: list[str] = []

    def answered(_line: str) -> bool:
        answers[:] = [line for line in list(person.lines) if line.startswith("text ")]
        return len(answers) > shown

    person.wait_line(answered, 30, "show")
    return json.loads(answers[shown][5:])


def _quiet(*persons: LineProcess) -> None:
    for person in persons:
        person.type("quiet 0.5")
        person.wait_line(lambda s: s == "quiet", 60, "quiet")


@pytest.mark.long
def test_the_text_and_the_chat_survive_everyone_leaving_and_a_killed_server(
        stored: ProcessGroup) -> None:
    assert stored.server is not None
    alice, bob = _editor(stored, "alice"), _editor(stored, "bob")
    editors = [alice, bob]
    chats = people(stored)
    start = next(chats)
    try:
        alice.type("random 150 1")
        bob.type("random 150 2")
        for person in (alice, bob):
            person.wait_line(lambda s: s.startswith("done"), 60, "its edits")
        _quiet(alice, bob)
        bob.type('type "TYPED-AFTER"')
        alice.type('wait-text "TYPED-AFTER" 30')
        alice.wait_line(lambda s: s.startswith(("seen", "error")), 40, "bob's typing")
        text = _show(alice)["text"]
        assert _show(bob)["text"] == text and "TYPED-AFTER" in text
        ann, ben = start("ann"), start("ben")
        ann.expect_exact("ben joined")
        lines = [f"line {i} from {who}" for i in range(6) for who in ("ann", "ben")]
        for i, line in enumerate(lines):
            (ann if i % 2 == 0 else ben).sendline(line)
            read_message(ben if i % 2 == 0 else ann, f"] {line}")
        for person in editors:
            person.quit("quit")
        for chat in (ann, ben):
            chat.sendline("/quit")
            chat.expect(pexpect.EOF, timeout=10)

        stored.server.kill()  # SIGKILL: no chance to close the store
        stored.start_server()

        carol = _editor(stored, "carol")
        editors.append(carol)
        got = _show(carol)
        assert got["text"] == text and got["failures"] == 0
        cleo = start("cleo")  # returns once it joined: the history is shown before
        drain(cleo)
        seen = shown(cleo)
        assert "* up to date (" in seen
        assert all(seen.count(line) == 1 for line in lines), seen
    finally:
        for person in editors:
            if person.alive():
                person.quit("quit")
        chats.close()


def test_an_editor_started_again_under_its_name_gets_the_stored_text(
        stored: ProcessGroup) -> None:
    """alice types, everyone quits, the server runs on; ``groupcomm edit`` started again
    as alice is a new process (alice~2 to the server), not alice back with her text:
    it gets the stored text."""
    alice, bob = _editor(stored, "alice"), _editor(stored, "bob")
    editors = [alice, bob]
    try:
        alice.type('type "KEPT-BY-THE-STORE"')
        bob.type('wait-text "KEPT-BY-THE-STORE" 30')
        bob.wait_line(lambda s: s.startswith(("seen", "error")), 40, "alice's typing")
        text = _show(bob)["text"]
        assert "KEPT-BY-THE-STORE" in text
        for person in (alice, bob):
            person.quit("quit")
        again = _editor(stored, "alice")
        editors.append(again)
        got = _show(again)
        assert got["text"] == text and got["failures"] == 0
    finally:
        for person in editors:
            if person.alive():
                person.quit("quit")


def test_a_chat_opened_again_under_its_name_shows_the_stored_conversation(
        stored: ProcessGroup) -> None:
    """ann and ben chat and quit; ``groupcomm im`` started again as ann (ann~2 to the
    server, which runs on) shows the conversation so far, her own lines included."""
    chats = people(stored)
    start = next(chats)
    try:
        ann, ben = start("ann"), start("ben")
        ann.expect_exact("ben joined")
        ann.sendline("ann says one")
        read_message(ben, "] ann says one")
        ben.sendline("ben says two")
        read_message(ann, "] ben says two")
        for chat in (ann, ben):
            chat.sendline("/quit")
            chat.expect(pexpect.EOF, timeout=10)
        again = start("ann")  # returns once it joined: the history is shown before
        drain(again)
        seen = shown(again)
        # (the snapshot, or the kept messages after it, as the store had them)
        assert "ann says one" in seen and "ben says two" in seen, seen
    finally:
        chats.close()
