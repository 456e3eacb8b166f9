"""The chat screen's ordering of a send's line against deliveries on the I/O thread."""

from __future__ import annotations

import io
import re
import threading
import time

from groupcomm.apps.im import ChatScreen, Private
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.protocol.session_events import MessagesLost, Rejoined

#: a line's time (HH:MM)
TIME = r"(?<= )\d\d:\d\d(?= \[)"


def test_a_note_to_oneself_delivered_during_the_send_is_shown_after_its_line() -> None:
    out = io.StringIO()
    screen = ChatScreen("alice", out)
    vc = (("alice", 1),)
    threads: list[threading.Thread] = []

    def send(note: object) -> list[SentMessage]:
        assert isinstance(note, Private) and note.n == 1 and note.said > 0
        sent = SentMessage(application_name="im", session_name="office", user_message=note,
                           message_id="alice#1", sender="alice", vc=vc,
                           destinations=("alice",))
        received = ReceivedMessage(application_name="im", session_name="office",
                                   user_message=note, message_id="alice#1", sender="alice",
                                   vc=vc, receiver="alice")
        # the I/O thread delivers the note while the application is still in the send
        threads.append(threading.Thread(target=screen.message, args=(received,)))
        threads[0].start()
        threads[0].join(timeout=0.3)
        return [sent]

    screen.send(send, "remember the milk")
    threads[0].join(timeout=10)
    assert not threads[0].is_alive()
    assert [re.sub(TIME, "HH:MM", line) for line in out.getvalue().splitlines()] == [
        "alice·1 HH:MM [you -> yourself] remember the milk",
        "alice·1 HH:MM [alice -> you] remember the milk",
    ]


def test_a_member_rejoining_a_restarted_server_is_not_news() -> None:
    out = io.StringIO()
    screen = ChatScreen("alice", out)
    screen.client_joined("alice", "im", "office", True, True, ("alice",))
    screen.client_joined("bob", "im", "office", False, False, ("alice", "bob"))
    # the server restarts: both rejoin under the same member ids
    screen.client_joined("bob", "im", "office", True, True, ("bob",))
    screen.client_joined("alice", "im", "office", False, False, ("bob", "alice"))
    screen.on_event(Rejoined(member="alice", previous="alice"))
    # bob's next incarnation joins before the session drops the old one: not news
    screen.client_joined("bob~2", "im", "office", False, False, ("alice", "bob", "bob~2"))
    screen.client_left("bob", "im")
    # bob leaves, and comes back later: news, under his name without the suffix
    screen.client_left("bob~2", "im")
    screen.client_joined("bob~3", "im", "office", False, False, ("alice", "bob~3"))
    assert out.getvalue().splitlines() == [
        "* bob joined (alice, bob)",
        "* session server restarted; reconnected",
        "* bob left",
        "* bob joined (alice, bob)",
    ]


def test_the_conversation_handed_over_again_shows_only_what_was_not_shown() -> None:
    out = io.StringIO()
    screen = ChatScreen("carol", out)
    said = time.mktime((2026, 5, 4, 14, 2, 0, 0, 0, -1))  # 14:02 here
    hello = ("alice", "hello", "alice#1", said, 1)
    screen.install([hello])
    # an older peer's entry (three fields): no time, its message id for identity
    screen.install([hello, ("bob~2", "while you were away", "bob~2#1", said, 4),
                    ("dan", "old peer", "dan#1")])
    screen.install([hello])
    assert out.getvalue().splitlines() == [
        "alice·1 14:02 [alice] hello",
        "* up to date (1 earlier message(s))",
        "bob·4 14:02 [bob] while you were away",
        "dan#1 --:-- [dan] old peer",
        "* 2 missed message(s) added",
    ]


def test_keys_typed_together_become_one_insertion_but_combinations_stay() -> None:
    from prompt_toolkit.key_binding import KeyPress
    from prompt_toolkit.keys import Keys

    from groupcomm.apps.im_input import KeyCoalescer

    def keys(text: str) -> list[KeyPress]:
        return [KeyPress(c, c) for c in text]

    coalesce = KeyCoalescer()
    assert [(k.key, k.data) for k in coalesce(keys("hello"))] == [
        (Keys.BracketedPaste, "hello")]
    # Escape, then b (a word back): b stays a key press; what follows is inserted
    escape = KeyPress(Keys.Escape, "\x1b")
    out = coalesce([escape, *keys("bcd"), KeyPress(Keys.ControlM, "\r"), *keys("ef")])
    assert [(k.key, k.data) for k in out] == [
        (Keys.Escape, "\x1b"), ("b", "b"), (Keys.BracketedPaste, "cd"),
        (Keys.ControlM, "\r"), (Keys.BracketedPaste, "ef")]
    # a combination split across two reads
    assert [k.key for k in coalesce([escape])] == [Keys.Escape]
    assert [(k.key, k.data) for k in coalesce(keys("xy"))] == [("x", "x"), ("y", "y")]


def test_a_return_after_being_taken_for_gone_names_exactly_what_was_not_sent() -> None:
    out = io.StringIO()
    screen = ChatScreen("alice", out)
    screen.client_joined("alice", "im", "office", True, True, ("alice",))
    screen.client_joined("bob", "im", "office", False, False, ("alice", "bob"))
    for number, text in enumerate(["first", "second", "third"], start=1):
        screen.sent([SentMessage(application_name="im", session_name="office",
                                 user_message=text, message_id=f"alice#{number}",
                                 sender="alice", vc=(("alice", number),),
                                 destinations=("bob",))])
    screen.client_joined("alice~2", "im", "office", False, False, ("bob", "alice~2"))
    screen.on_event(MessagesLost(member="alice~2", ids=("alice#2", "alice#3"),
                                 reason="was declared gone before they left"))
    screen.on_event(Rejoined(member="alice~2", previous="alice"))
    lines = out.getvalue().splitlines()
    assert lines[-3:] == [
        "* your message 'second' was not sent",
        "* your message 'third' was not sent",
        "* the session took you for gone (no contact for too long); you are back",
    ]
    assert not any("'first'" in line for line in lines)


def test_a_tabs_private_line_sent_again_after_its_gateway_died_is_shown_once() -> None:
    from groupcomm.web.members import TabPrivate

    out = io.StringIO()
    screen = ChatScreen("tom", out)

    def private(sender: str, number: int, line: str) -> ReceivedMessage:
        return ReceivedMessage(application_name="im", session_name="office",
                               user_message=TabPrivate("meet at 5", line=line),
                               message_id=f"{sender}#{number}", sender=sender,
                               vc=((sender, number),), receiver="tom")

    screen.message(private("ann:2", 1, "k1-abc"))
    # the tab's next member sends the line again: nothing told it the first arrived
    screen.message(private("ann:2~2", 1, "k1-abc"))
    screen.message(private("ann:2~2", 2, "k2-def"))
    # another person's line of the same id is another line
    screen.message(private("ben", 1, "k1-abc"))
    # (the made-up clocks are concurrent: the marks after the text are not the point)
    # (an older gateway's line is not counted: its message id names it)
    assert [re.sub(TIME, "HH:MM", line.partition("  (")[0])
            for line in out.getvalue().splitlines()] == [
        "ann:2#1 HH:MM [ann -> you] meet at 5",
        "ann:2~2#2 HH:MM [ann -> you] meet at 5",
        "ben#1 HH:MM [ben -> you] meet at 5",
    ]


def test_a_held_line_is_shown_waiting_for_its_cause_then_marked_released() -> None:
    from groupcomm.apps.im_lines import ChatLine

    out = io.StringIO()
    screen = ChatScreen("ann", out)
    said = time.mktime((2026, 5, 4, 14, 2, 0, 0, 0, -1))

    def line(sender: str, number: int, text: str, n: int, vc: dict[str, int],
             seen: tuple[tuple[str, int], ...] = ()) -> ReceivedMessage:
        return ReceivedMessage(application_name="im", session_name="office",
                               user_message=ChatLine(text, said, n, seen=seen),
                               message_id=f"{sender}#{number}", sender=sender,
                               vc=tuple(vc.items()), receiver="ann")

    question = line("tom", 1, "question?", 1, {"tom": 1})
    answer = line("ben~2", 1, "answer!", 1, {"tom": 1, "ben~2": 1}, seen=(("tom", 1),))
    # ann's module holds ben's answer: it overtook tom's question
    screen.on_held(answer, ["tom"])
    screen.message(question)
    screen.message(answer)
    # an older peer's held line names no line: the member it waits on stands in
    screen.on_held(line("dan", 1, "old", 0, {"tom": 2, "dan": 1}), ["tom"])
    assert out.getvalue().splitlines() == [
        "ben·1 14:02 [ben, held] answer!  (waiting for tom·1)",
        "tom·1 14:02 [tom] question?",
        "ben·1 14:02 [ben] answer!  (was waiting for tom·1; released)",
        "dan#1 14:02 [dan, held] old  (waiting for a line of tom's)",
    ]


def test_the_conversation_handed_over_during_the_join_shows_after_the_opening_line() -> None:
    # the communicator installs the conversation on its I/O thread before its
    # constructor returns; the newcomer reads that it joined first, warnings at once
    out = io.StringIO()
    screen = ChatScreen("bob", out)
    screen.hold_until_opening()
    screen.install([])
    screen.line("! the server is slow", at_once=True)
    assert out.getvalue() == "! the server is slow\n"
    screen.opening("* bob joined office")
    assert out.getvalue().splitlines() == [
        "! the server is slow", "* bob joined office", "* up to date (0 earlier message(s))"]
    screen.line("after")
    assert out.getvalue().splitlines()[-1] == "after"
