"""The copies the modules make on every message (a stamp set, a stamp consumed) keep
every other field, stay frozen, and agree with the general copy they stand in for."""

from __future__ import annotations

import dataclasses

import pytest

from groupcomm.core.messages import (
    ReceivedMessage,
    SentMessage,
    with_header_unchecked,
    without_header_unchecked,
)

FIELDS = ("application_name", "session_name", "user_message", "message_id", "sender", "vc",
          "kind")


def _sent(**headers: object) -> SentMessage:
    return SentMessage(application_name="app", session_name="s", user_message={"x": 1},
                       message_id="a#3", sender="a", headers=headers or None,
                       vc=(("a", 3),), kind="normal", destinations=("b", "c"))


def _received(**headers: object) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="s", user_message="hi",
                           message_id="a#3", sender="a", headers=headers or None,
                           vc=(("a", 3),), kind="normal", receiver="b")


@pytest.mark.parametrize("before", [{}, {"g": (1, 2)}])
def test_a_stamp_set_keeps_everything_else(before: dict) -> None:
    message = _sent(**before)
    stamped = with_header_unchecked(message, "f", 7)
    assert type(stamped) is SentMessage and stamped is not message
    assert dict(stamped.headers) == {**before, "f": 7}
    assert dict(message.headers) == before  # the original is untouched
    assert stamped.destinations == message.destinations
    assert all(getattr(stamped, f) == getattr(message, f) for f in FIELDS)
    assert stamped == message.with_header("f", 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stamped.sender = "z"  # type: ignore[misc]


@pytest.mark.parametrize("before, after", [
    ({"f": 7}, {}),
    ({"f": 7, "g": (1, 2)}, {"g": (1, 2)}),
    ({"g": 1}, {"g": 1}),
])
def test_a_stamp_consumed_keeps_everything_else(before: dict, after: dict) -> None:
    message = _received(**before)
    stripped = without_header_unchecked(message, "f")
    assert type(stripped) is ReceivedMessage
    assert dict(stripped.headers) == after and dict(message.headers) == before
    assert stripped.receiver == "b"
    assert all(getattr(stripped, f) == getattr(message, f) for f in FIELDS)
    assert stripped == message.without_headers("f")
    with pytest.raises(dataclasses.FrozenInstanceError):
        stripped.headers = {}  # type: ignore[misc]
