"""Starting, driving and reaping real processes (server and peers) on this machine, for
the tests, the demonstration and the stress run: every wait is for an observable event
with a deadline, and a :class:`ProcessGroup` kills whatever it started when it exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from groupcomm.transport.keys import write_new_key


class ProcessError(RuntimeError):
    """A started process did not do what was expected in time."""


class _Child:
    """A child process; its stdout lines are collected (as :meth:`_parse` reads them)
    and its stderr kept for error messages."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None
                 ) -> None:
        self.name = name
        self.argv = list(argv)
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, env={**os.environ, **(env or {})})
        self.stderr_lines: list[str] = []
        self._output: list[Any] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

    def _parse(self, line: str) -> Any:
        return line.rstrip("\n")

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            item = self._parse(line)
            with self._cond:
                self._output.append(item)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _wait(self, found: Callable[[list[Any]], Any], timeout: float,
              failure: Callable[[], str]) -> Any:
        """The first value ``found(output so far)`` gives that is not None, waiting up to
        ``timeout`` seconds; else :class:`ProcessError` saying ``failure()``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = found(self._output)
                if result is not None:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.alive():
                    raise ProcessError(f"{self.name}: {failure()}; stderr: {self.stderr_tail()}")
                self._cond.wait(min(remaining, 0.2))

    def _write(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise ProcessError(f"{self.name} is gone: {error}; {self.stderr_tail()}") from None

    def _quit_with(self, line: str, timeout: float) -> None:
        """Write ``line`` and wait for the process to end (killing it if it hangs)."""
        if self.alive():
            try:
                self._write(line)
                self.process.wait(timeout)
            except (ProcessError, subprocess.TimeoutExpired):
                self.kill()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(5)

    def terminate(self, timeout: float = 5.0) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self.stderr_lines[-lines:])


def _first(predicate: Callable[[Any], bool]) -> Callable[[list[Any]], Any]:
    return lambda items: next((item for item in items if predicate(item)), None)


class ServerProcess(_Child):
    """``groupcomm serve`` in a child process."""

    def __init__(self, key_file: Path, bind: str = "tcp://127.0.0.1:0",
                 extra: Sequence[str] = (), timeout: float = 20.0) -> None:
        super().__init__("server", [sys.executable, "-m", "groupcomm.cli.serve", "--bind",
                                    bind, "--key-file", str(key_file), *extra])
        try:
            line = self._wait(_first(lambda s: s.startswith("listening on ")), timeout,
                              lambda: "did not start")
        except ProcessError:
            self.kill()
            raise ProcessError(f"server did not start: {self.stderr_tail()}") from None
        self.address = line.split("listening on ", 1)[1].strip()


class PeerProcess(_Child):
    """``python -m groupcomm.tools.peer`` in a child process, with its events collected."""

    def __init__(self, name: str, server: str, key_file: Path, *, session: str = "s",
                 causality: str | None = None, direct: bool = False,
                 trace_dir: str | None = None, filters: Sequence[str] = (),
                 extra: Sequence[str] = (), wrapper: Sequence[str] = ()) -> None:
        # wrapper: a command the peer runs under, e.g. ``ip netns exec NS``
        argv = [*wrapper, sys.executable, "-m", "groupcomm.tools.peer", "--name", name,
                "--server", server, "--key-file", str(key_file), "--session", session,
                *(arg for spec in filters for arg in ("--filter", spec)),
                *(["--causality", causality] if causality else []),
                *(["--direct"] if direct else []),
                *(["--trace-dir", trace_dir] if trace_dir else []), *extra]
        super().__init__(name, argv)
        self.events: list[dict[str, Any]] = self._output

    def _parse(self, line: str) -> dict[str, Any]:
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"event": "garbage", "line": line}

    def command(self, **command: Any) -> None:
        self._write(json.dumps(command))

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20.0,
                 what: str = "event") -> dict[str, Any]:
        """The first event matching ``predicate`` (waiting up to ``timeout`` seconds)."""
        return self._wait(_first(predicate), timeout, lambda: (
            f"no {what} within {timeout:g}s; events: {self.events[-8:]}"))

    def wait_count(self, event: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until ``count`` events of type ``event`` have arrived; return them."""
        def enough(events: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            found = [e for e in events if e.get("event") == event]
            return found if len(found) >= count else None

        return self._wait(enough, timeout, lambda: (
            f"{len(enough(self.events) or [])}/{count} {event} events within {timeout:g}s"))

    def deliveries(self) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == "deliver"]

    def quit(self, timeout: float = 10.0) -> None:
        """Leave cleanly (``quit`` command), killing the process if it hangs."""
        self._quit_with(json.dumps({"op": "quit"}), timeout)


class ProcessGroup:
    """A session key, a server and peers; everything is reaped on exit."""

    def __init__(self, workdir: Path, *, server_extra: Sequence[str] = (),
                 server_bind: str = "tcp://127.0.0.1:0") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.key_file = self.workdir / "session.key"
        write_new_key(self.key_file)
        self.server_extra = list(server_extra)
        self.server_bind = server_bind
        self.server: ServerProcess | None = None
        self.peers: dict[str, PeerProcess] = {}

    def __enter__(self) -> ProcessGroup:
        self.server = ServerProcess(self.key_file, bind=self.server_bind,
                                    extra=self.server_extra)
        return self

    def stop_server(self) -> None:
        """Stop the server (SIGTERM); its address stays known for :meth:`start_server`."""
        assert self.server is not None
        self.server.terminate()

    def start_server(self) -> None:
        """Start the server again on the same address with the same key."""
        assert self.server is not None
        self.server = ServerProcess(self.key_file, bind=self.server.address,
                                    extra=self.server_extra)

    def start_peer(self, name: str, **options: Any) -> PeerProcess:
        """Start a peer and wait until it has joined."""
        assert self.server is not None
        peer = PeerProcess(name, self.server.address, self.key_file, **options)
        self.peers[name] = peer
        first = peer.wait_for(lambda e: e.get("event") in ("ready", "bye"), what="ready")
        if first["event"] != "ready":
            raise ProcessError(f"{name} did not join: {peer.stderr_tail()}")
        return peer

    def wait_members(self, names: Sequence[str], timeout: float = 20.0) -> None:
        """Wait until every peer in ``names`` has seen all of ``names`` join."""
        expected = set(names)
        for name in names:
            peer = self.peers[name]
            peer.wait_for(
                lambda e: e.get("event") in ("joined", "ready")
                and expected <= set(e.get("all_users") or e.get("members") or []),
                timeout, what=f"membership {sorted(expected)}",
            )

    def close(self) -> None:
        """Quit peers, stop the server, kill anything left."""
        for peer in self.peers.values():
            try:
                peer.quit(timeout=5)
            except Exception:
                peer.kill()
        if self.server is not None:
            self.server.terminate()

    def __exit__(self, *exc: object) -> None:
        self.close()


class LineProcess(_Child):
    """A child whose stdout lines are collected (the IM app, driven as a person would)."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        super().__init__(name, argv, env)
        self.lines: list[str] = self._output

    def type(self, text: str) -> None:
        self._write(text)

    def wait_line(self, predicate: Callable[[str], bool], timeout: float = 20.0,
                  what: str = "line") -> str:
        """The first output line matching ``predicate`` (waiting up to ``timeout`` s)."""
        return self._wait(_first(predicate), timeout, lambda: (
            f"no {what} within {timeout:g}s; screen: {self.lines[-8:]}"))

    def quit(self, command: str = "/quit", timeout: float = 10.0) -> None:
        """Type ``command`` and wait for the process to end (killing it if it hangs)."""
        self._quit_with(command, timeout)
