"""Helpers shared by the test modules (the fixtures are in ``conftest.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or 'the condition'}")
        time.sleep(0.01)


def read_traces(trace_dir: Path) -> list[dict]:
    """Every record of every ``*.jsonl`` file in ``trace_dir``, file by file."""
    records: list[dict] = []
    for path in sorted(trace_dir.glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line]
    return records


def virtual_results(csv_path: Path) -> list[list[str]]:
    """The rows of a figure's CSV without its wall-clock columns (``wall_s``,
    ``messages_per_s``): what two runs of the same grid must agree on."""
    rows = csv_path.read_text().splitlines()
    header = rows[0].split(",")
    keep = [i for i, h in enumerate(header) if h not in ("wall_s", "messages_per_s")]
    return [[row.split(",")[i] for i in keep] for row in rows]
