"""The latest-value jitter buffer: holds volatile values, never holds anything else,
never reorders, never drops (the editor's end-to-end test drives it over ZeroMQ)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.session_messages import JoinMarker
from groupcomm.filters.latest_value import SUPERSEDED, LatestValueCreator


@dataclass(frozen=True)
class Cursor:
    at: int


class Host:
    """The two things the filter asks of its host: the time and a ticker."""

    def __init__(self) -> None:
        self.time = 0.0
        self.tickers: list = []

    def now(self) -> float:
        return self.time

    def add_ticker(self, ticker) -> None:
        self.tickers.append(ticker)

    def advance(self, seconds: float) -> None:
        self.time += seconds
        for ticker in self.tickers:
            ticker(self.time)


def message(sender: str, number: int, payload) -> ReceivedMessage:
    return ReceivedMessage(application_name="edit", session_name="s", user_message=payload,
                           message_id=f"{sender}#{number}", sender=sender,
                           vc=((sender, number),), receiver="me")


def build(hold: float = 0.05):
    host = Host()
    out: list[ReceivedMessage] = []
    stage = LatestValueCreator(lambda p: "cursor" if isinstance(p, Cursor) else None,
                               hold).get_message_filter(host)
    stage.set_message_processor(type("Sink", (), {"process_message":
                                                  staticmethod(out.append)})())
    return host, stage, out


def test_values_wait_for_the_hold_and_the_newest_of_a_sender_wins() -> None:
    host, stage, out = build()
    for number, at in enumerate([3, 4, 5], 1):
        stage.filter_message(message("bob", number, Cursor(at)))
    stage.filter_message(message("carol", 1, Cursor(9)))
    assert out == []
    host.advance(0.049)
    assert out == []
    host.advance(0.002)
    assert [m.message_id for m in out] == ["bob#1", "bob#2", "bob#3", "carol#1"]
    assert [bool(m.headers.get(SUPERSEDED)) for m in out] == [True, True, False, False]
    assert stage.superseded == 2 and stage.held() == []


def test_anything_else_passes_at_once_after_what_was_held_before_it() -> None:
    host, stage, out = build()
    stage.filter_message(message("bob", 1, Cursor(1)))
    stage.filter_message(message("carol", 1, "an edit"))
    assert [m.message_id for m in out] == ["bob#1", "carol#1"]   # order kept, no wait
    stage.filter_message(message("bob", 2, Cursor(2)))
    stage.filter_message(message("bob", 3, JoinMarker("dave")))  # system messages too
    assert [m.message_id for m in out][-2:] == ["bob#2", "bob#3"]
    assert not any(m.headers.get(SUPERSEDED) for m in out)


def test_a_faulty_slot_function_loses_nothing_and_a_negative_hold_is_refused() -> None:
    host = Host()
    out: list = []

    def slot(payload):
        raise RuntimeError("broken")

    stage = LatestValueCreator(slot).get_message_filter(host)
    stage.set_message_processor(type("Sink", (), {"process_message":
                                                  staticmethod(out.append)})())
    stage.filter_message(message("bob", 1, Cursor(1)))
    assert len(out) == 1
    with pytest.raises(ValueError, match="hold"):
        LatestValueCreator(lambda p: None, hold=-1)


def test_copies_of_values_do_not_supersede_the_newest() -> None:
    """Resent copies arriving before the receiver's duplicate check (which comes after
    this filter) are not new values: the newest value is handed on unmarked, each copy
    after its value, marked."""
    host, stage, out = build()
    for number in (1, 2, 3):
        stage.filter_message(message("bob", number, Cursor(number)))
    for number in (1, 2, 3):
        stage.filter_message(message("bob", number, Cursor(number)))
    host.advance(0.06)
    assert [m.message_id for m in out] == ["bob#1", "bob#2", "bob#3"] * 2
    assert [m.headers.get(SUPERSEDED, False) for m in out] == [True, True, False] + [True] * 3
    assert stage.superseded == 2
    # a copy of a value already handed on leaves a newer one held unmarked
    stage.filter_message(message("bob", 4, Cursor(4)))
    stage.filter_message(message("bob", 3, Cursor(3)))
    host.advance(0.06)
    assert [(m.message_id, m.headers.get(SUPERSEDED, False)) for m in out[6:]] == [
        ("bob#4", False), ("bob#3", True)]
