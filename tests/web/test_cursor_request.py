"""What an editor tab says of its cursor: an anchor, and for a selection its other end
(the id before it, null for the start); a bad one is refused with its reason."""

from __future__ import annotations

import json

import pytest

from groupcomm.web.requests import BadRequest, parse_request


def cursor(**fields) -> str:
    return json.dumps({"type": "cursor", "applied": 0, **fields})


def test_a_cursor_and_a_selection_are_read() -> None:
    assert parse_request("edit", cursor(anchor="ann#3")).fields == {
        "anchor": "ann#3", "selection": False, "other": None}
    assert parse_request("edit", cursor(anchor="ann#3", other=None)).fields == {
        "anchor": "ann#3", "selection": True, "other": None}
    assert parse_request("edit", cursor(anchor=None, other="ben#2+4")).fields == {
        "anchor": None, "selection": True, "other": "ben#2+4"}


def test_a_bad_selection_end_is_refused_with_its_reason() -> None:
    with pytest.raises(BadRequest, match="other must be a character id"):
        parse_request("edit", cursor(anchor="ann#3", other=7))
