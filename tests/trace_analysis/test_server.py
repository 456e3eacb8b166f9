"""The warm paths of ``groupcomm analyze``: the analysis server (in a thread of this
process, on this process's SparkSession, so no second Spark starts), what a client does
with a dead, silent, stale or vanishing server, ``--watch``, and the options' errors.
A server in its own process (``--warm``) is tested under ``-m slow``."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupcomm.core.tracing import write_trace_dir
from groupcomm.tools.localnet import LocalNetwork
from trace_analysis import analyze, get_spark
from trace_analysis import server as server_mod
from trace_analysis.cli import main as analyze_main
from trace_analysis.cli import watch
from trace_analysis.synth import SynthSpec, generate

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long

#: the traces of one demo run under none (meeting, lunch, shared text), made by
#: :func:`demo_traces` before the first test of this module (never committed data)
DEMO = Path()


@pytest.fixture(scope="module", autouse=True)
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    global DEMO
    out = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "groupcomm.cli", "demo", "--causality",
                           "none", "--no-analysis", "--trace-dir", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {p.name for p in out.iterdir()} >= {"meeting-none", "lunch-none",
                                               "shared-text-none"}
    DEMO = out
    return out
#: what may differ between two analyses of the same trace
VOLATILE = ("seconds", "engine")


@pytest.fixture(scope="module")
def spark():
    return get_spark()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private directory for state files (no server of the user's is seen)."""
    directory = tmp_path / "state"
    monkeypatch.setenv("GROUPCOMM_ANALYZE_SERVER_DIR", str(directory))
    return directory


@contextlib.contextmanager
def running_server(warm_up: bool = False, idle_timeout: float | None = None
                   ) -> Iterator[server_mod.AnalysisServer]:
    """``serve()`` in a thread (on the test session); stopped and joined afterwards."""
    ready: queue.Queue[server_mod.AnalysisServer] = queue.Queue()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            server_mod.serve(ready=ready.put, warm_up=warm_up, idle_timeout=idle_timeout)
        except BaseException as error:  # reported to the test below
            failed.append(error)
            ready.put(None)  # type: ignore[arg-type]

    thread = threading.Thread(target=run, name="test-analysis-server", daemon=True)
    thread.start()
    server = ready.get(timeout=600)
    assert server is not None, failed
    try:
        yield server
    finally:
        server.stopping.set()
        thread.join(30)
        assert not thread.is_alive()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = analyze_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def comparable(result: dict[str, Any], report_dir: str | None = None) -> dict[str, Any]:
    out = {k: v for k, v in json.loads(json.dumps(result, default=str)).items()
           if k not in VOLATILE}
    if report_dir is not None:  # paths differ by the directory only
        out["report"] = {k: Path(v).relative_to(report_dir).as_posix()
                         for k, v in out.get("report", {}).items()}
        out.pop("violations_out", None)
    return out


def report_files(directory: Path) -> dict[str, Any]:
    """The text files of a report, summary.json without its volatile keys."""
    files: dict[str, Any] = {}
    for path in sorted(directory.rglob("*")):
        if path.suffix in (".csv", ".txt", ".log", ".jsonl"):
            files[path.name] = path.read_text()
    summary = json.loads((directory / "summary.json").read_text())
    files["summary.json"] = comparable(summary, str(directory))
    return files


def synthetic(directory: Path, seed: int) -> Path:
    rng = random.Random(seed)
    generate(SynthSpec(events=rng.randrange(60, 400), processes=rng.randrange(2, 6),
                       protocol=rng.choice(["none", "vector", "matrix", "cykas"]),
                       seed=seed, violations=rng.randrange(0, 3),
                       undelivered=rng.randrange(0, 3), duplicates=rng.randrange(0, 2),
                       malformed=rng.randrange(0, 2), pad=0), directory)
    return directory


def communicator_run(directory: Path) -> Path:
    net = LocalNetwork(["alice", "bob", "carol"], "vector")
    rng = random.Random(11)
    for i in range(10):
        net.send(rng.choice(["alice", "bob", "carol"]), i, ["alice", "bob", "carol"])
    net.run(rng)
    write_trace_dir(net.records, directory)
    return directory


@pytest.fixture(scope="module")
def shared_server(spark, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[server_mod.AnalysisServer]:
    """One analysis server for the comparisons, with its own state directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROUPCOMM_ANALYZE_SERVER_DIR", str(tmp_path_factory.mktemp("state")))
        with running_server() as server:
            yield server


def trace_named(name: str, directory: Path) -> Path:
    if name.startswith("synth-"):
        return synthetic(directory / name, int(name.split("-")[1]))
    if name == "run":
        return communicator_run(directory / name)
    return Path(shutil.copytree(DEMO / name, directory / name))


# two cases in the default suite (a demo trace with a violation, a random one); the
# others under -m slow, to keep the suite's time
@pytest.mark.parametrize("name", [
    "meeting-none", pytest.param("lunch-none", marks=pytest.mark.slow),
    pytest.param("shared-text-none", marks=pytest.mark.slow),
    pytest.param("run", marks=pytest.mark.slow), "synth-3",
    pytest.param("synth-17", marks=pytest.mark.slow)])
def test_the_server_answers_what_this_process_answers(shared_server, name: str,
                                                      tmp_path: Path, capsys,
                                                      monkeypatch) -> None:
    """The demo's traces, a communicator run and random synthetic traces: the same JSON
    and the same report files from the analysis server as from this process (relative
    paths given, as a user would); each output names the engine that answered."""
    monkeypatch.setenv("GROUPCOMM_ANALYZE_SERVER_DIR", str(shared_server.state_path.parent))
    monkeypatch.chdir(tmp_path)
    trace_named(name, tmp_path)
    argv = [name, "--json", "-q"]
    code, out, err = run_cli(capsys, *argv, "--report", f"served/{name}",
                             "--violations-out", f"served/{name}.jsonl")
    assert code == 0, err
    served = json.loads(out)
    assert served["engine"]["session"] == f"analysis server (pid {os.getpid()})", err
    assert served["report"]["summary"] == f"served/{name}/summary.json"
    code, out, err = run_cli(capsys, *argv, "--no-server", "--report", f"here/{name}",
                             "--violations-out", f"here/{name}.jsonl")
    assert code == 0, err
    here = json.loads(out)
    assert here["engine"]["session"] == "this process"
    assert comparable(served, f"served/{name}") == comparable(here, f"here/{name}")
    assert report_files(Path("served", name)) == report_files(Path("here", name))
    assert (Path("served", f"{name}.jsonl").read_text()
            == Path("here", f"{name}.jsonl").read_text())


def test_the_table_names_the_engine_and_errors_stay_one_line(shared_server, tmp_path: Path,
                                                             capsys, monkeypatch) -> None:
    monkeypatch.setenv("GROUPCOMM_ANALYZE_SERVER_DIR", str(shared_server.state_path.parent))
    code, out, err = run_cli(capsys, str(DEMO / "lunch-none"))
    assert code == 0, err
    assert f"engine: spark {shared_server.spark.version} local[2], analysis server (pid" in out
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, str(tmp_path / "empty"), "-q")
    assert code == 2 and err.strip().startswith("groupcomm analyze: no trace files")
    assert err.count("\n") == 1


def test_a_stopped_server_removes_its_state_file(spark, state: Path) -> None:
    with running_server() as server:
        assert server.state_path.exists()
        info = server_mod.read_state(None, True)
        assert info is not None and info.port == server.port
    assert not server.state_path.exists()


def test_an_idle_server_stops_by_itself(spark, state: Path) -> None:
    with running_server(idle_timeout=1.0) as server:
        assert server.stopping.wait(60)  # about a second after it was published
        deadline = time.monotonic() + 30
        while server.state_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.state_path.exists()
        assert server_mod.read_state(None, True) is None


def write_state(state: Path, **fields: Any) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    data = {"pid": os.getpid(), "port": 1, "token": "t", "master": "local[2]", "ship": True,
            "fingerprint": server_mod.code_fingerprint(), "spark_version": "4"} | fields
    path = server_mod.state_file(None, True)
    path.write_text(json.dumps(data))
    return path


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]


def test_a_dead_or_silent_server_is_noted_and_the_analysis_runs_here(
        spark, state: Path, capsys, monkeypatch) -> None:
    trace = str(DEMO / "meeting-none")
    # the process is gone: the state file goes, silently
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    path = write_state(state, pid=child.pid)
    code, out, err = run_cli(capsys, trace, "--json", "-q")
    assert code == 0 and json.loads(out)["engine"]["session"] == "this process"
    assert not path.exists() and "note" not in err
    # the process lives but nothing listens on the port
    path = write_state(state, port=closed_port())
    code, out, err = run_cli(capsys, trace, "--json", "-q")
    assert code == 0 and json.loads(out)["engine"]["session"] == "this process"
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "not usable: no answer on port" in notes[0]
    assert not path.exists()
    # something listens but never answers
    monkeypatch.setattr(server_mod, "HELLO_TIMEOUT", 0.5)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        path = write_state(state, port=silent.getsockname()[1])
        code, out, err = run_cli(capsys, trace, "--json", "-q")
    assert code == 0 and json.loads(out)["engine"]["session"] == "this process"
    assert "not usable: no answer within" in err and not path.exists()


def fake_server(behaviour: str) -> tuple[socket.socket, threading.Thread]:
    """A server that says hello to pings, and to an analysis says hello then
    ``behaviour``: ``close`` (goes away) or ``internal`` (reports a failure)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn, conn.makefile("rb") as reader:
                    request = json.loads(reader.readline())
                    hello = {"pid": os.getpid(), "fingerprint": server_mod.code_fingerprint()}
                    conn.sendall(json.dumps({"hello": hello}).encode() + b"\n")
                    if request["op"] == "analyze":
                        conn.sendall(b'{"progress": "parsing"}\n')
                        if behaviour == "internal":
                            conn.sendall(b'{"error": "boom", "kind": "internal"}\n')

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("behaviour", ["close",
                                       pytest.param("internal", marks=pytest.mark.slow)])
def test_a_server_that_fails_mid_analysis_is_noted_and_the_analysis_runs_here(
        spark, state: Path, capsys, behaviour: str) -> None:
    listener, thread = fake_server(behaviour)
    try:
        write_state(state, port=listener.getsockname()[1])
        code, out, err = run_cli(capsys, str(DEMO / "lunch-none"), "--json")
    finally:
        listener.close()
        thread.join(10)
    assert code == 0
    assert json.loads(out)["engine"]["session"] == "this process"
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "analysing in this process" in notes[0]
    assert ("closed the connection" if behaviour == "close" else "it failed: boom") in notes[0]
    assert "[analyze] parsing" in err  # its progress was shown until then


def test_a_server_running_changed_code_is_stopped_and_not_used(spark, state: Path, capsys,
                                                               monkeypatch) -> None:
    with running_server() as server:
        monkeypatch.setattr(server_mod, "code_fingerprint", lambda: "edited")
        code, out, err = run_cli(capsys, str(DEMO / "lunch-none"), "--json", "-q")
        assert code == 0 and json.loads(out)["engine"]["session"] == "this process"
        assert "runs code that has changed since it started: stopping it" in err
        assert server.stopping.wait(10)


def test_requests_need_the_token(spark, state: Path) -> None:
    with running_server() as server:
        info = server_mod.read_state(None, True)
        assert info is not None and info.port == server.port
        assert server_mod.ping(info)["pid"] == os.getpid()
        forged = dataclasses.replace(info, token="guess")
        with pytest.raises(server_mod.ServerGone, match="wrong token"):
            server_mod.ping(forged)
        assert Path(info.state_file).stat().st_mode & 0o077 == 0


def test_watch_reports_again_when_a_trace_grows_or_appears(spark, tmp_path: Path) -> None:
    """The first report once traces appear, then one per change; the last equals a
    fresh analysis of the final directory."""
    directory = tmp_path / "live"
    reports: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(
        target=watch, args=(directory, lambda _state: reports.put(analyze(directory, spark=spark)),
                            stop, 0.05), daemon=True)
    thread.start()
    source = DEMO / "meeting-none"
    lines = (source / "alice.jsonl").read_text().splitlines(keepends=True)

    def put(name: str, text: str) -> None:  # whole, as a writer's flush would leave it
        (directory / "part").write_text(text)
        (directory / "part").replace(directory / name)

    try:
        directory.mkdir()
        put("alice.jsonl", "".join(lines[:3]))
        first = reports.get(timeout=600)
        put("alice.jsonl", "".join(lines))
        second = reports.get(timeout=600)
        put("bob.jsonl", (source / "bob.jsonl").read_text())
        put("carol.jsonl", (source / "carol.jsonl").read_text())
        third = reports.get(timeout=600)
        while third["files"] < 3:  # the two copies may have been seen one at a time
            third = reports.get(timeout=600)
    finally:
        stop.set()
        thread.join(120)
    assert not thread.is_alive()
    assert (first["lines"], second["lines"]) == (3, len(lines))
    assert third["files"] == 3 and reports.empty()
    final = analyze(DEMO / "meeting-none", spark=spark)
    assert {k: v for k, v in third.items() if k not in ("seconds", "trace_dir")} == {
        k: v for k, v in final.items() if k not in ("seconds", "trace_dir")}


@pytest.mark.parametrize("argv, message", [
    (["--serve", "x"], "--serve takes no TRACE_DIR"),
    ([], "TRACE_DIR is required"),
    (["x", "--warm", "--no-server"], "--warm and --no-server exclude each other"),
    (["x", "--idle-timeout", "5"], "--idle-timeout goes with --serve or --warm"),
    (["--serve", "--idle-timeout", "-1"], "--idle-timeout must be >= 0"),
    (["--serve", "--watch"], "--serve and --watch exclude each other"),
    (["--serve", "--report", "r"], "--report goes with a TRACE_DIR, not --serve"),
    (["hdfs://nn:8020/t", "--watch"], "--watch takes a local directory"),
    (["x", "--watch", "--interval", "0"], "--interval must be > 0"),
])
def test_bad_warm_options_get_one_line(argv: list[str], message: str, capsys) -> None:
    assert analyze_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_stop_server_without_one_says_so(state: Path, capsys) -> None:
    assert analyze_main(["--stop-server"]) == 0
    assert "no analysis server runs" in capsys.readouterr().err


@pytest.mark.slow
def test_warm_starts_a_background_server_that_later_calls_reuse(tmp_path: Path) -> None:
    """A real server process: started by the first ``--warm`` call, reused by a plain
    call, stopped by ``--stop-server``; never left running."""
    env = {**os.environ, "GROUPCOMM_ANALYZE_SERVER_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "groupcomm.cli", "analyze"]
    trace = str(DEMO / "meeting-none")
    started: int | None = None
    try:
        first = subprocess.run([*command, trace, "--warm", "--json", "--idle-timeout", "10"],
                               env=env, capture_output=True, text=True, timeout=400)
        assert first.returncode == 0, first.stderr
        engine = json.loads(first.stdout)["engine"]
        assert engine["session"].startswith("analysis server (pid ")
        started = int(engine["session"].split()[-1].rstrip(")"))
        second = subprocess.run([*command, trace, "--json"], env=env, capture_output=True,
                                text=True, timeout=200)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["engine"] == engine
        assert "starting the analysis server" in first.stderr
        assert "starting the analysis server" not in second.stderr
        stopped = subprocess.run([*command, "--stop-server"], env=env, capture_output=True,
                                 text=True, timeout=60)
        assert stopped.returncode == 0 and "stopped" in stopped.stderr
        assert not list((tmp_path / "state").glob("*.json"))
    finally:
        if started is not None:
            deadline = time.monotonic() + 30
            with contextlib.suppress(ProcessLookupError):
                while time.monotonic() < deadline:
                    os.kill(started, 0)
                    time.sleep(0.2)
                os.killpg(started, signal.SIGKILL)
    with pytest.raises(ProcessLookupError):
        os.kill(started or 0x7FFFFFFF, 0)
