"""The shared text's state as plain data, written from the runs and read back checked."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.runs import Run, numbered

STATE_VERSION = 1

#: a run as a state holds it: (insert id or chain prefix, offset or first number,
#: characters, insert tag, delete tag, whether it is a chain)
RunRow = tuple[str, int, str, Tag | None, Tag | None, bool]


def state_of(runs: Iterable[Run]) -> dict[str, Any]:
    rows: list[list[Any]] = []
    for run in runs:
        deleted = None if run.deleted is None else run.deleted.clock
        if run.chain:
            rows.append([f"{run.op}{run.start}", 0, run.text, None, deleted, len(run.text)])
        else:
            rows.append([run.op, run.start, run.text,
                         None if run.tag is None else run.tag.clock, deleted])
    return {"version": STATE_VERSION, "runs": rows}


def not_a_state(what: str) -> ValueError:
    return ValueError(f"not the state of a TextSequence: {what}")


def read_state(state: Any) -> list[RunRow]:
    """The runs of a state, checked; ``ValueError`` naming the run and what is wrong."""
    if not isinstance(state, dict) or set(state) != {"version", "runs"}:
        raise not_a_state("expected a dict with 'version' and 'runs'")
    if state["version"] != STATE_VERSION:
        raise not_a_state(f"version {state['version']!r}, this replica reads {STATE_VERSION}")
    rows = state["runs"]
    if not isinstance(rows, (list, tuple)):  # msgpack may decode arrays as tuples
        raise not_a_state("'runs' is not a list")
    tags: dict[tuple, Tag] = {}

    def tag_of(clock: Any, row: int, what: str) -> Tag | None:
        if clock is None:
            return None
        if not isinstance(clock, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in clock.items()):
            raise not_a_state(f"run {row}: the {what} clock is not a dict of member -> count")
        key = tuple(sorted(clock.items()))
        if key not in tags:  # runs split from one operation share its tag
            tags[key] = Tag(clock)
        return tags[key]

    runs: list[RunRow] = []
    for number, row in enumerate(rows):
        if not isinstance(row, (list, tuple)) or len(row) not in (5, 6):
            raise not_a_state(f"run {number} is not a list of 5 fields (6 for a chain)")
        op, start, chars, inserted, deleted = row[:5]
        if not isinstance(op, str) or not op:
            raise not_a_state(f"run {number}: the insert id is not a non-empty string")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise not_a_state(f"run {number}: the offset is not an integer >= 0")
        if not isinstance(chars, str) or not chars:
            raise not_a_state(f"run {number}: no characters")
        insert_tag = tag_of(inserted, number, "insert")
        delete_tag = tag_of(deleted, number, "delete")
        if len(row) == 5:
            runs.append((op, start, chars, insert_tag, delete_tag, False))
            continue
        first = numbered(op)
        if row[5] != len(chars) or start != 0 or insert_tag is not None or first is None:
            raise not_a_state(f"run {number}: a chain is [first id ending in a number, 0, "
                              f"characters, None, delete clock or None, number of characters]")
        runs.append((first[0], first[1], chars, None, delete_tag, True))
    return runs
