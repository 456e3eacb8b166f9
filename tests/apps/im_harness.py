"""People at terminals running ``groupcomm im`` (pseudo-terminals driven by pexpect).

A person's terminal keeps reading what the program prints; a test that sends a lot of
input drains the output as it goes (:func:`type_text`), or the program would block on a
full terminal and stop reading. The terminals do not answer cursor position requests,
which prompt_toolkit is told (``PROMPT_TOOLKIT_NO_CPR``) rather than left to wait for.
"""

from __future__ import annotations

import io
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from groupcomm.tools.procs import ProcessGroup

#: the pasting person's terminal wraps a paste in these (bracketed paste mode)
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"

Start = Callable[..., pexpect.spawn]


@pytest.fixture
def fixed_port_group(tmp_path: Path) -> Iterator[ProcessGroup]:
    """A server on a port of its own, so it can be stopped and started again there,
    taking a client silent for 1.5 s for gone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"],
                      server_bind=f"tcp://127.0.0.1:{port}") as started:
        yield started


def people(group: ProcessGroup, session: str = "office") -> Iterator[Start]:
    """Yields ``start(name, *options)``, which starts a person's chat in a terminal and
    waits until it joined; every chat is ended (``/quit``, then killed) afterwards."""
    started: list[pexpect.spawn] = []

    def start(name: str, *extra: str) -> pexpect.spawn:
        assert group.server is not None
        child = pexpect.spawn(
            sys.executable,
            ["-m", "groupcomm.apps.im", "--name", name, "--session", session, "--server",
             group.server.address, "--key-file", str(group.key_file), *extra],
            # the terminal's echo of typed keys can land inside a character the app
            # writes (a long line's middle dot): one odd character, not a failure
            encoding="utf-8", codec_errors="replace", timeout=20, dimensions=(40, 160),
            env={**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1"},
        )
        child.logfile_read = io.StringIO()  # everything shown, for checks over the run
        started.append(child)
        child.expect(f"{name} joined {session} with causality")
        return child

    try:
        yield start
    finally:
        end_chats(started)


def end_chats(children: list[pexpect.spawn]) -> None:
    """End each chat (``/quit``, then killed if it does not)."""
    for child in children:
        if child.isalive():
            try:
                child.sendline("/quit")
                child.expect(pexpect.EOF, timeout=5)
            except (pexpect.ExceptionPexpect, OSError):
                pass
        child.close(force=True)


def type_lines(person: pexpect.spawn, prefix: str, first: int, count: int) -> list[str]:
    """Type ``count`` numbered lines (``<a005>``...); the lines typed."""
    lines = [f"<{prefix}{k:03d}>" for k in range(first, first + count)]
    for line in lines:
        person.sendline(line)
        drain(person)
    return lines


def received(person: pexpect.spawn, sender: str) -> list[str]:
    """The numbered lines ``person`` was shown from ``sender``, in order, repeats
    included."""
    return re.findall(rf"\[{sender}\] (<\w\d+>)", shown(person))


def wait_all(person: pexpect.spawn, sender: str, wanted: list[str], timeout: float) -> None:
    """Wait until ``person`` was shown every line of ``wanted`` from ``sender``."""
    deadline = time.monotonic() + timeout
    while not set(wanted) <= set(received(person, sender)):
        if time.monotonic() > deadline:
            missing = sorted(set(wanted) - set(received(person, sender)))
            raise AssertionError(f"never shown {missing} from {sender}")
        drain(person)
        time.sleep(0.05)


def shown(child: pexpect.spawn) -> str:
    """Everything ``child`` printed so far."""
    return child.logfile_read.getvalue()


def drain(child: pexpect.spawn) -> None:
    """Read what ``child`` printed so far (as its terminal would)."""
    try:
        child.expect(pexpect.TIMEOUT, timeout=0.02)
    except pexpect.EOF:
        pass


def type_text(child: pexpect.spawn, text: str, chunk: int = 1024) -> None:
    """Type ``text`` (no end of line), reading the screen meanwhile."""
    for start in range(0, len(text), chunk):
        child.send(text[start:start + chunk])
        drain(child)


def paste_text(child: pexpect.spawn, text: str) -> None:
    """Paste ``text`` as a terminal in bracketed paste mode does (no end of line)."""
    child.send(PASTE_START)
    type_text(child, text, 4096)
    child.send(PASTE_END)


def read_message(child: pexpect.spawn, prefix: str, timeout: float = 60) -> str:
    """The text of the next chat line that starts with ``prefix`` (e.g. ``[alice] ``)."""
    child.expect_exact(prefix, timeout=timeout)
    child.expect_exact("\n", timeout=timeout)
    return child.before.rstrip("\r")
