"""``groupcomm analyze --master spark://...`` against a real standalone cluster: a master
and a worker started from the installed pyspark's own ``spark-class`` on 127.0.0.1.

A worker given this environment's Python gives the same result as ``local[2]``; a
worker on the system Python, which lacks the analysis' packages, gets them shipped with
the job and gives it too, or with ``--no-ship`` one clear line naming them. Behind the
``slow`` marker: the clusters and the Spark sessions take a few minutes here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import virtual_results
from trace_analysis.synth import SynthSpec, generate

pytestmark = pytest.mark.slow


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    out = open(log, "w")  # noqa: SIM115 - closed with the process in the fixture
    return subprocess.Popen([str(_spark_home() / "bin" / "spark-class"), *args], stdout=out,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait_for(log: Path, pattern: str, process: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found.group(0)
        if process.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"{log.name}: no {pattern!r} within {timeout} s:\n{log.read_text()[-2000:]}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java")
    env = {**os.environ, "SPARK_HOME": str(_spark_home()),
           "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_LOCAL_IP": "127.0.0.1"}
    started: list[subprocess.Popen] = []
    try:
        master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", "0", "--webui-port", "0"], tmp_path / "master.log", env)
        started.append(master)
        url = _wait_for(tmp_path / "master.log", r"spark://127\.0\.0\.1:\d+", master)
        worker = _start(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                         "--port", "0", "--webui-port", "0", "--cores", "2", "--memory",
                         "2g", "--work-dir", str(tmp_path / "work")],
                        tmp_path / "worker.log", env)
        started.append(worker)
        _wait_for(tmp_path / "worker.log", "Successfully registered with master", worker)
        yield url
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def _analyze(trace: Path, *args: str, python: str | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    if python is not None:
        env["PYSPARK_PYTHON"] = python
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "analyze", str(trace),
                           "--json", *args], capture_output=True, text=True, timeout=600,
                          env=env)


def test_analyze_on_a_real_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    generate(SynthSpec(events=20_000, processes=6, seed=3), trace)
    local = _analyze(trace)
    assert local.returncode == 0, local.stderr[-2000:]

    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python:  # a plain Python without this project's packages
        bare = _analyze(trace, "--master", cluster, "--no-ship", python=system_python)
        assert bare.returncode != 0
        line = bare.stderr.strip().splitlines()[-1]
        assert "the Spark workers' Python" in line and "lacks" in line and "numpy" in line
        assert "--no-ship" in line and "Traceback" not in bare.stderr

    remote = _analyze(trace, "--master", cluster, python=sys.executable)
    assert remote.returncode == 0, remote.stderr[-2000:]
    _same(json.loads(local.stdout), json.loads(remote.stdout))


def _same(ours: dict, theirs: dict) -> None:
    for field in ("events", "messages", "deliveries", "causal_violations", "fifo_violations",
                  "undelivered", "duplicates", "malformed_lines"):
        assert ours[field] == theirs[field], field
    assert ours["causal_violations"] == 5 and ours["undelivered"] == 5


def test_packages_are_shipped_to_workers_with_a_plain_python(cluster: str,
                                                              tmp_path: Path) -> None:
    """Workers on the system Python, which has none of numpy, msgspec, pyarrow, pandas:
    the analysis ships this installation's with the job and gives local[2]'s result."""
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system Python to play a bare worker")
    probe = subprocess.run([system_python, "-c", "import sys, sysconfig; print("
                            "f'{sys.version_info[0]}.{sys.version_info[1]}-'"
                            "f'{sysconfig.get_platform()}')"],
                           capture_output=True, text=True, timeout=60)
    from trace_analysis.session import platform_tag

    if probe.stdout.strip() != platform_tag():
        pytest.skip(f"the system Python is {probe.stdout.strip()}, the driver {platform_tag()}")
    trace = tmp_path / "trace"
    generate(SynthSpec(events=20_000, processes=6, seed=3), trace)
    local = _analyze(trace)
    assert local.returncode == 0, local.stderr[-2000:]
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}  # the archive is built afresh
    shipped = _analyze(trace, "--master", cluster, python=system_python, env=env)
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert "shipping this installation's" in shipped.stderr
    assert list((tmp_path / "cache" / "groupcomm").glob("spark-worker-deps-*.tar"))
    _same(json.loads(local.stdout), json.loads(shipped.stdout))


def test_a_simulated_figure_runs_as_tasks_of_workers_with_a_plain_python(
        cluster: str, tmp_path: Path) -> None:
    """``simulate figure --spark --master``: the runs are tasks on workers that have
    nothing of ours; groupcomm goes with the job and msgpack, numpy, pluggy and dill are
    shipped. Same virtual results as the runs made in this process."""
    from groupcomm.sim import figures

    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system Python to play a bare worker")
    env = {**os.environ, "PYSPARK_PYTHON": system_python,
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "simulate", "figure", "6", "--tiny", "--spark",
         "--master", cluster, "--out", str(tmp_path / "spark"), "--json"],
        capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["completed"] and info["done"] == info["runs"]
    local = figures.run_figure(6, tmp_path / "local", scale="tiny")
    assert virtual_results(Path(info["csv"])) == virtual_results(Path(local["csv"]))
