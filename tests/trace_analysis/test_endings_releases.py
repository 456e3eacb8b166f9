"""Traces still being written, and deliveries released without their causes: what the
analysis (Spark) and the reference checker say of them."""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from groupcomm.core.tracing import JsonlTracer
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Delivery
from tests.helpers import wait_until
from tests.trace_analysis.test_analysis import Trace
from trace_analysis import analyze, get_spark
from trace_analysis.cli import print_table
from trace_analysis.endings import trace_endings
from trace_analysis.reference import check_directory

AGREED = ("undelivered", "undelivered_open", "undelivered_to_departed",
          "undelivered_from_departed", "undelivered_present", "abrupt_endings",
          "open_traces", "releases", "released_deliveries", "causal_violations")


@pytest.fixture(scope="module")
def spark():
    return get_spark()


def _agree(spark, directory: Path) -> dict[str, Any]:
    """The Spark result, after checking the reference checker says the same."""
    result = analyze(directory, spark=spark)
    reference = check_directory(directory)
    assert {k: result[k] for k in AGREED} == {k: getattr(reference, k) for k in AGREED}
    return result


def _table(result: dict[str, Any]) -> str:
    out = io.StringIO()
    print_table(result, out)
    return out.getvalue()


def test_the_first_line_a_file_writer_writes_names_its_process(tmp_path: Path) -> None:
    tracer = JsonlTracer(tmp_path, "a")
    for ts in (1.0, 2.0):
        tracer.emit({"ts": ts, "process": "a", "event": "receive", "protocol": "none",
                     "msg": "b#1"})
    tracer.close()
    first, second = (json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines())
    assert (first["pid"], first["host"]) == (os.getpid(), platform.node())
    assert "pid" not in second and "host" not in second


@pytest.mark.long  # 15 s
def test_a_trace_whose_writer_runs_is_open_not_ended(spark, tmp_path: Path) -> None:
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        t = Trace()
        t.ts = time.time()  # wall clock, as communicators record (the writers started before)
        t.send("a", "a1", ["b", "c"])  # b runs on and has not got it yet; c was killed
        t.send("b", "b1", ["a"])       # a left before b's message came
        t.send("c", "c1", ["a"])
        t.deliver("a", "c1")
        t.ts += 5
        t.records.append({"ts": t.ts, "process": "a", "event": "leave", "client": "a",
                          "protocol": "test"})
        host = platform.node()
        for process, pid in (("b", running.pid), ("c", gone.pid)):
            first = next(r for r in t.records if r["process"] == process)
            first.update(pid=pid, host=host)
        result = _agree(spark, t.write(tmp_path / "t"))
        assert result["open_traces"] == {"b": running.pid}
        assert result["abrupt_endings"] == ["c"]
        assert (result["undelivered_open"], result["undelivered_to_departed"],
                result["undelivered_present"]) == (2, 1, 0)
        table = _table(result)
        assert f"traces still open (the run goes on; nothing is judged of their end): b (pid " \
               f"{running.pid} alive)" in table
        assert "2 are to or from a process still running (open trace)" in table
        # once the writer has ended, the same trace ended abruptly
        running.kill()
        running.wait()
        ended = trace_endings(sorted((tmp_path / "t").glob("*.jsonl")))
        assert ended.open == {} and ended.abrupt == ["b", "c"]
    finally:
        running.kill()
        running.wait()


@pytest.mark.long  # real processes and seconds of work: CI runs it
def test_real_processes_running_killed_and_gone(spark, tmp_path: Path,
                                                group: ProcessGroup) -> None:
    traces = tmp_path / "traces"
    for name in ("alice", "bob", "carol"):
        group.start_peer(name, causality="vector", trace_dir=str(traces))
    group.wait_members(["alice", "bob", "carol"])
    alice, bob, carol = (group.peers[n] for n in ("alice", "bob", "carol"))
    alice.command(op="send", to="others", payload="hello")
    bob.wait_count("deliver", 1)
    carol.wait_count("deliver", 1)
    carol.kill()
    bob.quit()
    mine = traces / "alice.jsonl"  # written on: wait for her send to reach the file
    wait_until(lambda: mine.exists() and '"event":"send"' in mine.read_text(),
               what="alice's send in her trace")
    result = _agree(spark, traces)
    assert result["open_traces"] == {"alice": alice.process.pid}
    assert result["abrupt_endings"] == ["carol"]
    assert f"alice (pid {alice.process.pid} alive)" in _table(result)


@pytest.mark.long  # real processes and seconds of work: CI runs it
def test_a_delivery_released_without_its_cause_is_reported(spark, tmp_path: Path,
                                                           group: ProcessGroup) -> None:
    """carol's message to bob is delayed past her departure; alice's answer to carol's
    other message waits at bob on the lost one until ``release_after`` lets it go."""
    assert group.server is not None
    traces = tmp_path / "traces"
    common: dict[str, Any] = dict(server=group.server.address, key_file=str(group.key_file),
                                  causality="matrix", trace_dir=str(traces))
    got: list = []
    alice = Communicator("alice", "s", **common)
    bob = Communicator("bob", "s", **common, delivery=Delivery(release_after=0.2))
    carol = Communicator("carol", "s", **common)
    try:
        bob.add_message_listener(lambda m: got.append(m.user_message))
        answered = threading.Event()
        alice.add_message_listener(lambda m: (alice.to_user("bob", "re: lunch"),
                                              answered.set()))
        wait_until(lambda: len(bob.members) == 3 and len(alice.members) == 3, what="joins")
        carol.set_minimum_delay_to_peer("bob", 60_000)
        carol.to_user("bob", "lost on the way")
        carol.to_user("alice", "lunch?")
        assert answered.wait(10)
        carol.close(timeout=0.2)
        wait_until(lambda: got == ["re: lunch"], what="the release at bob")
    finally:
        for communicator in (bob, alice, carol):
            communicator.close()
    time.sleep(0.1)
    result = _agree(spark, traces)
    # the cause never arrived: no triple, yet the delivery went without it
    assert result["causal_violations"] == 0
    assert (result["releases"], result["released_deliveries"]) == (1, 1)
    assert result["undelivered"] == 1  # carol's lost message
    assert "delivered without their causes after a release: 1" in _table(result)


def test_a_process_that_went_on_as_a_new_incarnation_ended_its_first_trace(
        tmp_path: Path) -> None:
    """Declared gone, carol's process goes on as carol~2: carol.jsonl is over (abrupt),
    carol~2.jsonl is open."""
    now, host, pid = time.time(), platform.node(), os.getpid()
    lines = {
        "alice": [{"event": "join", "client": "alice"}, {"event": "leave", "client": "alice"}],
        "carol": [{"event": "join", "client": "carol", "pid": pid, "host": host}],
        "carol~2": [{"event": "join", "client": "carol~2", "pid": pid, "host": host}],
    }
    for process, records in lines.items():
        with open(tmp_path / f"{process}.jsonl", "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps({"ts": now, "process": process, "protocol": "none",
                                         **record}) + "\n")
    endings = trace_endings(sorted(tmp_path.glob("*.jsonl")))
    assert endings.open == {"carol~2": pid}
    assert endings.abrupt == ["carol"]


@pytest.mark.parametrize("gzipped", [False, True])
def test_lines_are_found_across_chunk_boundaries(tmp_path: Path, monkeypatch,
                                                 gzipped: bool) -> None:
    import gzip

    from trace_analysis import endings

    monkeypatch.setattr(endings, "_CHUNK_BYTES", 7)
    lines = [f'{{"n":{i},"event":"{"release" if i % 3 == 0 else "send"}"}}'
             for i in range(20)]
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("a.jsonl.gz" if gzipped else "a.jsonl")
    path.write_bytes(gzip.compress(text) if gzipped else text)
    assert endings.matching_lines(path, b'"release"') == \
        [line.encode() for line in lines if '"release"' in line]
    path.write_bytes(text.rstrip(b"\n"))  # a last line without its end
    if not gzipped:
        assert endings.matching_lines(path, b'"n":19') == [lines[19].encode()]


def test_a_release_in_the_in_process_network_is_traced_with_what_it_let_go() -> None:
    from groupcomm.tools.localnet import LocalNetwork

    net = LocalNetwork(["a", "b", "c"], "matrix")
    net.send("a", "lost", ["c"])
    net.send("a", "to b", ["b"])
    net.in_flight = [f for f in net.in_flight if not (f.source == "a" and f.dest == "c")]
    net.run()
    net.send("b", "depends", ["c"])  # b saw a's message: this one waits at c on a's lost one
    net.run()
    net.leave("a")
    released = net.nodes["c"].release_waiting_on("a")
    assert net.delivered_payloads("c") == ["depends"]
    records = [r for r in net.records if r["event"] == "release"]
    assert records == [{"ts": records[0]["ts"], "process": "c", "event": "release",
                        "protocol": "matrix", "client": "a", "msgs": released}]
    assert len(released) == 1
