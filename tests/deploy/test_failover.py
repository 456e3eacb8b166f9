"""Two session servers and two sessions placed on different ones by rendezvous hashing
(``--servers``): people chat with ``groupcomm im``; the first session's server is killed
with SIGKILL mid-typing. The second session goes on undisturbed (no silence, no rejoin,
every line once); the first session's members move to the other server and end with
every line exactly once (the reliable layer, on by default, retransmits what died inside
the killed server). docs/deploy.md."""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from groupcomm.protocol.placement import session_home
from groupcomm.tools.procs import ServerProcess
from groupcomm.transport.keys import write_new_key
from tests.apps.im_harness import drain, end_chats, received, shown, type_lines, wait_all


def sessions_on(servers: list[str]) -> tuple[str, str]:
    """Two session names, the first placed on servers[0], the second on servers[1]."""
    names = (f"room-{i}" for i in range(1000))
    first = next(n for n in names if session_home(n, servers) == servers[0])
    second = next(n for n in names if session_home(n, servers) == servers[1])
    return first, second


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Path, list[ServerProcess]]]:
    key = tmp_path / "session.key"
    write_new_key(key)
    started: list[ServerProcess] = []
    try:
        for _ in range(2):
            started.append(ServerProcess(key, extra=["--heartbeat-timeout", "1.5"]))
        yield key, started
    finally:
        for server in started:
            server.kill()


def chat(name: str, session: str, addresses: str, key: Path,
         started: list[pexpect.spawn]) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "groupcomm.apps.im", "--name", name, "--session", session, "--servers",
         addresses, "--key-file", str(key), "--causality", "matrix"],
        # the terminal's echo of typed keys can land inside a character the app
        # writes (a long line's middle dot): one odd character, not a failure
        encoding="utf-8", codec_errors="replace", timeout=20, dimensions=(40, 160),
        env={**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1"})
    child.logfile_read = io.StringIO()
    started.append(child)
    child.expect(f"{name} joined {session} with causality")
    return child


@pytest.mark.long
def test_a_killed_servers_session_moves_and_the_other_is_undisturbed(servers) -> None:
    key, (first, second) = servers
    addresses = [first.address, second.address]
    moving, staying = sessions_on(addresses)
    listed = ",".join(reversed(addresses))  # the list's order does not matter
    people: list[pexpect.spawn] = []
    try:
        alice = chat("alice", moving, listed, key, people)
        bob = chat("bob", moving, listed, key, people)
        carol = chat("carol", staying, listed, key, people)
        dave = chat("dave", staying, listed, key, people)
        alice.expect(r"\* bob joined")
        carol.expect(r"\* dave joined")
        typed = {name: type_lines(p, name[0], 0, 5)
                 for name, p in (("alice", alice), ("bob", bob), ("carol", carol),
                                 ("dave", dave))}
        wait_all(bob, "alice", typed["alice"], 20)
        wait_all(dave, "carol", typed["carol"], 20)
        # killed mid-typing: lines typed just before are inside it or on their way
        for name, p in (("alice", alice), ("bob", bob), ("carol", carol), ("dave", dave)):
            typed[name] += type_lines(p, name[0], 5, 3)
        first.kill()
        for name, p in (("alice", alice), ("bob", bob), ("carol", carol), ("dave", dave)):
            typed[name] += type_lines(p, name[0], 8, 5)
        alice.expect_exact("no answer from the session server", timeout=20)
        for name, p in (("alice", alice), ("bob", bob), ("carol", carol), ("dave", dave)):
            typed[name] += type_lines(p, name[0], 13, 5)
        pairs = ((bob, "alice"), (alice, "bob"), (dave, "carol"), (carol, "dave"))
        for person, sender in pairs:
            wait_all(person, sender, typed[sender], 60)
        time.sleep(1.0)  # a resend arriving late would show as a repeat
        for person, sender in pairs:
            drain(person)
            got = received(person, sender)
            assert got == typed[sender], (sender, got)  # each once, in the order typed
        for person in (alice, bob):  # they moved: joined the other server as a new one
            assert "* the session moved to server " in shown(person)
        for person in (carol, dave):
            assert "no answer from the session server" not in shown(person)
            assert "reconnected" not in shown(person)
            assert "you are back" not in shown(person)
        for person in (alice, bob, carol, dave):
            assert "your message '" not in shown(person)  # nothing said lost
    finally:
        end_chats(people)
