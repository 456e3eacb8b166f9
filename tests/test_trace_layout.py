"""The per-process delivery layout (trace_analysis.layout) against its definition.

No Spark: the function is handed Arrow tables as ``applyInArrow`` would hand them, rows
in any order, and its positions, copies and flags are compared with a direct reading of
the definitions in trace_analysis.checks (method step 2) on random inputs with
duplicates, deliveries without a send and senders outside the clock width.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from trace_analysis.layout import NO_VALUE, lay_out, occurrence, prior_maximum

INPUT_SCHEMA = pa.schema([
    ("p", pa.string()), ("msg", pa.string()), ("ts", pa.float64()),
    ("protocol", pa.string()), ("sender", pa.string()), ("sidx", pa.int32()),
    ("x", pa.int64()), ("send_ts", pa.float64()), ("send_protocol", pa.string()),
    ("in_dests", pa.bool_()), ("vals", pa.list_(pa.int64())), ("file", pa.string()),
    ("blk", pa.int64()), ("rid", pa.int64()),
])
OUTPUT_NAMES = ["p", "msg", "ts", "protocol", "sender", "sidx", "send_ts",
                "send_protocol", "has_send", "in_dests", "copy", "pos", "flag"]


def delivery_rows(rng: random.Random, width: int, count: int) -> list[dict[str, Any]]:
    """Random deliveries at one process: messages from ``width`` senders with random
    clocks, some delivered twice, some with no send record (x and vals null)."""
    messages = []
    for number in range(max(1, count // 2)):
        sidx = rng.randrange(width) if width else 0
        vals = [rng.randrange(0, 6) for _ in range(width)]
        has_send = width > 0 and rng.random() < 0.85
        messages.append({
            "msg": f"m{number}", "sidx": sidx if has_send else None,
            "x": vals[sidx] if has_send else None,
            "vals": vals if has_send else None,
            "sender": f"s{sidx}" if has_send else None,
        })
    rows = []
    for position in range(count):
        message = rng.choice(messages)
        # positions: a few files, blocks and row ids, so the sort uses every key
        rows.append({
            "p": "p0", "msg": message["msg"], "ts": float(position),
            "protocol": "cykas", "sender": message["sender"], "sidx": message["sidx"],
            "x": message["x"], "send_ts": None if message["x"] is None else 0.5,
            "send_protocol": None if message["x"] is None else "cykas",
            "in_dests": None if message["x"] is None else rng.random() < 0.9,
            "vals": message["vals"], "file": f"f{position // 40}",
            "blk": (position % 40) // 7, "rid": position % 7,
        })
    return rows


def expected_layout(rows: list[dict[str, Any]], width: int) -> list[dict[str, Any]]:
    """The definitions read literally: line order, copy number, and the flag as "an
    earlier delivery's send clock at the sender's entry reaches this one's"."""
    ordered = sorted(rows, key=lambda row: (row["file"], row["blk"], row["rid"]))
    out = []
    seen: dict[str, int] = {}
    for index, row in enumerate(ordered):
        seen[row["msg"]] = seen.get(row["msg"], 0) + 1
        has_send = row["x"] is not None
        flag = False
        if has_send and seen[row["msg"]] == 1 and width:
            sidx = row["sidx"]
            flag = any(earlier["vals"] is not None and earlier["vals"][sidx] >= row["x"]
                       for earlier in ordered[:index])
        out.append({
            "p": row["p"], "msg": row["msg"], "ts": row["ts"], "protocol": row["protocol"],
            "sender": row["sender"], "sidx": row["sidx"], "send_ts": row["send_ts"],
            "send_protocol": row["send_protocol"], "has_send": has_send,
            "in_dests": bool(row["in_dests"]), "copy": seen[row["msg"]], "pos": index + 1,
            "flag": flag,
        })
    return out


def as_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)


@pytest.mark.parametrize("seed", range(40))
def test_layout_matches_the_definition_on_random_deliveries(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.choice([1, 2, 3, 5])
    rows = delivery_rows(rng, width, rng.randrange(1, 120))
    rng.shuffle(rows)  # Spark hands a group over in no particular order
    result = lay_out(as_table(rows), width)
    assert result.column_names == OUTPUT_NAMES
    assert result.to_pylist() == expected_layout(rows, width)


def test_layout_splits_the_table_into_chunks_like_arrow_batches() -> None:
    rng = random.Random(7)
    rows = delivery_rows(rng, 3, 90)
    rng.shuffle(rows)
    batches = as_table(rows).to_batches(max_chunksize=13)
    chunked = pa.Table.from_batches(batches)
    assert chunked.column("vals").num_chunks > 1
    assert lay_out(chunked, 3).to_pylist() == expected_layout(rows, 3)


def test_an_empty_group_and_a_trace_without_senders() -> None:
    empty = lay_out(INPUT_SCHEMA.empty_table(), 2)
    assert empty.num_rows == 0 and empty.column_names == OUTPUT_NAMES
    rows = [{"p": "p0", "msg": "m", "ts": 1.0, "protocol": "none", "sender": None,
             "sidx": None, "x": None, "send_ts": None, "send_protocol": None,
             "in_dests": None, "vals": [], "file": "f", "blk": 0, "rid": 0}]
    (row,) = lay_out(as_table(rows * 2), 0).to_pylist()[:1]
    assert row["has_send"] is False and row["flag"] is False and row["in_dests"] is False


def test_a_transitive_violation_is_flagged_and_a_correct_order_is_not() -> None:
    # m1 (a's 1st) → m2 (b's 1st, after delivering m1): p delivers m2 then m1
    m1 = {"msg": "m1", "sidx": 0, "x": 1, "vals": [1, 0], "sender": "a"}
    m2 = {"msg": "m2", "sidx": 1, "x": 1, "vals": [1, 1], "sender": "b"}

    def rows(order: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"p": "p", "ts": float(i), "protocol": "none", "send_ts": 0.0,
                 "send_protocol": "none", "in_dests": True, "file": "p.jsonl", "blk": 0,
                 "rid": i, **message} for i, message in enumerate(order)]

    assert [r["flag"] for r in lay_out(as_table(rows([m2, m1])), 2).to_pylist()] == [
        False, True]
    assert [r["flag"] for r in lay_out(as_table(rows([m1, m2])), 2).to_pylist()] == [
        False, False]


def test_occurrence_and_prior_maximum_helpers() -> None:
    assert occurrence(np.array([5, 3, 5, 5, 3, 9])).tolist() == [1, 1, 2, 3, 2, 1]
    assert occurrence(np.array([], dtype=np.int64)).tolist() == []
    prior = prior_maximum(np.array([[1, 0], [0, 4], [2, 1]]))
    assert prior.tolist() == [[NO_VALUE, NO_VALUE], [1, 0], [1, 4]]
