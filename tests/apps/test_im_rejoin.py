"""The chat across a session server restart and across a return after the session took
a member for gone (its process stalled): one line says what happened, nothing is shown
twice, and the framework's frame counts are said as which of the person's messages
were not sent, only when some were."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pexpect
import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.apps.im_harness import (
    Start,
    drain,
    fixed_port_group,
    people,
    shown,
)

__all__ = ["fixed_port_group"]  # a fixture, used by name

NOISE = ("does not know this client", "declared this client gone", "frame(s)",
         "release_waiting_on", "answers again")


@pytest.fixture
def chat(fixed_port_group: ProcessGroup) -> Iterator[Start]:
    yield from people(fixed_port_group)


def three(chat: Start, causality: str) -> tuple[pexpect.spawn, pexpect.spawn, pexpect.spawn]:
    alice = chat("alice", "--causality", causality)
    bob = chat("bob", "--causality", causality)
    carol = chat("carol", "--causality", causality)
    for person in (alice, bob):
        person.expect(r"\* carol joined")
    alice.sendline("hello all")
    alice.expect(r"\S+ \d\d:\d\d \[you -> bob, carol\] hello all\r?\n")
    for person in (bob, carol):
        person.expect(r"\S+ \d\d:\d\d \[alice\] hello all\r?\n")
    return alice, bob, carol


@pytest.mark.parametrize("causality", ["matrix", "mfss"])
def test_a_server_restart_is_one_line_and_the_chat_goes_on(
    fixed_port_group: ProcessGroup, chat, causality: str,
) -> None:
    alice, bob, carol = three(chat, causality)
    for person in (alice, bob, carol):
        drain(person)
    marks = {id(p): len(shown(p)) for p in (alice, bob, carol)}
    fixed_port_group.stop_server()
    fixed_port_group.start_server()
    for person in (alice, bob, carol):
        person.expect_exact("* session server restarted; reconnected")
    bob.sendline("after the restart")
    for person in (alice, carol):
        person.expect(r"\S+ \d\d:\d\d \[bob\] after the restart")
    carol.sendline("/to alice still here")
    alice.expect(r"\S+ \d\d:\d\d \[carol -> you\] still here")
    for person in (alice, bob, carol):
        after = shown(person)[marks[id(person)]:]
        assert after.count("session server restarted") == 1
        assert " joined (" not in after  # nobody left, so nobody joins
        assert "conversation so far" not in after and "hello all" not in after
        assert not [noise for noise in NOISE if noise in after], after


@pytest.mark.long
def test_a_long_server_outage_is_two_lines_and_what_was_typed_meanwhile_arrives(
    fixed_port_group: ProcessGroup, chat: Start,
) -> None:
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    alice.expect(r"\* bob joined")
    # the outage comes once bob has the conversation (a state transfer cut by a server
    # restart is the session checker's: groupcomm check --state --server-restart)
    bob.expect_exact("* up to date")
    fixed_port_group.stop_server()
    for person in (alice, bob):
        person.expect_exact("* no answer from the session server; retrying (your messages "
                            "wait for it)")
    alice.sendline("typed during the outage")
    alice.expect(r"\S+ \d\d:\d\d \[you -> bob\] typed during the outage")
    fixed_port_group.start_server()
    for person in (alice, bob):
        person.expect_exact("* session server restarted; reconnected")
    bob.expect(r"\S+ \d\d:\d\d \[alice\] typed during the outage")
    bob.sendline("/to alice sync")
    alice.expect(r"\S+ \d\d:\d\d \[bob -> you\] sync\r?\n")
    for person in (alice, bob):
        screen = shown(person)
        assert "answers again" not in screen and "! " not in screen, screen
        assert screen.count("no answer") == 1


def test_a_member_back_after_being_taken_for_gone_sees_only_what_it_missed(chat) -> None:
    """carol's process stalls long enough for the session to take her for gone; what
    alice says meanwhile is shown once, and the acknowledgement mfss sent for it from
    the gone incarnation, dropped, is not news to carol (she typed nothing)."""
    alice, bob, carol = three(chat, "mfss")
    carol.kill(signal.SIGSTOP)
    try:
        alice.sendline("while carol is frozen")
        bob.expect(r"\S+ \d\d:\d\d \[alice\] while carol is frozen")
        alice.expect(r"\* carol left")
        bob.expect(r"\* carol left")
        bob.sendline("said while carol was gone")  # to alice only: carol is not there
        alice.expect(r"\S+ \d\d:\d\d \[bob\] said while carol was gone")
    finally:
        carol.kill(signal.SIGCONT)
    carol.expect_exact("* the session took you for gone (no contact for too long); "
                       "you are back")
    # the conversation is handed over again: only what she missed is shown
    carol.expect(r"bob·1 \d\d:\d\d \[bob\] said while carol was gone")
    carol.expect_exact("* 1 missed message(s) added")
    for person in (alice, bob):  # by her name: she was said to have left
        person.expect(r"\* carol joined")
    bob.sendline("welcome back")
    carol.expect(r"\[bob\] welcome back")
    carol.sendline("/who")
    carol.expect(r"\* members: ")
    screen = shown(carol)
    assert screen.count("hello all") == 1
    assert screen.count("while carol is frozen") == 1
    assert screen.count("said while carol was gone") == 1
    assert "conversation so far" not in screen
    assert "your message '" not in screen
    assert not [noise for noise in NOISE if noise in screen], screen


@pytest.mark.parametrize("causality", ["matrix", pytest.param("mfss", marks=pytest.mark.long)])
def test_a_line_typed_while_taken_for_gone_is_delivered_once(chat, causality: str) -> None:
    """What carol types while her process is stalled goes out when it resumes, from the
    gone incarnation (the server refuses it: it reached no one) and then again, once,
    from her new member; everyone sees it exactly once."""
    alice, bob, carol = three(chat, causality)
    carol.kill(signal.SIGSTOP)
    try:
        carol.send("typed while frozen\r")
        alice.expect(r"\* carol left")
        bob.expect(r"\* carol left")
    finally:
        carol.kill(signal.SIGCONT)
    carol.expect(r"you are back")
    for person in (alice, bob):
        try:
            person.expect(r"\[carol\] typed while frozen")
        except Exception:
            raise AssertionError(shown(carol)) from None
    # a message after it, from carol's new member, marks the end of what she sent
    carol.sendline("and after")
    for person in (alice, bob):
        person.expect(r"\[carol\] and after")
    for person in (alice, bob, carol):
        drain(person)
        # the chat lines (the input line's echo at carol aside)
        assert shown(person).count("] typed while frozen") == 1, shown(person)
    assert "your message '" not in shown(carol)  # nothing said lost


def test_a_line_typed_while_the_server_is_killed_is_shown_waiting_and_arrives_once(
    fixed_port_group: ProcessGroup, chat: Start,
) -> None:
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    alice.expect(r"\* bob joined")
    bob.expect_exact("* up to date")
    assert fixed_port_group.server is not None
    fixed_port_group.server.kill()  # SIGKILL
    alice.expect_exact("* no answer from the session server")
    alice.sendline("typed while the server is down")
    alice.expect(r"\S+ \d\d:\d\d \[you -> bob\] typed while the server is down")
    alice.expect_exact("* alice·1 waits: the session server does not answer")
    fixed_port_group.start_server()
    alice.expect_exact("* alice·1 sent (typed while the session server did not answer)")
    bob.expect(r"\S+ \d\d:\d\d \[alice\] typed while the server is down")
    bob.sendline("/to alice got it")
    alice.expect(r"\[bob -> you\] got it")
    for person in (alice, bob):
        drain(person)
        assert shown(person).count("typed while the server is down") == 1


def test_a_message_held_for_a_member_who_left_is_said_not_sent(chat) -> None:
    """Under mfss alice's second message to bob waits for bob's acknowledgement of the
    first; bob stalls and is taken for gone, so it is never sent, and alice is told in
    chat words (not by message ids)."""
    alice = chat("alice", "--causality", "mfss")
    bob = chat("bob", "--causality", "mfss")
    alice.expect(r"\* bob joined")
    bob.kill(signal.SIGSTOP)
    try:
        alice.sendline("/to bob are you there?")
        alice.expect(r"\S+ \d\d:\d\d \[you -> bob\] are you there\?")
        alice.sendline("/to bob hello?")
        alice.expect(r"\S+ \d\d:\d\d \[you -> bob\] hello\?")
        alice.expect(r"\* alice·2 pending")
        # the module gives up on it as it learns of the departure, before the screen
        seen = {alice.expect([r"\* bob left", r"\* your message 'hello\?' was not sent\r?\n"])
                for _ in range(2)}
        assert seen == {0, 1}
    finally:
        bob.kill(signal.SIGCONT)
    alice.sendline("/who")
    alice.expect(r"\* members: ")
    screen = shown(alice)
    assert "accepted for sending" not in screen and "alice#" not in screen
