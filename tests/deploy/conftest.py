"""Fixtures of the deployment tests: two session servers sharing the test's PostgreSQL
store, and nginx started with a configuration of docs/deploy.md, always reaped."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from groupcomm.tools.pgserver import TempPostgres
from groupcomm.tools.procs import ServerProcess
from groupcomm.transport.keys import write_new_key
from tests.deploy.harness import NGINX, free_port, listening_on, nginx_conf, wait_port
from tests.web.conftest import BrowserFactory, chromium_paths


@pytest.fixture
def stored_servers(tmp_path: Path, postgres_server: TempPostgres
                   ) -> Iterator[tuple[Path, list[ServerProcess]]]:
    """A session key and two ``groupcomm serve`` sharing a PostgreSQL database (taking
    a member silent for 1.5 s for gone, snapshotting every 20 messages or second)."""
    pytest.importorskip("psycopg")
    key = tmp_path / "session.key"
    write_new_key(key)
    url = postgres_server.create_database()
    started: list[ServerProcess] = []
    try:
        for _ in range(2):
            started.append(ServerProcess(key, extra=[
                "--heartbeat-timeout", "1.5", "--store", url, "--snapshot-every", "20",
                "--snapshot-seconds", "1"]))
        yield key, started
    finally:
        for server in started:
            if server.alive():
                server.process.send_signal(signal.SIGCONT)
            server.kill()


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Callable[[str], int]]:
    """``start(block)``: nginx running ``block`` (an http block's content listening at
    127.0.0.1:8080, as docs/deploy.md writes it) at a free port, which it returns;
    stopped at the end. Skips when nginx is not installed."""
    if NGINX is None:
        pytest.skip("nginx is not installed (./run test installs Debian's nginx)")
    running: list[subprocess.Popen] = []

    def start(block: str) -> int:
        port = free_port()
        conf = nginx_conf(tmp_path, listening_on(block, port))
        process = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(conf)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        running.append(process)
        wait_port(port, process)
        return port

    try:
        yield start
    finally:
        for process in running:
            process.send_signal(signal.SIGQUIT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            if process.stderr is not None:
                process.stderr.close()


@pytest.fixture
def chromium() -> Iterator[BrowserFactory]:
    """Headless Chromium through Selenium (as tests/web uses it), closed at the end;
    skips when Chromium or its driver is missing."""
    paths = chromium_paths()
    if paths is None:
        pytest.skip("no chromium and chromedriver here (./run test installs them)")
    factory = BrowserFactory(*paths)
    try:
        yield factory
    finally:
        factory.quit()
