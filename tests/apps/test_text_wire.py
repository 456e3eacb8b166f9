"""``groupcomm text-wire``: three real editor processes typing at once, with and
without coalescing; bytes per keystroke counted, the copies identical."""

from __future__ import annotations

import json

import pytest

from groupcomm.apps import text_wire


@pytest.mark.long
def test_coalesced_typing_converges_and_costs_fewer_bytes_per_keystroke(capsys) -> None:
    assert text_wire.main(["--keys", "15", "--rate", "30", "--causality", "matrix",
                           "--coalesce", "0", "--coalesce", "1000", "--fields",
                           "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    alone, coalesced = result["runs"]
    for run in (alone, coalesced):
        assert run["identical"] and run["failed_edits"] == 0
        assert run["keystrokes"] == 45 and run["characters"] > 0
    # every keystroke its own message without coalescing; runs of several with it
    assert coalesced["operations"] < alone["operations"]
    assert coalesced["wire_bytes_per_keystroke"] < alone["wire_bytes_per_keystroke"]
    assert alone["frames"] >= alone["operations"] / 3  # at most a frame per message
    assert alone["wire_bytes"] == pytest.approx(alone["frames"] * alone["bytes_per_frame"],
                                                rel=0.01)
    if alone["yjs"] is not None:  # pycrdt installed: the same keystrokes as Yjs updates
        assert alone["yjs"]["identical"] and alone["yjs"]["bytes_per_keystroke"] > 0
    fields = result["fields"]["matrix"]
    assert fields["payload"] < fields["payload_pickled"]
    # the stamp and the tag clock travel as differences: the whole frame is smaller
    # than they are before compression
    assert fields["frame"] < fields["stamp"] + fields["tag_clock"] + fields["payload"]


@pytest.mark.parametrize("argv, message", [
    (["--keys", "0"], "--keys must be >= 1"),
    (["--rate", "-3"], "--rate between 0 and 1000"),
    (["--coalesce", "-1"], "--coalesce must be between 0 and 10000 ms"),
    (["--causality", "nosuch"], "nosuch"),
    (["--screen", "0"], "--screen must be between 1 and 10000000"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str, capsys) -> None:
    assert text_wire.main(argv) != 0
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_the_field_breakdown_adds_up_to_the_frame() -> None:
    from groupcomm.tools.frame_anatomy import keystroke_fields

    sizes = keystroke_fields("matrix", history=5)
    assert sizes["frame"] == sum(sizes[part] for part in (
        "signature", "frame_header", "routed_head", "compressed_batch"))
    assert sizes["batch"] == sum(sizes[part] for part in (
        "batch_head", "message_array_header", "message_id", "destinations", "kind", "stamp",
        "tag_clock", "payload"))
    assert sizes["compressed_batch"] < sizes["batch"] / 3


def test_the_screen_timing_types_and_moves_in_the_editor() -> None:
    times = text_wire.keystroke_times(3000, keys=9)
    assert times["characters"] == 3000 + 9  # every typed key is in the text
    assert times["key_median_ms"] > 0 and times["move_median_ms"] > 0
    assert times["key_p90_ms"] >= times["key_median_ms"]
