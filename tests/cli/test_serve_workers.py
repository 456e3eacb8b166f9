"""``groupcomm serve --workers N``: N server processes on one machine, the ``--servers``
list printed for clients (docs/deploy.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groupcomm.cli.args import CliError
from groupcomm.cli.serve import main as serve_main
from groupcomm.cli.workers import worker_binds
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.keys import write_new_key


def test_worker_addresses_are_consecutive_ports_or_the_list_given() -> None:
    assert worker_binds("tcp://127.0.0.1:7000", 3) == [
        "tcp://127.0.0.1:7000", "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"]
    assert worker_binds("127.0.0.1:0", 2) == ["tcp://127.0.0.1:0"] * 2
    assert worker_binds("127.0.0.1:7000,127.0.0.1:7100", 1) == [
        "tcp://127.0.0.1:7000", "tcp://127.0.0.1:7100"]
    assert worker_binds("127.0.0.1:7000,127.0.0.1:7100", 2) == [
        "tcp://127.0.0.1:7000", "tcp://127.0.0.1:7100"]


@pytest.mark.parametrize(("bind", "workers", "says"), [
    ("127.0.0.1:7000,127.0.0.1:7100", 3, "lists 2 addresses but --workers is 3"),
    ("127.0.0.1:65535", 2, "go past 65535"),
    ("127.0.0.1:7000", 0, "at least 1"),
    ("127.0.0.1:7000,nowhere", 2, "'nowhere' is not tcp://HOST:PORT"),
])
def test_bad_worker_addresses_are_one_line_errors(bind: str, workers: int, says: str) -> None:
    with pytest.raises(CliError, match=says):
        worker_binds(bind, workers)


def test_serve_refuses_a_bad_worker_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_main(["--workers", "0", "--bind", "127.0.0.1:0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_workers_refuse_a_sqlite_store(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    assert serve_main(["--workers", "2", "--bind", "127.0.0.1:0", "--store",
                       str(tmp_path / "s.db")]) == 2
    assert "needs PostgreSQL" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


@pytest.mark.long
def test_workers_serve_sessions_and_one_killed_comes_back(tmp_path: Path) -> None:
    key = tmp_path / "session.key"
    write_new_key(key)
    parent = subprocess.Popen(
        [sys.executable, "-m", "groupcomm.cli.serve", "--workers", "2", "--bind",
         "tcp://127.0.0.1:0", "--key-file", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        env={**os.environ})
    lines: list[str] = []
    errors: list[str] = []
    seen = threading.Condition()

    def read(stream, into: list[str]) -> None:
        for line in stream:
            with seen:
                into.append(line.rstrip("\n"))
                seen.notify_all()

    threading.Thread(target=read, args=(parent.stdout, lines), daemon=True).start()
    threading.Thread(target=read, args=(parent.stderr, errors), daemon=True).start()

    def wait_line(where: list[str], start: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        with seen:
            while True:
                found = next((x for x in where if x.startswith(start)), None)
                if found is not None:
                    return found
                if time.monotonic() > deadline:
                    raise AssertionError(f"no {start!r} line: {lines} {errors}")
                seen.wait(0.2)

    try:
        servers = wait_line(lines, "servers: ").split(": ", 1)[1].split(",")
        assert len(servers) == 2 and len(set(servers)) == 2
        with Communicator("ann", "notes", servers=servers, key_file=str(key)) as ann:
            assert ann.server_address in servers
            home = ann.server_address
            # "worker N (pid P): listening on ADDRESS"
            mine = next(x for x in lines if x.endswith(f"listening on {ann.server_address}"))
            os.kill(int(mine.split("(pid ", 1)[1].split(")", 1)[0]), signal.SIGKILL)
            assert "starting it again" in wait_line(errors, "worker ")
            deadline = time.monotonic() + 20
            while sum(x.endswith(f"listening on {ann.server_address}") for x in lines) < 2:
                assert time.monotonic() < deadline, lines
                time.sleep(0.1)
            # the worker comes back after the member's silence limit: the member moved
            # to the other worker meanwhile, and returns to the restarted one
            deadline = time.monotonic() + 30
            while (ann.server_unreachable or ann.server_address != home
                   or ann.counters().get("server_moves", 0) < 2):
                assert time.monotonic() < deadline, ann.counters()
                time.sleep(0.1)
    finally:
        parent.send_signal(signal.SIGTERM)
        try:
            parent.wait(20)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait(5)
    assert parent.returncode == 0
    assert sum(line == "server stopped" for line in errors) == 2
