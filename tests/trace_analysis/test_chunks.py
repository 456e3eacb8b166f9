"""The worker-side chunk parser agrees with the schema's one validator, line for line,
and chunk planning covers every line exactly once (no Spark needed)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trace_analysis import chunks, schema
from trace_analysis.send_index import RAW_COLUMNS as RAW_SEND_COLUMNS
from trace_analysis.send_index import send_table_of

VC = {"a": 2, "b": 0, "c": 1}
VALID = [
    {"ts": 1.5, "process": "a", "event": "send", "protocol": "cykas", "msg": "a#2",
     "sender": "a", "dests": ["b", "c"], "vc": VC, "detail": "x" * 40},
    {"ts": 2, "process": "b", "event": "deliver", "protocol": "cykas", "msg": "a#2",
     "sender": "a", "vc": {"a": 2, "b": 1}},
    {"ts": 3.25, "process": "b", "event": "buffer", "protocol": "matrix", "msg": "a#2"},
    {"ts": 3.5, "process": "b", "event": "unbuffer", "protocol": "matrix", "msg": "a#2",
     "sender": "a"},
    {"ts": 4.0, "process": "b", "event": "control_send", "protocol": "cykas", "kind": "ack",
     "meta_bytes": 12, "to": "a"},
    {"ts": 4.5, "process": "c", "event": "network_send", "protocol": "cykas", "msg": "c#1",
     "kind": "normal", "meta_bytes": 0},
    {"ts": 5.0, "process": "c", "event": "receive", "protocol": "cykas", "msg": "c#1"},
    {"ts": 6.0, "process": "c", "event": "join", "protocol": "none"},
    {"ts": 7.0, "process": "c", "event": "something_new", "protocol": "none", "x": [1]},
]
ODD_VALUES = [None, True, False, 0, -1, 1.5, 2**63, 2**64, "", "x", "é", [], ["a", 1],
              {}, {"a": -1}, {"a": 1.0}, {"a": True}, 1e308, -0.0]
RAW_LINES = [
    "", "   ", "\t", "\u00a0", "null", "[]", "5", '"text"', "{", "}", "{}", "not json",
    '{"ts":NaN,"process":"a","event":"join","protocol":"p"}',
    '{"ts":Infinity,"process":"a","event":"join","protocol":"p"}',
    '{"ts":1e400,"process":"a","event":"join","protocol":"p"}',
    '{"ts":123456789012345678901234567890,"process":"a","event":"join","protocol":"p"}',
    '{"ts":1,"process":"\\ud800","event":"join","protocol":"p"}',
    '{"ts":1,"process":"a","process":"b","event":"join","protocol":"p"}',
    '{"ts":1,"process":"a","event":"join","protocol":"p"} trailing',
    '{"ts":1,"process":"a","event":"join","protocol":"p"}{"ts":2}',
    ' {"ts":1,"process":"a","event":"join","protocol":"p"} ',
    '{"ts":1,"process":"\\u00e9","event":"send","protocol":"p","msg":"m","sender":"\\u00e9",'
    '"dests":["\\u00e9"],"vc":{"\\u00e9":1}}',
    '{"ts":1,"process":"a","event":"send","protocol":"p","msg":"m","sender":"a",'
    '"dests":[],"vc":{"a":0}}',
    '{"ts":1,"process":"a","event":"deliver","protocol":"p","msg":"m","sender":"a",'
    '"vc":{"a":9223372036854775807}}',
    '{"ts":1,"process":"a","event":"deliver","protocol":"p","msg":"m","sender":"a",'
    '"vc":{"a":9223372036854775808}}',
]


def mutations(seed: int, count: int) -> list[str]:
    """Valid events with fields dropped, nulled or replaced by odd values."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        record = dict(rng.choice(VALID))
        for _ in range(rng.randint(0, 2)):
            name = rng.choice([*schema.FIELDS, "extra"])
            roll = rng.random()
            if roll < 0.3:
                record.pop(name, None)
            else:
                record[name] = rng.choice(ODD_VALUES)
        out.append(json.dumps(record, ensure_ascii=rng.random() < 0.5))
    return out


def expected_for(lines: list[str]) -> tuple[list[tuple], dict[tuple, list[int]],
                                             list[tuple[int, str]], int]:
    """What parse_line says about every line, in the chunk parser's shapes."""
    events, counts, bad, blank = [], {}, [], 0
    for rid, line in enumerate(lines):
        status, reason, record = schema.parse_line(line)
        if status == schema.BLANK:
            blank += 1
            continue
        if record is None:
            bad.append((rid, reason))
            continue
        # the fields the analysis keeps for this event; the others set to None
        kept = {name: (value if name in schema.ALWAYS
                       or name in schema.KEPT.get(record["event"], ()) else None)
                for name, value in record.items()}
        entry = counts.setdefault((record["protocol"], record["process"], record["event"],
                                   record["kind"]), [0, 0])
        entry[0] += 1
        entry[1] += record["meta_bytes"] or 0
        if record["event"] in chunks.HEAVY_EVENTS:
            events.append((rid, kept["ts"], kept["process"], kept["event"], kept["protocol"],
                           kept["msg"], kept["sender"], kept["dests"], kept["vc"]))
    return events, counts, bad, blank


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunk_parser_agrees_with_the_validator(seed: int) -> None:
    lines = [json.dumps(r) for r in VALID] + RAW_LINES + mutations(seed, 3000)
    random.Random(seed).shuffle(lines)
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    result = chunks.parse_chunk(data)
    events, counts, bad, blank = expected_for(lines)
    assert result.lines == len(lines)
    assert result.blank == blank
    assert [(rid, reason) for rid, reason, _ in result.malformed] == bad
    # lone surrogates cannot go to Arrow: the chunk parser replaces them
    assert result.counts == {tuple(chunks._utf8_safe(k) for k in key): value
                             for key, value in counts.items()}
    flat = sorted(e for group in result.groups for e in group)
    assert [e[3] for e in result.groups[0]] == ["send"] * len(result.groups[0])
    assert {e[3] for e in result.groups[1]} <= {"deliver"}
    got = [tuple(float(v) if i == 1 else v for i, v in enumerate(e)) for e in flat]
    want = [tuple(float(v) if i == 1 else v for i, v in enumerate(e)) for e in events]
    assert got == [tuple(chunks._utf8_safe(v) for v in e) for e in want]
    assert len(flat) > 100 and len(bad) > 100  # the corpus exercises both paths


def test_malformed_samples_keep_the_text_and_the_reason() -> None:
    data = b'{"ts":1,"process":"a","event":"join","protocol":"p"}\n' + b"x" * 500 + b"\n"
    result = chunks.parse_chunk(data)
    assert result.malformed == [(1, "not JSON", "x" * chunks.SAMPLE_CHARS)]
    invalid_utf8 = chunks.parse_chunk(b'{"ts":1,"process":"\xff","event":"join",'
                                      b'"protocol":"p"}\n')
    # as the reference checker reads it (errors="replace"): a valid event
    assert invalid_utf8.counts == {("p", "\ufffd", "join", None): [1, 0]}


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_chunks_cover_every_line_once(tmp_path: Path, ending: bytes) -> None:
    lines = [json.dumps({"ts": i, "process": "a", "event": "join", "protocol": "p",
                         "pad": "y" * (i % 37)}).encode() for i in range(400)]
    lines[17] = b""
    path = tmp_path / "a.jsonl"
    path.write_bytes(ending.join(lines))  # no terminator after the last line
    planned = chunks.plan_chunks([path], chunk_bytes=300)
    data = path.read_bytes()
    if ending == b"\r":
        assert len(planned) == 1  # no "\n" to cut at: one chunk
    else:
        assert len(planned) > 10
    assert planned[0].start == 0 and planned[-1].end == len(data)
    for before, after in zip(planned, planned[1:], strict=False):
        assert before.end == after.start and data[after.start - 1:after.start] == b"\n"
    seen = [line for chunk in planned for line in chunks._read(chunk).splitlines()]
    assert seen == data.splitlines() == lines


def test_gzip_file_is_one_chunk(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "a.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b'{"ts":1,"process":"a","event":"join","protocol":"p"}\n' * 1000)
    (planned,) = chunks.plan_chunks([path], chunk_bytes=100)
    assert planned.gzip
    assert chunks.parse_chunk(chunks._read(planned)).counts == {("p", "a", "join", None):
                                                                [1000, 0]}


def test_batches_carry_events_and_summary_rows() -> None:
    lines = [json.dumps(r) for r in VALID] + ["", "garbage"]
    data = "\n".join(lines).encode()
    chunk = chunks.Chunk("/x/a.jsonl", "file:///x/a.jsonl", 100, 100 + len(data))
    sends, deliveries, others, summary = chunks.to_batches(
        chunk, chunks.parse_chunk(data), samples=5)
    names = [name for name, _ in chunks.OUTPUT_COLUMNS]
    assert sends.schema.names == summary.schema.names == names
    rows = sends.to_pylist() + deliveries.to_pylist() + others.to_pylist()
    assert [r["event"] for r in rows] == ["send", "deliver", "buffer", "unbuffer"]
    assert rows[0]["vc"] == sorted(VC.items()) or dict(rows[0]["vc"]) == VC
    assert rows[0]["dests"] == ["b", "c"] and rows[1]["vc"] is None
    assert rows[3]["sender"] is None  # unbuffer keeps msg only (schema.KEPT)
    assert {r["file"] for r in rows} == {"file:///x/a.jsonl"} and rows[0]["blk"] == 100
    kinds = [r["rec"] for r in summary.to_pylist()]
    assert kinds.count("m") == 1 and kinds[-2:] == ["k", "s"]
    (last,) = [r for r in summary.to_pylist() if r["rec"] == "k"]
    assert (last["n"], last["blank"], last["bad"]) == (len(lines), 1, 1)
    # the sends once more, packed for the driver, with the columns the send index reads
    packed = send_table_of(summary.to_pylist()[-1]["sends"])
    assert packed.column_names == list(RAW_SEND_COLUMNS)
    assert packed.to_pylist() == sends.select(list(RAW_SEND_COLUMNS)).to_pylist()
