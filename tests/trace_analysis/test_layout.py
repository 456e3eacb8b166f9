"""The send index and the per-process delivery layout against their definitions.

No Spark: the functions are handed Arrow tables as the driver (``toArrow``) and
``applyInArrow`` would hand them, rows in any order, and their results are compared with
a direct reading of the definitions in trace_analysis.checks (method steps 1 and 2) on
random inputs with duplicate sends and deliveries, deliveries without a send, clocks
without some senders, null and repeated destinations.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from trace_analysis.layout import (
    NO_VALUE,
    SendLookup,
    lay_out,
    occurrence,
    prior_maximum,
    worker_lookup,
)
from trace_analysis.send_index import index_sends, send_table_bytes

SEND_SCHEMA = pa.schema([
    ("msg", pa.string()), ("sender", pa.string()),
    ("vc", pa.map_(pa.string(), pa.int64())), ("dests", pa.list_(pa.string())),
    ("ts", pa.float64()), ("protocol", pa.string()), ("file", pa.string()),
    ("blk", pa.int64()), ("rid", pa.int64()),
])
DELIVERY_SCHEMA = pa.schema([
    ("p", pa.string()), ("msg", pa.string()), ("ts", pa.float64()),
    ("protocol", pa.string()), ("file", pa.string()), ("blk", pa.int64()),
    ("rid", pa.int64()),
])
OUTPUT_NAMES = ["p", "msg", "ts", "protocol", "sender", "sidx", "send_ts",
                "send_protocol", "has_send", "in_dests", "copy", "pos", "flag", "causal",
                "fifo", "earlier", "earlier_fifo", "missing", "missing_msgs"]
PROCESSES = ["p0", "p1", "p2", "p3", "p4"]


def random_sends(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Send records: some message ids sent twice, some clocks lacking entries (even the
    sender's own), destinations repeated or null."""
    rows = []
    for number in range(count):
        sender = rng.choice(PROCESSES[:3])
        clock = {s: rng.randrange(0, 6) for s in PROCESSES[:3] if rng.random() < 0.8}
        if rng.random() < 0.9:
            clock[sender] = rng.randrange(1, 6)
        dests = (None if rng.random() < 0.05
                 else [rng.choice(PROCESSES) for _ in range(rng.randrange(0, 5))])
        msg = f"m{number}" if rng.random() < 0.9 or not rows else rows[-1]["msg"]
        rows.append({"msg": msg, "sender": sender, "vc": list(clock.items()),
                     "dests": dests, "ts": rng.random(), "protocol": "cykas",
                     "file": f"{sender}.jsonl", "blk": rng.randrange(3),
                     "rid": len(rows)})
    return rows


def first_sends(sends: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    first: dict[str, dict[str, Any]] = {}
    for row in sorted(sends, key=lambda r: (r["file"], r["blk"], r["rid"])):
        first.setdefault(row["msg"], row)
    return first


def random_deliveries(rng: random.Random, messages: list[str],
                      count: int) -> list[dict[str, Any]]:
    """Deliveries at p1: some messages twice, some with no send at all."""
    rows = []
    for position in range(count):
        msg = rng.choice(messages) if rng.random() < 0.9 else f"ghost{rng.randrange(3)}"
        rows.append({"p": "p1", "msg": msg, "ts": float(position), "protocol": "cykas",
                     "file": f"f{position // 40}", "blk": (position % 40) // 7,
                     "rid": position % 7})
    return rows


def expected_layout(deliveries: list[dict[str, Any]], sends: list[dict[str, Any]],
                    budget: int = 0, samples: int = 0) -> list[dict[str, Any]]:
    """The definitions read literally; at most ``budget`` triples listed, flagged
    deliveries in order, each with its nearest violating predecessors; the ``samples``
    smallest undelivered ids."""
    first = first_sends(sends)
    senders = sorted({row["sender"] for row in first.values()})
    ordered = sorted(deliveries, key=lambda row: (row["file"], row["blk"], row["rid"]))
    out = []
    seen: dict[str, int] = {}
    members: list[int] = []  # first deliveries of messages whose clock has their sender
    for index, row in enumerate(ordered):
        seen[row["msg"]] = seen.get(row["msg"], 0) + 1
        send = first.get(row["msg"])
        clock = dict(send["vc"]) if send else {}
        has_send = send is not None and send["sender"] in clock
        flag, violating = False, []
        if has_send and seen[row["msg"]] == 1:
            sender = send["sender"]
            flag = any(
                earlier["msg"] in first
                and dict(first[earlier["msg"]]["vc"]).get(sender, 0) >= clock[sender]
                for earlier in ordered[:index])
            violating = [j for j in members if flag and dict(
                first[ordered[j]["msg"]]["vc"]).get(sender, 0) >= clock[sender]]
        listed = violating[len(violating) - min(len(violating), budget):]
        budget -= len(listed)
        out.append({
            "p": row["p"], "msg": row["msg"], "ts": row["ts"], "protocol": row["protocol"],
            "sender": send["sender"] if send else None,
            "sidx": senders.index(send["sender"]) if send else None,
            "send_ts": send["ts"] if send else None,
            "send_protocol": send["protocol"] if send else None, "has_send": has_send,
            "in_dests": bool(send and send["dests"] and row["p"] in send["dests"]),
            "copy": seen[row["msg"]], "pos": index + 1, "flag": flag,
            "causal": len(violating),
            "fifo": sum(first[ordered[j]["msg"]]["sender"] == send["sender"]
                        for j in violating),
            "earlier": [ordered[j]["msg"] for j in listed] or None,
            "earlier_fifo": [first[ordered[j]["msg"]]["sender"] == send["sender"]
                             for j in listed] or None,
            "missing": None, "missing_msgs": None,
        })
        if has_send and seen[row["msg"]] == 1:
            members.append(index)
    if out:
        process = out[0]["p"]
        reached = {row["msg"] for row in out
                   if row["copy"] == 1 and row["has_send"] and row["in_dests"]}
        unreached = sorted(msg for msg, send in first.items()
                           if process in (send["dests"] or []) and msg not in reached)
        out[0]["missing"] = len(unreached)
        out[0]["missing_msgs"] = unreached[:samples] or None
    return out


def lookup_of(sends: list[dict[str, Any]]) -> SendLookup:
    return SendLookup(index_sends(pa.Table.from_pylist(sends, schema=SEND_SCHEMA)).table)


@pytest.mark.parametrize("seed", range(40))
def test_send_index_matches_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    sends = random_sends(rng, rng.randrange(1, 60))
    rng.shuffle(sends)
    index = index_sends(pa.Table.from_pylist(sends, schema=SEND_SCHEMA))
    first = first_sends(sends)
    senders = sorted({row["sender"] for row in first.values()})
    assert index.senders == senders
    assert index.duplicate_sends == len(sends) - len(first)
    got = {row["msg"]: row for row in index.table.to_pylist()}
    assert set(got) == set(first)
    for msg, send in first.items():
        clock = dict(send["vc"])
        row = got[msg]
        assert row["sender"] == send["sender"]
        assert row["sidx"] == senders.index(send["sender"])
        assert row["x"] == clock.get(send["sender"])
        assert row["vals"] == [clock.get(s, 0) for s in senders]
        assert row["dests"] == (None if send["dests"] is None
                                else list(dict.fromkeys(send["dests"])))
        assert (row["send_ts"], row["send_protocol"]) == (send["ts"], send["protocol"])
    wanted = sum(len(set(s["dests"] or [])) for s in first.values())
    assert index.per_protocol() == {"cykas": (len(first), wanted)}


@pytest.mark.parametrize("seed", range(40))
def test_layout_matches_the_definition_on_random_deliveries(seed: int) -> None:
    rng = random.Random(seed)
    sends = random_sends(rng, rng.randrange(1, 40))
    deliveries = random_deliveries(rng, [s["msg"] for s in sends], rng.randrange(1, 120))
    rng.shuffle(deliveries)  # Spark hands a group over in no particular order
    table = pa.Table.from_pylist(deliveries, schema=DELIVERY_SCHEMA)
    budget, samples = rng.choice([0, 1, 3, 1000]), rng.choice([0, 2, 50])
    result = lay_out(table, lookup_of(sends), budget, samples)
    assert result.column_names == OUTPUT_NAMES
    assert result.to_pylist() == expected_layout(deliveries, sends, budget, samples)


def test_layout_of_a_table_in_many_chunks_like_arrow_batches() -> None:
    rng = random.Random(7)
    sends = random_sends(rng, 30)
    deliveries = random_deliveries(rng, [s["msg"] for s in sends], 90)
    batches = pa.Table.from_pylist(deliveries, schema=DELIVERY_SCHEMA).to_batches(
        max_chunksize=13)
    chunked = pa.Table.from_batches(batches)
    assert chunked.column("msg").num_chunks > 1
    assert lay_out(chunked, lookup_of(sends)).to_pylist() == expected_layout(
        deliveries, sends)


def test_an_empty_group_and_a_trace_without_sends() -> None:
    lookup = lookup_of(random_sends(random.Random(1), 5))
    empty = lay_out(DELIVERY_SCHEMA.empty_table(), lookup)
    assert empty.num_rows == 0 and empty.column_names == OUTPUT_NAMES
    no_sends = SendLookup(index_sends(SEND_SCHEMA.empty_table()).table)
    rows = [{"p": "p0", "msg": "m", "ts": 1.0, "protocol": "none", "file": "f",
             "blk": 0, "rid": rid} for rid in range(2)]
    laid = lay_out(pa.Table.from_pylist(rows, schema=DELIVERY_SCHEMA), no_sends).to_pylist()
    assert [(r["has_send"], r["flag"], r["in_dests"], r["copy"], r["sender"])
            for r in laid] == [(False, False, False, 1, None), (False, False, False, 2, None)]


def test_a_transitive_violation_is_flagged_and_a_correct_order_is_not() -> None:
    # m1 (a's 1st) → m2 (b's 1st, sent after delivering m1): p delivers m2, then m1
    sends = [
        {"msg": "m1", "sender": "a", "vc": [("a", 1)], "dests": ["b", "p"], "ts": 0.0,
         "protocol": "none", "file": "a.jsonl", "blk": 0, "rid": 0},
        {"msg": "m2", "sender": "b", "vc": [("a", 1), ("b", 1)], "dests": ["p"],
         "ts": 0.5, "protocol": "none", "file": "b.jsonl", "blk": 0, "rid": 1},
    ]

    def flags(order: list[str]) -> list[bool]:
        rows = [{"p": "p", "msg": msg, "ts": float(i), "protocol": "none",
                 "file": "p.jsonl", "blk": 0, "rid": i} for i, msg in enumerate(order)]
        table = pa.Table.from_pylist(rows, schema=DELIVERY_SCHEMA)
        return [r["flag"] for r in lay_out(table, lookup_of(sends)).to_pylist()]

    assert flags(["m2", "m1"]) == [False, True]
    assert flags(["m1", "m2"]) == [False, False]


def test_the_send_table_travels_as_arrow_and_is_decoded_once_per_analysis() -> None:
    sends = random_sends(random.Random(3), 20)
    table = index_sends(pa.Table.from_pylist(sends, schema=SEND_SCHEMA)).table
    shipped = SimpleNamespace(value=send_table_bytes(table))
    first = worker_lookup("run-1", shipped)
    assert first.sends.equals(table.combine_chunks())
    assert worker_lookup("run-1", shipped) is first
    assert worker_lookup("run-2", shipped) is not first


def test_occurrence_and_prior_maximum_helpers() -> None:
    assert occurrence(np.array([5, 3, 5, 5, 3, 9])).tolist() == [1, 1, 2, 3, 2, 1]
    assert occurrence(np.array([], dtype=np.int64)).tolist() == []
    prior = prior_maximum(np.array([[1, 0], [0, 4], [2, 1]]))
    assert prior.tolist() == [[NO_VALUE, NO_VALUE], [1, 0], [1, 4]]
