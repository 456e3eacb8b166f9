"""``groupcomm text-bench --trace FILE --silent``: a trace typed through three members of
whom one never types, each member's replica with the clock acknowledgements as the
communicator sends them, against every clock known at every delivery and against no
acknowledgements (apps/text_silent.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groupcomm.apps.text_silent import MEMBERS, MODES, replay_member
from groupcomm.apps.text_trace import read_trace
from tests.apps.test_text_bench_trace import synthetic_trace


class Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def send(self, item: tuple[str, Any]) -> None:
        self.sent.append(item)


def test_each_member_collects_with_the_acknowledgements_as_with_every_clock_known(
        tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_trace(3000)).encode()))
    trace = read_trace(str(path))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for member in MEMBERS:
        for mode in MODES:
            channel = Channel()
            replay_member(trace, member, mode, 50, channel)
            (what, result), = channel.sent
            assert what == "result", result
            assert result["exact"], (member, mode)
            results[member, mode] = result
    for member in MEMBERS:
        heartbeat = results[member, "heartbeat"]
        # every insert stable, every tombstone gone, as with every clock known
        assert heartbeat["kept_characters"] == heartbeat["characters"]
        # (the reference collects every 64 operations: the last few may wait)
        assert 0 <= results[member, "reference"]["kept_characters"] - heartbeat[
            "characters"] < 64
        assert heartbeat["acknowledgements_received"] > 0
        assert results[member, "none"]["acknowledgements_received"] == 0
    for typist in ("a", "b"):  # without acknowledgements the silent member holds them
        assert results[typist, "none"]["kept_characters"] > results[typist, "heartbeat"][
            "kept_characters"]


@pytest.mark.parametrize("args, error", [
    (["--silent"], "--silent replays a --trace FILE"),
])
def test_silent_needs_a_trace(args: list[str], error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "groupcomm.cli", "text-bench", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and error in done.stderr
