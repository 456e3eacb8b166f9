"""``groupcomm serve --workers N``: N session servers on one machine, one process each
(one per core), sharing the session key and the store; clients get the printed
``--servers`` list and place each session on one of them (docs/deploy.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from groupcomm.cli.args import CliError
from groupcomm.transport.address import EndpointError, endpoint
from groupcomm.transport.keys import SessionKeyError, resolve_key, write_new_key

#: seconds a worker has to say where it listens
START_TIMEOUT = 20.0
#: a worker that ended on its own is started again after this many seconds, at the
#: same address, so its sessions come back to it (clients ask it again). Its members
#: move to their next server after 2 s of silence (SERVER_SILENCE_HEARTBEATS heartbeats);
#: a worker back sooner would race that limit, some members rejoining it and others
#: moving on, the session split until the movers ask it again. Back later than the
#: limit with a margin (a heartbeat, a busy machine), it always finds them moved, and
#: they come back together (docs/deploy.md)
RESTART_AFTER = 3.0
#: one line at a time on stdout: the workers' echo threads and the main thread write
_PRINT = threading.Lock()


def _say(line: str, stream=sys.stdout) -> None:
    with _PRINT:
        stream.write(line + "\n")
        stream.flush()


def worker_binds(bind: str, workers: int) -> list[str]:
    """The addresses of ``workers`` servers: ``bind`` may list them (comma-separated), or
    be one ``tcp://HOST:PORT`` that becomes PORT .. PORT+N-1 (port 0: a free port each).
    :class:`CliError` for a list whose length is not ``workers`` or a bad address."""
    prog = "groupcomm serve"
    try:
        listed = [endpoint(item, "--bind") for item in bind.split(",") if item.strip()]
    except EndpointError as error:
        raise CliError(f"{prog}: {error}") from None
    if workers < 1:
        raise CliError(f"{prog}: --workers must be at least 1, not {workers}")
    if len(listed) > 1:
        if workers not in (1, len(listed)):
            raise CliError(f"{prog}: --bind lists {len(listed)} addresses but --workers "
                           f"is {workers}")
        return listed
    if not listed:
        raise CliError(f"{prog}: --bind lists no address")
    head, _, port = listed[0].rpartition(":")
    if not port.isdigit() or not head.startswith("tcp://"):
        raise CliError(f"{prog}: --workers needs tcp://HOST:PORT in --bind (or a list), "
                       f"not {listed[0]}")
    first = int(port)
    if first and first + workers - 1 > 65535:
        raise CliError(f"{prog}: ports {first}..{first + workers - 1} go past 65535")
    return [f"{head}:{first + i if first else 0}" for i in range(workers)]


class _Worker:
    """One ``groupcomm serve`` child; its stdout lines are echoed with its number."""

    def __init__(self, number: int, argv: list[str]) -> None:
        self.number = number
        self.argv = argv
        self.address = ""
        self.listening = threading.Event()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._echo, daemon=True).start()

    def _echo(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip("\n")
            if line.startswith("listening on "):
                self.address = line.split("listening on ", 1)[1].strip()
                self.listening.set()
            _say(f"worker {self.number} (pid {self.process.pid}): {line}")


def run_workers(args: argparse.Namespace, argv_rest: Sequence[str]) -> int:
    """Start the workers (``argv_rest``: the options each takes as given), print the
    ``--servers`` list, and keep them running until SIGTERM/SIGINT."""
    binds = worker_binds(args.bind, args.workers)
    if args.store and len(binds) > 1 and not args.store.startswith(
            ("postgresql://", "postgres://")):
        raise CliError("groupcomm serve: --workers shares the store between servers, "
                       "which needs PostgreSQL (--store postgresql://...); a SQLite file "
                       "is written by one server")
    try:
        key = resolve_key(args.key_file)
    except SessionKeyError as error:
        raise CliError(f"groupcomm serve: {error}") from None
    key_args: list[str] = []
    if key is None:  # one new key for all of them
        path = args.new_key_file
        if not path:
            handle, path = tempfile.mkstemp(prefix="groupcomm-", suffix=".key")
            os.close(handle)
        try:
            write_new_key(path)
        except OSError as error:
            raise CliError(f"groupcomm serve: cannot write key file {path}: "
                           f"{error.strerror or error}") from None
        key_args = ["--key-file", path]
        _say(f"key file: {Path(path).resolve()}")
    base = [sys.executable, "-m", "groupcomm.cli.serve", *argv_rest, *key_args]
    workers: list[_Worker] = []
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for number, bind in enumerate(binds):
            workers.append(_Worker(number, [*base, "--bind", bind]))
        deadline = time.monotonic() + START_TIMEOUT
        for worker in workers:
            while not worker.listening.wait(0.1):
                if worker.process.poll() is not None or time.monotonic() > deadline:
                    raise CliError(f"groupcomm serve: worker {worker.number} at "
                                   f"{binds[worker.number]} did not start")
        # a restarted worker binds where the first one listened (its port, not 0)
        binds = [worker.address for worker in workers]
        _say("servers: " + ",".join(binds))
        while not stopping.wait(0.2):
            for i, worker in enumerate(workers):
                if worker.process.poll() is not None and not stopping.is_set():
                    _say(f"worker {i} at {binds[i]} ended (exit {worker.process.returncode}); "
                         "starting it again", sys.stderr)
                    if stopping.wait(RESTART_AFTER):  # stopped meanwhile: not again
                        break
                    workers[i] = _Worker(i, [*base, "--bind", binds[i]])
        return 0
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in workers:
            try:
                worker.process.wait(10)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.process.wait(5)
        _say("workers stopped", sys.stderr)
