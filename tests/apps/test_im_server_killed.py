"""Two people chatting with ``groupcomm im``'s default options while the session server
is stopped (lines reach its socket and stay there), killed with SIGKILL and started
again: every line typed reaches the other person exactly once, the ones that died inside
the killed server included (the reliable layer, on by default, retransmits them).
With ``--no-reliable`` those lines are lost (docs/sessions.md, "Faults")."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.apps.im_harness import (
    Start,
    drain,
    fixed_port_group,
    people,
    received,
    shown,
    type_lines,
    wait_all,
)

__all__ = ["fixed_port_group"]  # a fixture, used by name


@pytest.fixture
def chat(fixed_port_group: ProcessGroup) -> Iterator[Start]:
    yield from people(fixed_port_group)


def unsent_to(port: int) -> int:
    """Bytes the local TCP connections to ``port`` have not yet handed to the other end
    (their send queues, from /proc/net/tcp)."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port:
                total += int(fields[4].split(":")[0], 16)
    return total


def sent_lines(trace_dir: Path, name: str) -> int:
    """How many of ``name``'s lines left its send pipeline (its trace's network sends)."""
    path = trace_dir / f"{name}.jsonl"
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines()
               if '"event":"network_send"' in line.replace(" ", "") and '"kind":"rack"' not in line)


def wait_inside(group: ProcessGroup, trace_dir: Path, expected: dict[str, int],
                timeout: float = 20.0) -> None:
    """Wait until every line typed left its sender's pipeline (the trace says so) and
    the connections to the stopped server have nothing left to send: the lines are in
    the server's socket."""
    assert group.server is not None
    port = int(group.server.address.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while not (all(sent_lines(trace_dir, n) >= k for n, k in expected.items())
               and unsent_to(port) == 0):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the lines did not reach the stopped server: sent "
                f"{ {n: sent_lines(trace_dir, n) for n in expected} } of {expected}, "
                f"{unsent_to(port)} bytes unsent")
        time.sleep(0.02)


def outage(group: ProcessGroup, alice: pexpect.spawn, bob: pexpect.spawn,
           trace_dir: Path) -> tuple[list[str], list[str], tuple[list[str], list[str]]]:
    """Lines before, into a stopped server, during the outage and after the restart:
    (alice's, bob's, the ones typed into the stopped server)."""
    assert group.server is not None
    typed_a, typed_b = type_lines(alice, "a", 0, 5), type_lines(bob, "b", 0, 5)
    wait_all(bob, "alice", typed_a, 20)
    wait_all(alice, "bob", typed_b, 20)
    group.server.process.send_signal(signal.SIGSTOP)
    inside = (type_lines(alice, "a", 5, 5), type_lines(bob, "b", 5, 5))
    wait_inside(group, trace_dir, {"alice": 10, "bob": 10})
    group.server.kill()  # SIGKILL: what its socket held dies with it
    typed_a += inside[0] + type_lines(alice, "a", 10, 5)
    typed_b += inside[1] + type_lines(bob, "b", 10, 5)
    group.start_server()
    typed_a += type_lines(alice, "a", 15, 5)
    typed_b += type_lines(bob, "b", 15, 5)
    return typed_a, typed_b, inside


@pytest.mark.long
def test_lines_typed_through_a_killed_server_arrive_once_with_the_default_options(
        fixed_port_group: ProcessGroup, chat: Start, tmp_path: Path) -> None:
    traces = ("--trace-dir", str(tmp_path))
    alice = chat("alice", "--causality", "matrix", *traces)
    bob = chat("bob", "--causality", "matrix", *traces)
    alice.expect(r"\* bob joined")
    bob.expect_exact("* up to date")
    typed_a, typed_b, _ = outage(fixed_port_group, alice, bob, tmp_path)
    wait_all(bob, "alice", typed_a, 60)
    wait_all(alice, "bob", typed_b, 60)
    for person, sender, typed in ((bob, "alice", typed_a), (alice, "bob", typed_b)):
        drain(person)
        got = received(person, sender)
        assert sorted(got) == sorted(typed), got  # each exactly once
        assert got == typed  # and, under matrix, in the order typed
        assert "your message '" not in shown(alice) + shown(bob)  # nothing said lost


@pytest.mark.long
def test_without_the_layer_the_lines_inside_the_killed_server_are_lost(
        fixed_port_group: ProcessGroup, chat: Start, tmp_path: Path) -> None:
    # causality none: the later lines are not held behind the lost ones
    traces = ("--trace-dir", str(tmp_path))
    alice = chat("alice", "--causality", "none", "--no-reliable", *traces)
    bob = chat("bob", "--causality", "none", "--no-reliable", *traces)
    alice.expect(r"\* bob joined")
    bob.expect_exact("* up to date")
    typed_a, typed_b, inside = outage(fixed_port_group, alice, bob, tmp_path)
    later_a, later_b = typed_a[15:], typed_b[15:]
    wait_all(bob, "alice", later_a, 60)
    wait_all(alice, "bob", later_b, 60)
    # a line still queued at its sender when the server died goes to the restarted one;
    # those that were inside the killed server are lost: some of them, never twice
    got_a, got_b = received(bob, "alice"), received(alice, "bob")
    lost = (set(inside[0]) - set(got_a)) | (set(inside[1]) - set(got_b))
    assert lost, (inside, got_a, got_b)
    assert len(got_a) == len(set(got_a)) and len(got_b) == len(set(got_b))


@pytest.mark.long
def test_a_member_without_the_layer_gets_each_line_once_from_one_with_it(
        chat: Start) -> None:
    """Mixed options: alice's layer learns from bob's first frame that he runs without
    it, and neither holds nor resends anything for him."""
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix", "--no-reliable")
    alice.expect(r"\* bob joined")
    bob.expect_exact("* up to date")
    typed_a = type_lines(alice, "a", 0, 3)
    wait_all(bob, "alice", typed_a, 20)
    typed_b = type_lines(bob, "b", 0, 3)
    wait_all(alice, "bob", typed_b, 20)
    typed_a += type_lines(alice, "a", 3, 3)
    wait_all(bob, "alice", typed_a, 20)
    time.sleep(2.0)  # several of the layer's timeouts: nothing may come again
    drain(bob)
    drain(alice)
    assert received(bob, "alice") == typed_a
    assert received(alice, "bob") == typed_b
