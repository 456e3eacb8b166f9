"""Starting, driving and reaping real processes (server and peers) on this machine.

Used by the integration tests, the demonstration and the stress command. Everything
waits for observable events with deadlines (never a bare sleep), and a
:class:`ProcessGroup` kills whatever it started when it exits, also on errors and
Ctrl-C.
"""

from __future__ import annotations

import json
import os
import queue
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
    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str] | None) -> None:
        self.name = name
        self.argv = list(argv)
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, **(env or {})},
        )
        self.stderr_lines: list[str] = []
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

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


class ServerProcess(_Child):
    """``groupcomm serve`` in a child process."""

    def __init__(self, key_file: Path, bind: str = "tcp://127.0.0.1:0",
                 extra: Sequence[str] = (), timeout: float = 20.0) -> None:
        super().__init__(
            "server",
            [sys.executable, "-m", "groupcomm.cli.serve", "--bind", bind,
             "--key-file", str(key_file), *extra],
            None,
        )
        self.address = ""
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in self.process.stdout],  # type: ignore[union-attr]
                         daemon=True).start()
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                if not self.alive():
                    break
                continue
            if line.startswith("listening on "):
                self.address = line.split("listening on ", 1)[1].strip()
                return
        self.kill()
        raise ProcessError(f"server did not start: {self.stderr_tail()}")


class PeerProcess(_Child):
    """``python -m groupcomm.tools.peer`` in a child process, with its events collected."""

    def __init__(self, name: str, server: str, key_file: Path, *, session: str = "s",
                 causality: str | None = None, direct: bool = False,
                 trace_dir: str | None = None, filters: Sequence[str] = (),
                 extra: Sequence[str] = (), wrapper: Sequence[str] = ()) -> None:
        # wrapper: a command the peer runs under, e.g. ``ip netns exec NS``
        argv = [*wrapper, sys.executable, "-m", "groupcomm.tools.peer", "--name", name, "--server", server,
                "--key-file", str(key_file), "--session", session]
        for spec in filters:
            argv += ["--filter", spec]
        if causality:
            argv += ["--causality", causality]
        if direct:
            argv.append("--direct")
        if trace_dir:
            argv += ["--trace-dir", trace_dir]
        super().__init__(name, [*argv, *extra], None)
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "garbage", "line": line}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def command(self, **command: Any) -> None:
        """Send one JSON command to the peer."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise ProcessError(f"{self.name} is gone: {error}; {self.stderr_tail()}") from None

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20.0,
                 what: str = "event") -> dict[str, Any]:
        """The first event matching ``predicate`` (waiting up to ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (not self.alive() and not self._pending_output()):
                    raise ProcessError(
                        f"{self.name}: no {what} within {timeout:g}s; events: "
                        f"{self.events[-8:]}; stderr: {self.stderr_tail()}"
                    )
                self._cond.wait(min(remaining, 0.2))

    def _pending_output(self) -> bool:
        return False

    def wait_count(self, event: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until ``count`` events of type ``event`` have arrived; return them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if e.get("event") == event]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.alive():
                    raise ProcessError(
                        f"{self.name}: {len(found)}/{count} {event} events within "
                        f"{timeout:g}s; stderr: {self.stderr_tail()}"
                    )
                self._cond.wait(min(remaining, 0.2))

    def deliveries(self) -> list[dict[str, Any]]:
        """Deliver events so far."""
        with self._cond:
            return [e for e in self.events if e.get("event") == "deliver"]

    def quit(self, timeout: float = 10.0) -> None:
        """Leave cleanly (``quit`` command), killing the process if it hangs."""
        if self.alive():
            try:
                self.command(op="quit")
                self.process.wait(timeout)
            except (ProcessError, subprocess.TimeoutExpired):
                self.kill()


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
        peer.wait_for(lambda e: e.get("event") in ("ready", "bye"), what="ready")
        if not any(e.get("event") == "ready" for e in peer.events):
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
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def type(self, text: str) -> None:
        """Type one line."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(text + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise ProcessError(f"{self.name} is gone: {error}; {self.stderr_tail()}") from None

    def wait_line(self, predicate: Callable[[str], bool], timeout: float = 20.0,
                  what: str = "line") -> str:
        """The first output line matching ``predicate`` (waiting up to ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.alive():
                    raise ProcessError(
                        f"{self.name}: no {what} within {timeout:g}s; screen: "
                        f"{self.lines[-8:]}; stderr: {self.stderr_tail()}"
                    )
                self._cond.wait(min(remaining, 0.2))

    def quit(self, command: str = "/quit", timeout: float = 10.0) -> None:
        """Type ``command`` and wait for the process to end (killing it if it hangs)."""
        if self.alive():
            try:
                self.type(command)
                self.process.wait(timeout)
            except (ProcessError, subprocess.TimeoutExpired):
                self.kill()
