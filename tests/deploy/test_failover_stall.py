"""A session server that stalls and resumes (docs/deploy.md, "Failover"): the session's
home server is stopped with SIGSTOP mid-typing, its members move to the other server
(both sharing the test's PostgreSQL store) and go on; the stalled server is resumed
(SIGCONT), finds that none of the session's members is still attached, forgets the
session as a restart would, and the members come back to it under their ids (not as
``name~2``), each line of the other exactly once, in the order typed."""

from __future__ import annotations

import signal
import time

import pexpect
import pytest

from tests.apps.im_harness import drain, end_chats, received, shown, type_lines, wait_all
from tests.deploy.harness import chatting_at_home


def wait_shown(person: pexpect.spawn, text: str, count: int, timeout: float) -> None:
    """Wait until ``person``'s screen showed ``text`` ``count`` times."""
    deadline = time.monotonic() + timeout
    while shown(person).count(text) < count:
        assert time.monotonic() < deadline, (text, shown(person)[-3000:])
        drain(person)
        time.sleep(0.05)


@pytest.mark.long
def test_members_come_back_under_their_ids_to_a_server_resumed_after_a_stall(
        stored_servers) -> None:
    key, (first, second) = stored_servers
    people: list[pexpect.spawn] = []
    try:
        session, listed, alice, bob, typed = chatting_at_home((first, second), key, people)
        first.process.send_signal(signal.SIGSTOP)  # it accepts connections, answers none
        typed["alice"] += type_lines(alice, "a", 5, 3)
        typed["bob"] += type_lines(bob, "b", 5, 3)
        moved = f"* the session moved to server {second.address}"
        for person in (alice, bob):
            wait_shown(person, moved, 1, 30)
        typed["alice"] += type_lines(alice, "a", 8, 4)
        typed["bob"] += type_lines(bob, "b", 8, 4)
        wait_all(bob, "alice", typed["alice"], 30)
        first.process.send_signal(signal.SIGCONT)
        # the members ask the first server every 5 s; it answers again: they go back
        back = f"* the session moved to server {first.address}"
        for person in (alice, bob):
            wait_shown(person, back, 1, 40)
        typed["alice"] += type_lines(alice, "a", 12, 4)
        typed["bob"] += type_lines(bob, "b", 12, 4)
        for person, sender in ((bob, "alice"), (alice, "bob")):
            wait_all(person, sender, typed[sender], 60)
        time.sleep(1.0)  # a resend arriving late would show as a repeat
        for person, sender in ((bob, "alice"), (alice, "bob")):
            drain(person)
            assert received(person, sender) == typed[sender], shown(person)
        for person in (alice, bob):
            assert "back as a new member" not in shown(person), shown(person)
            assert "~2" not in shown(person), shown(person)
            assert "your message '" not in shown(person)  # nothing said lost
        assert any("forgetting the session as a restart would" in line
                   for line in first.stderr_lines), first.stderr_tail(30)
        assert not any("stopped sending heartbeats" in line for line in first.stderr_lines)
    finally:
        end_chats(people)  # the fixture resumes a server still stopped
