"""``groupcomm text-wire``: three real editor processes typing at once, with and
without coalescing; bytes per keystroke counted, the copies identical."""

from __future__ import annotations

import json

import pytest

from groupcomm.apps import text_wire


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
    if alone["counted"]:  # the communicator counts the bytes it sends
        assert coalesced["wire_bytes_per_keystroke"] < alone["wire_bytes_per_keystroke"]
        assert 0 < alone["frame_bytes_per_keystroke"] < alone["wire_bytes_per_keystroke"]
    if alone["yjs"] is not None:  # pycrdt installed: the same keystrokes as Yjs updates
        assert alone["yjs"]["identical"] and alone["yjs"]["bytes_per_keystroke"] > 0
    fields = result["fields"]["matrix"]
    assert fields["payload"] < fields["payload_pickled"]
    assert fields["stamp"] > 1 and fields["frame"] > fields["stamp"] + fields["tag_clock"]


@pytest.mark.parametrize("argv, message", [
    (["--keys", "0"], "--keys must be >= 1"),
    (["--rate", "-3"], "--rate between 0 and 1000"),
    (["--coalesce", "-1"], "--coalesce must be between 0 and 10000 ms"),
    (["--causality", "nosuch"], "nosuch"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str, capsys) -> None:
    assert text_wire.main(argv) != 0
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
