"""The Spark trace analysis on crafted traces with known answers, on random traces
against a brute-force checker (whole-vector comparisons, all pairs), on a real run of
the communicator, and with malformed lines mixed in."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groupcomm.core.messages import vc_less
from groupcomm.core.tracing import write_trace_dir
from groupcomm.tools.localnet import LocalNetwork
from trace_analysis import analyze, get_spark
from trace_analysis.cli import main as analyze_main
from trace_analysis.reference import check_directory

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def spark():
    return get_spark()


class Trace:
    """Builds a trace by hand: sends with explicit clocks, deliveries in order."""

    def __init__(self, protocol: str = "test") -> None:
        self.protocol = protocol
        self.records: list[dict[str, Any]] = []
        self.clocks: dict[str, dict[str, int]] = {}
        self.ts = 0.0

    def _clock(self, process: str) -> dict[str, int]:
        return self.clocks.setdefault(process, {})

    def send(self, process: str, msg: str, dests: list[str]) -> None:
        clock = self._clock(process)
        clock[process] = clock.get(process, 0) + 1
        self.ts += 1
        self.records.append({"ts": self.ts, "process": process, "event": "send", "msg": msg,
                             "sender": process, "dests": dests, "vc": dict(clock),
                             "protocol": self.protocol})
        self.records.append({"ts": self.ts, "process": process, "event": "network_send",
                             "msg": msg, "kind": "normal", "meta_bytes": 4,
                             "protocol": self.protocol})

    def deliver(self, process: str, msg: str) -> None:
        send = next(r for r in self.records if r["event"] == "send" and r["msg"] == msg)
        clock = self._clock(process)
        for k, v in send["vc"].items():
            clock[k] = max(clock.get(k, 0), v)
        clock[process] = clock.get(process, 0) + 1
        self.ts += 1
        self.records.append({"ts": self.ts, "process": process, "event": "deliver", "msg": msg,
                             "sender": send["sender"], "vc": dict(clock),
                             "protocol": self.protocol})

    def write(self, directory: Path) -> Path:
        write_trace_dir(self.records, directory)
        return directory


def brute_force(records: list[dict[str, Any]]) -> dict[str, int]:
    sends = {r["msg"]: r for r in records if r["event"] == "send"}
    out = {"causal_violations": 0, "fifo_violations": 0, "undelivered": 0, "duplicates": 0}
    delivered: dict[str, list[str]] = {}
    for r in records:
        if r["event"] == "deliver":
            delivered.setdefault(r["process"], []).append(r["msg"])
    for order in delivered.values():
        firsts: list[str] = []
        for msg in order:
            if msg in firsts:
                out["duplicates"] += 1
            else:
                firsts.append(msg)
        for j, later in enumerate(firsts):
            for earlier in firsts[:j]:
                # later was delivered after earlier, but later -> earlier
                if vc_less(sends[later]["vc"], sends[earlier]["vc"]):
                    out["causal_violations"] += 1
                    if sends[later]["sender"] == sends[earlier]["sender"]:
                        out["fifo_violations"] += 1
    for msg, send in sends.items():
        for dest in set(send["dests"]):
            if msg not in delivered.get(dest, []):
                out["undelivered"] += 1
    return out


def counts(result: dict[str, Any]) -> dict[str, int]:
    return {k: result[k] for k in ("causal_violations", "fifo_violations", "undelivered",
                                   "duplicates")}


def test_crafted_trace_with_known_answers(spark, tmp_path: Path) -> None:
    t = Trace()
    # a violation that appears only through transitivity: a1 -> b1 -> c1, d gets c1 first
    t.send("a", "a1", ["b", "d"])
    t.deliver("b", "a1")
    t.send("b", "b1", ["c"])
    t.deliver("c", "b1")
    t.send("c", "c1", ["d"])
    t.deliver("d", "c1")
    t.deliver("d", "a1")
    # a FIFO violation that is also causal: a2, a3 to b, delivered in reverse
    t.send("a", "a2", ["b"])
    t.send("a", "a3", ["b"])
    t.deliver("b", "a3")
    t.deliver("b", "a2")
    # an undelivered message and a duplicate delivery
    t.send("c", "c2", ["a", "b"])
    t.deliver("a", "c2")
    t.deliver("a", "c2")
    result = analyze(t.write(tmp_path / "t"), spark=spark,
                     violations_out=tmp_path / "v.jsonl")
    assert counts(result) == {"causal_violations": 2, "fifo_violations": 1, "undelivered": 1,
                              "duplicates": 1}
    assert counts(result) == brute_force(t.records)
    triples = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert len(triples) == 2
    assert {(v["process"], v["delivered_first"], v["delivered_second"]) for v in triples} == {
        ("d", "c1", "a1"), ("b", "a3", "a2")}
    assert {v["fifo"] for v in triples} == {True, False}
    assert result["messages"] == 6 and result["processes"] == 4
    assert result["per_protocol"]["test"]["meta_bytes_per_message"] == 4


def random_trace(seed: int) -> Trace:
    rng = random.Random(seed)
    t = Trace()
    names = ["p", "q", "r", "s"][: rng.randint(2, 4)]
    pending: list[tuple[str, str]] = []
    for i in range(rng.randint(5, 40)):
        if pending and rng.random() < 0.6:
            dest, msg = pending.pop(rng.randrange(len(pending)))
            t.deliver(dest, msg)
            if rng.random() < 0.1:
                t.deliver(dest, msg)
        else:
            sender = rng.choice(names)
            dests = rng.sample(names, rng.randint(1, len(names)))
            msg = f"{sender}-{i}"
            t.send(sender, msg, dests)
            pending += [(d, msg) for d in dests]
    for dest, msg in pending:
        if rng.random() < 0.9:
            t.deliver(dest, msg)
    return t


def brute_force_triples(records: list[dict[str, Any]]) -> set[tuple[str, str, str, bool]]:
    """(process, delivered first, delivered second, same sender) of every violation."""
    sends = {r["msg"]: r for r in records if r["event"] == "send"}
    triples = set()
    firsts: dict[str, list[str]] = {}
    for r in records:
        if r["event"] != "deliver" or r["msg"] in firsts.setdefault(r["process"], []):
            continue
        for earlier in firsts[r["process"]]:
            if vc_less(sends[r["msg"]]["vc"], sends[earlier]["vc"]):
                triples.add((r["process"], earlier, r["msg"],
                             sends[r["msg"]]["sender"] == sends[earlier]["sender"]))
        firsts[r["process"]].append(r["msg"])
    return triples


def brute_force_missing(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Every (message, destination) pair never delivered, sorted."""
    delivered = {(r["msg"], r["process"]) for r in records if r["event"] == "deliver"}
    return sorted({(r["msg"], dest) for r in records if r["event"] == "send"
                   for dest in r["dests"] if (r["msg"], dest) not in delivered})


def test_undelivered_samples_include_destinations_that_delivered_nothing(
        spark, tmp_path: Path) -> None:
    t = Trace()
    t.send("a", "a1", ["b", "z"])  # z never delivers anything
    t.send("a", "a2", ["b", "z"])
    t.send("b", "b1", ["a", "z"])
    t.deliver("b", "a2")
    t.deliver("a", "b1")
    result = analyze(t.write(tmp_path / "t"), spark=spark)
    assert result["undelivered"] == 4
    assert [(r["msg"], r["process"]) for r in result["undelivered_samples"]] == [
        ("a1", "b"), ("a1", "z"), ("a2", "z"), ("b1", "z")]


def listed_triples(path: Path) -> list[tuple[str, str, str, bool]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["process"], r["delivered_first"], r["delivered_second"], r["fifo"])
            for r in rows if "note" not in r]


def test_random_traces_match_a_brute_force_checker(spark, tmp_path: Path) -> None:
    for seed in range(6):
        t = random_trace(seed)
        directory = t.write(tmp_path / f"r{seed}")
        expected = brute_force(t.records)
        result = analyze(directory, spark=spark, violations_out=tmp_path / "v.jsonl")
        assert counts(result) == expected, seed
        assert result["violations_complete"], seed
        listed = listed_triples(tmp_path / "v.jsonl")
        assert len(listed) == len(set(listed)) == expected["causal_violations"], seed
        assert set(listed) == brute_force_triples(t.records), seed
        assert [(r["msg"], r["process"]) for r in result["undelivered_samples"]] == (
            brute_force_missing(t.records)[:20]), seed
        reference = check_directory(directory)
        assert {k: getattr(reference, k) for k in expected} == expected, seed


def test_a_capped_listing_keeps_exact_counts_and_says_so(spark, tmp_path: Path) -> None:
    t = random_trace(3)
    directory = t.write(tmp_path / "r")
    everything = brute_force_triples(t.records)
    assert len(everything) > 10
    result = analyze(directory, spark=spark, violations_out=tmp_path / "v.jsonl",
                     violations_limit=10)
    assert result["causal_violations"] == len(everything)
    assert (result["violations_listed"], result["violations_complete"]) == (10, False)
    listed = listed_triples(tmp_path / "v.jsonl")
    assert len(set(listed)) == 10 and set(listed) <= everything
    note = json.loads((tmp_path / "v.jsonl").read_text().splitlines()[-1])
    assert (note["listed"], note["total"]) == (10, len(everything))


def test_latency_percentiles_in_numpy_and_in_spark_agree(spark, tmp_path: Path,
                                                         monkeypatch) -> None:
    from trace_analysis import metrics

    rng = random.Random(11)
    records = []
    for protocol, processes in (("fifo", ["a", "b", "c"]), ("matrix", ["d", "e"])):
        t = Trace(protocol)
        for number in range(40):
            sender = rng.choice(processes)
            others = [p for p in processes if p != sender]
            t.send(sender, f"{protocol}{number}", others)
            t.ts += rng.random() * 5  # uneven latencies
            for dest in others:
                t.deliver(dest, f"{protocol}{number}")
        records += t.records
    directory = tmp_path / "two"
    write_trace_dir(records, directory)
    in_numpy = analyze(directory, spark=spark)
    monkeypatch.setattr(metrics, "LOCAL_PERCENTILE_ROWS", -1)
    in_spark = analyze(directory, spark=spark)
    for key in ("fifo", "matrix"):
        a = in_numpy["per_protocol"][key]["latency_ms"]
        b = in_spark["per_protocol"][key]["latency_ms"]
        assert set(a) == {"p50", "p95", "p99", "mean", "max"}
        assert a == pytest.approx(b, abs=1e-3), key
    assert in_numpy["latency_ms"] == pytest.approx(in_spark["latency_ms"], abs=1e-3)
    sends = {r["msg"]: r["ts"] for r in records if r["event"] == "send"}
    direct = [(r["ts"] - sends[r["msg"]]) * 1000 for r in records if r["event"] == "deliver"]
    assert in_numpy["latency_ms"]["p50"] == pytest.approx(
        float(np.percentile(direct, 50)), abs=1e-3)


def test_real_run_trace_with_malformed_lines(spark, tmp_path: Path) -> None:
    net = LocalNetwork(["alice", "bob", "carol"], "none")
    rng = random.Random(4)
    for i in range(12):
        sender = rng.choice(["alice", "bob", "carol"])
        net.send(sender, i, [n for n in ["alice", "bob", "carol"] if n != sender])
    net.run(rng)
    directory = tmp_path / "run"
    write_trace_dir(net.records, directory)
    clean = analyze(directory, spark=spark)
    with open(directory / "bob.jsonl", "a", encoding="utf-8") as handle:
        handle.write("this is not json\n")
        handle.write('{"ts": 1, "process": "bob"}\n')
        handle.write('{"ts": "x", "process": "bob", "event": "deliver", "protocol": "none"}\n')
        handle.write("\n")
    dirty = analyze(directory, spark=spark)
    assert dirty["malformed_lines"] == 3
    assert {s["line"] for s in dirty["malformed_samples"]} == {
        sum(1 for _ in open(directory / "bob.jsonl")) - k for k in (3, 2, 1)}
    assert counts(dirty) == counts(clean) == brute_force(net.records)
    assert dirty["events"] == clean["events"]


def test_both_loaders_read_the_same_trace(spark, tmp_path: Path) -> None:
    """The default loader (msgspec in Python workers, many chunks per file here) and the
    native one (Spark's JSON reader) agree on every count, sample and kept event."""
    from trace_analysis.chunks import plan_chunks
    from trace_analysis.load import load, load_in_workers

    directory = random_trace(7).write(tmp_path / "t")
    bob = sorted(directory.glob("*.jsonl"))[0]
    text = bob.read_text(encoding="utf-8").splitlines()
    text[3:3] = ["garbage", "", '{"ts": true, "process": "bob", "event": "join", '
                 '"protocol": "x"}', '{"ts": 1, "process": "bob", "event": "send", '
                 '"protocol": "x", "msg": "m", "sender": "bob", "dests": ["a"], "vc": {}}']
    bob.write_text("\r\n".join(text) + "\r\n", encoding="utf-8")
    native = load(spark, directory, samples=10, loader="native")
    files = sorted(directory.glob("*.jsonl"))
    assert len(plan_chunks(files, 128)) > 2 * len(files)  # several chunks per file
    workers = load_in_workers(spark, files, 10, lambda message: None, chunk_bytes=128)
    try:
        for name in ("lines", "blank_lines", "malformed", "malformed_samples", "counts"):
            assert getattr(workers, name) == getattr(native, name), name
        assert workers.malformed == 3 and workers.blank_lines == 1

        def rows(loaded):
            return sorted((r["file"], r["ts"], r["process"], r["event"], r["msg"],
                           r["sender"], r["dests"], sorted((r["vc"] or {}).items()))
                          for r in loaded.events.collect())

        assert rows(workers) == rows(native)

        def in_line_order(loaded):
            return [(r["file"], r["event"], r["msg"], r["ts"]) for r in sorted(
                loaded.events.collect(), key=lambda r: (r["file"], r["blk"], r["rid"]))]

        assert in_line_order(workers) == in_line_order(native)
    finally:
        native.unpersist()
        workers.unpersist()


def test_real_processes_trace_and_report(spark, tmp_path: Path, group) -> None:
    traces = tmp_path / "traces"
    for name in ["alice", "bob", "carol"]:
        group.start_peer(name, causality="cykas", trace_dir=str(traces))
    group.wait_members(["alice", "bob", "carol"])
    alice, bob, carol = (group.peers[n] for n in ["alice", "bob", "carol"])
    for i in range(5):
        alice.command(op="send", to="others", payload=i)
        bob.command(op="send", to=["carol"], payload=i)
    carol.wait_count("deliver", 10)
    bob.wait_count("deliver", 5)
    for peer in group.peers.values():
        peer.quit()
    report = tmp_path / "report"
    result = analyze(traces, spark=spark, report_dir=report)
    assert counts(result) == {"causal_violations": 0, "fifo_violations": 0, "undelivered": 0,
                              "duplicates": 0}
    cykas = result["per_protocol"]["cykas"]
    assert cykas["control_per_message"]["ack"] == 1.0
    assert 0 < cykas["eager_share"] <= 1
    for name in ["summary.json", "latency.png", "meta_bytes.png", "spacetime.png",
                 "shiviz.log", "shiviz_regex.txt", "per_protocol.csv"]:
        assert (report / name).stat().st_size > 0, name


def test_shiviz_log_clocks_rise_by_one_per_host(spark, tmp_path: Path) -> None:
    import re

    t = random_trace(11)
    analyze(t.write(tmp_path / "t"), spark=spark, report_dir=tmp_path / "rep")
    regex = (tmp_path / "rep" / "shiviz_regex.txt").read_text().strip().splitlines()[0]
    text = (tmp_path / "rep" / "shiviz.log").read_text()
    last: dict[str, int] = {}
    pattern = re.compile(regex.replace("(?<", "(?P<"), re.M)  # JavaScript -> Python
    matches = list(pattern.finditer(text))
    assert matches
    for match in matches:
        host = match.group("host")
        clock = json.loads(match.group("clock"))
        assert clock[host] == last.get(host, 0) + 1
        last[host] = clock[host]


def test_cli_json_and_errors(tmp_path: Path, capsys) -> None:
    t = random_trace(3)
    directory = t.write(tmp_path / "t")
    assert analyze_main([str(directory), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("events", "messages", "processes", "causal_violations", "fifo_violations",
                "undelivered", "duplicates", "malformed_lines", "latency_ms", "per_protocol"):
        assert key in out
    assert set(out["latency_ms"]) >= {"p50", "p95", "p99"}
    assert analyze_main([str(directory), "--quiet"]) == 0
    assert "causal violations" in capsys.readouterr().out
    assert analyze_main([str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert analyze_main([str(tmp_path / "empty")]) == 2
    assert "no trace files" in capsys.readouterr().err


def test_no_empty_overhead_plot_for_a_protocol_without_metadata(spark, tmp_path: Path) -> None:
    trace = Trace("none")
    trace.send("a", "a#1", ["b"])
    trace.deliver("b", "a#1")
    for record in trace.records:  # this protocol puts no metadata on the wire
        if "meta_bytes" in record:
            record["meta_bytes"] = 0
    directory = trace.write(tmp_path / "t")
    result = analyze(directory, spark=spark, report_dir=tmp_path / "rep")
    assert not (tmp_path / "rep" / "meta_bytes.png").exists()
    assert "no meta_bytes plot: no protocol metadata or control traffic (none)" in \
        result["report_notes"]
    assert (tmp_path / "rep" / "latency.png").stat().st_size > 0


def test_an_impossible_trace_is_flagged_and_kept_out_of_the_latency(spark, tmp_path: Path,
                                                                    capsys) -> None:
    from trace_analysis.cli import print_table

    t = Trace()
    t.send("a", "a1", ["b"])
    t.deliver("b", "a1")
    t.send("c", "c1", ["b"])
    t.deliver("b", "c1")
    # a restarted "a" reuses its first id, and b's delivery is stamped before its send
    t.send("a", "a1", ["b"])
    t.records[-2]["ts"] = 1e6
    t.records[-1]["ts"] = 1e6
    delivered = next(r for r in t.records if r["event"] == "deliver" and r["msg"] == "c1")
    delivered["ts"] = 0.5  # c1 was sent at ts 3
    result = analyze(t.write(tmp_path / "t"), spark=spark, report_dir=tmp_path / "rep")
    assert result["duplicate_sends"] == 1
    assert result["deliveries_before_send"] == 1
    assert result["per_protocol"]["test"]["deliveries_before_send"] == 1
    assert result["latency_ms"]["max"] >= 0 and result["latency_ms"]["mean"] >= 0
    print_table(result)
    out = capsys.readouterr().out
    assert "INCONSISTENT TRACE: 1 send record(s) repeat a message id, 1 delivery(ies) " \
           "stamped before their send" in out


def test_messages_to_a_member_that_was_gone_are_counted_apart_and_abrupt_ends_named(
        spark, tmp_path: Path, capsys) -> None:
    from trace_analysis.cli import print_table

    t = Trace()
    t.send("a", "a1", ["b", "c"])
    t.deliver("b", "a1")
    t.send("c", "c1", ["b"])  # never reaches b: it goes down with c
    t.deliver("c", "a1")  # c's trace ends here (killed): no departure recorded
    t.ts += 5
    t.send("a", "a2", ["b", "c"])  # sent after c was gone: c cannot get it
    t.send("a", "a3", ["b"])       # b is there to the end and never gets it: a failure
    t.deliver("b", "a2")

    for process in ("a", "b"):
        t.ts += 1
        t.records.append({"ts": t.ts, "process": process, "event": "leave",
                          "client": process, "protocol": "test"})
    result = analyze(t.write(tmp_path / "t"), spark=spark)
    assert result["undelivered"] == 3
    assert (result["undelivered_to_departed"], result["undelivered_from_departed"],
            result["undelivered_present"]) == (1, 1, 1)
    assert result["abrupt_endings"] == ["c"]
    print_table(result)
    out = capsys.readouterr().out
    assert "1 were addressed to members whose membership ended" in out
    assert "1 went down with a sender" in out
    assert "traces that end abruptly (no departure recorded" in out and ": c\n" in out
