"""The IM application driven through a terminal (a pseudo-terminal) by three people."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator

import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.apps.im_harness import Start, people, shown


@pytest.fixture
def chat(group: ProcessGroup) -> Iterator[Start]:
    yield from people(group)


# matrix in the default suite; the others with the long tests (8 s each)
@pytest.mark.parametrize("causality", [pytest.param("none", marks=pytest.mark.long), "matrix",
                                       pytest.param("cykas", marks=pytest.mark.long)])
def test_three_people_chat_through_terminals(chat, causality: str) -> None:
    # alice's messages to bob are delayed, so bob can answer before seeing hers
    alice = chat("alice", "--causality", causality, "--delay", "bob=1500")
    bob = chat("bob", "--causality", causality)
    alice.expect(r"\* bob joined")
    carol = chat("carol", "--causality", causality)
    for person in (alice, bob):
        person.expect(r"\* carol joined \(alice, bob, carol\)")

    alice.sendline("hello everyone")
    alice.expect(r"alice·1 \d\d:\d\d \[you -> bob, carol\] hello everyone")
    bob.expect(r"alice·1 \d\d:\d\d \[alice\] hello everyone")
    carol.expect(r"alice·1 \d\d:\d\d \[alice\] hello everyone")

    bob.sendline("/to carol psst, just you")
    bob.expect(r"bob·1 \d\d:\d\d \[you -> carol\] psst, just you")
    carol.expect(r"bob·1 \d\d:\d\d \[bob -> you\] psst, just you")

    carol.sendline("/who")
    carol.expect(r"\* members: alice, bob, carol")
    carol.sendline("/frobnicate")
    carol.expect(r"unknown command /frobnicate; commands: .*/to NAME text")
    carol.sendline("/to mallory hi")
    carol.expect(r"! unknown user\(s\) 'mallory'")

    # concurrent messages are marked: alice and bob speak without seeing each other
    alice.sendline("lunch at noon?")
    bob.sendline("lunch at one?")
    # (the same identities at every viewer: alice·2, bob·2)
    carol.expect(r"(alice·2|bob·2) \d\d:\d\d \[(alice|bob)\] lunch at (noon|one)\?")
    first = carol.match.group(1)
    carol.expect(r"\[(alice|bob)\] lunch at (noon|one)\?  \(concurrent with [^)]*" + first)
    bob.expect(r"bob·2 \d\d:\d\d \[you -> alice, carol\] lunch at one\?")
    bob.expect(r"alice·2 \d\d:\d\d \[alice\] lunch at noon\?  \(concurrent with bob·1, bob·2\)")

    bob.sendline("/quit")
    bob.expect(r"\* bye")
    alice.expect(r"\* bob left")
    carol.expect(r"\* bob left")


def test_held_messages_are_shown_and_released_after_a_departure(chat) -> None:
    """carol's message to bob is delayed; alice answers carol in a message to bob that
    depends on it; carol dies before hers leaves. bob's screen says what waits on whom,
    and /release carol delivers it."""
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    carol = chat("carol", "--causality", "matrix", "--delay", "bob=60000")
    for person in (alice, bob):
        person.expect(r"\* carol joined")
    carol.sendline("/to bob lost on the way")
    carol.expect(r"\[you -> bob\] lost on the way")
    carol.sendline("/to alice lunch?")
    alice.expect(r"\[carol -> you\] lunch\?")
    alice.sendline("/to bob carol asks about lunch")
    alice.expect(r"\[you -> bob\] carol asks about lunch")
    carol.kill(signal.SIGKILL)
    bob.expect(r"\* carol left")
    # said in chat words: no timestamped log record, no API name
    bob.expect(r"\* 1 held message\(s\) wait on carol; /release carol delivers them anyway")
    assert not re.search(r"\d\d:\d\d:\d\d", shown(bob))
    assert "release_waiting_on" not in shown(bob)
    bob.sendline("/held")
    bob.expect(r"\* held: 1")
    bob.expect(r"alice·1 from alice: 'carol asks about lunch' \(waits on carol\)")
    bob.sendline("/release alice")
    bob.expect(r"\* alice is still here")
    bob.sendline("/release carol")
    # delivered (and shown) during the release, before the summary line
    bob.expect(r"\[alice -> you\] carol asks about lunch")
    bob.expect(r"\* released 1 message\(s\) that waited on carol")
    bob.sendline("/held")
    bob.expect(r"\* held: none")


def test_a_note_to_oneself_says_so(chat) -> None:
    alice = chat("alice", "--causality", "matrix")
    alice.sendline("/to alice remember the milk")
    alice.expect(r"alice·1 \d\d:\d\d \[you -> yourself\] remember the milk")
    alice.sendline("/help")
    alice.expect(r"/release NAME")


def test_a_newcomer_sees_the_conversation_so_far_and_replies_are_not_marked_concurrent(
    chat,
) -> None:
    alice = chat("alice", "--causality", "cykas")
    bob = chat("bob", "--causality", "cykas")
    alice.expect(r"\* bob joined")
    alice.sendline("hello bob")
    bob.expect(r"alice·1 \d\d:\d\d \[alice\] hello bob")
    bob.sendline("/to alice just between us")
    alice.expect(r"\[bob -> you\] just between us")
    bob.sendline("hi alice")
    alice.expect(r"bob·2 \d\d:\d\d \[bob\] hi alice")

    carol = chat("carol", "--causality", "cykas")
    # the conversation so far, shown as the live lines (identity, time, person); it may
    # come before the join line the harness waited for
    if "* up to date" not in shown(carol):
        carol.expect(r"\* up to date")
    assert re.search(r"alice·1 \d\d:\d\d \[alice\] hello bob.*"
                     r"bob·2 \d\d:\d\d \[bob\] hi alice.*"
                     r"\* up to date \(2 earlier message\(s\)\)", shown(carol), re.S), shown(carol)
    for person in (alice, bob):
        person.expect(r"\* carol joined")

    # alice asks everyone (cykas sends it as one unicast per person); bob answers everyone
    alice.sendline("lunch?")
    bob.expect(r"\[alice\] lunch\?")
    bob.sendline("yes, at noon")
    carol.expect(r"alice·2 \d\d:\d\d \[alice\] lunch\?")
    carol.expect(r"bob·3 \d\d:\d\d \[bob\] yes, at noon(.*)\r?\n")
    assert "concurrent" not in carol.match.group(1)
    # nothing before carol's join is shown twice, and the private line never reached her
    carol.sendline("/who")
    carol.expect(r"\* members: alice, bob, carol")
    assert "just between us" not in carol.before


def test_a_message_the_module_holds_back_is_shown_pending_then_sent(chat) -> None:
    """Under mfss a sender waits for each message's ACK: with bob stopped, alice's next
    message (to carol) waits in the module. The screen says so, and says when it leaves
    (once the server declares bob gone and mfss stops waiting for him)."""
    alice = chat("alice", "--causality", "mfss")
    bob = chat("bob", "--causality", "mfss")
    carol = chat("carol", "--causality", "mfss")
    alice.expect(r"\* carol joined")
    bob.kill(signal.SIGSTOP)
    try:
        alice.sendline("/to bob are you there?")
        alice.expect(r"alice·1 \d\d:\d\d \[you -> bob\] are you there\?")
        alice.sendline("/to carol bob is quiet")
        alice.expect(r"alice·2 \d\d:\d\d \[you -> carol\] bob is quiet")
        alice.expect(r"\* alice·2 pending: the causality module has not sent it yet")
        carol_saw = carol.expect([r"bob is quiet", r"\* bob left"])
        assert carol_saw == 1  # nothing reached carol while alice waited
        # the module learns of the departure (and sends) before the screen shows it
        seen = {alice.expect([r"\* bob left", r"\* alice·2 sent"]) for _ in range(2)}
        assert seen == {0, 1}
        carol.expect(r"alice·2 \d\d:\d\d \[alice -> you\] bob is quiet")
    finally:
        bob.kill(signal.SIGCONT)


def test_a_reply_that_overtakes_its_cause_is_shown_waiting_for_it_then_released(chat) -> None:
    """carol's question reaches alice 2 s late; bob's answer, sent once he saw it,
    overtakes it: alice's module holds the answer. Her screen shows it at once as
    waiting for carol·1 (the same identity bob shows), then the question, then the
    answer marked released."""
    alice = chat("alice", "--causality", "matrix")
    bob = chat("bob", "--causality", "matrix")
    carol = chat("carol", "--causality", "matrix", "--delay", "alice=2000")
    for person in (alice, bob):
        person.expect(r"\* carol joined")
    carol.sendline("question?")
    bob.expect(r"(carol·1) \d\d:\d\d \[carol\] question\?")
    bob.sendline("answer!")
    alice.expect(r"bob·1 \d\d:\d\d \[bob, held\] answer!  \(waiting for carol·1\)")
    alice.expect(r"carol·1 \d\d:\d\d \[carol\] question\?")
    alice.expect(r"bob·1 \d\d:\d\d \[bob\] answer!  \(was waiting for carol·1; released\)")
