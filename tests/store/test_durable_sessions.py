"""Durable sessions through real communicators and a real ``groupcomm serve --store``
process: what a newcomer gets after every member left and after the server was killed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from groupcomm.core.session_messages import Snapshot
from groupcomm.protocol import session_events as events
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners, StateTransfer
from tests.helpers import wait_until


class Log:
    """An application whose state is the list of messages it was handed or sent (its
    own sends named in its snapshot, as a provider must)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.installed: list[Any] = []
        self.events: list[events.SessionEvent] = []
        self.comm: Communicator | None = None

    def on_message(self, message: Any) -> None:
        with self.lock:
            self.entries.append((message.app_message_id, message.user_message))

    def send(self, text: str) -> None:
        assert self.comm is not None
        with self.lock:
            sent = self.comm.to_others(text)
            self.entries.append((sent.message_id, text))

    def provide(self) -> Snapshot:
        with self.lock:
            return Snapshot(list(self.entries), reflects=tuple(i for i, _ in self.entries))

    def consume(self, state: list[tuple[str, str]]) -> None:
        with self.lock:
            self.installed.append(list(state))
            self.entries[:0] = [tuple(e) for e in state]

    @property
    def texts(self) -> list[str]:
        with self.lock:
            return [text for _, text in self.entries]


def _member(server: str, key: Path, name: str, log: Log) -> Communicator:
    comm = Communicator(name, "s", server=server, key_file=str(key),
                        state=StateTransfer(provider=log.provide, consumer=log.consume),
                        listeners=Listeners(message=log.on_message, event=log.events.append))
    log.comm = comm
    return comm


@pytest.fixture
def stored(tmp_path: Path) -> ProcessGroup:
    store = tmp_path / "sessions.db"
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(store),
            "--snapshot-every", "20", "--snapshot-seconds", "0.5"]) as group:
        yield group


def test_a_newcomer_after_everyone_left_and_the_server_was_killed_gets_everything(
        stored: ProcessGroup) -> None:
    assert stored.server is not None
    logs = {name: Log() for name in ("alice", "bob")}
    comms = {name: _member(stored.server.address, stored.key_file, name, logs[name])
             for name in logs}
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        for i in range(60):
            logs["alice" if i % 2 else "bob"].send(f"line {i}")
        wait_until(lambda: all(len(lg.entries) == 60 for lg in logs.values()),
                   what="every line everywhere")
    finally:
        for comm in comms.values():
            comm.close()
    expected = logs["alice"].texts
    assert sorted(expected) == sorted(logs["bob"].texts)
    stored.server.kill()  # SIGKILL
    stored.start_server()
    carol = Log()
    comm = _member(stored.server.address, stored.key_file, "carol", carol)
    try:
        wait_until(lambda: any(isinstance(e, events.StateInstalled) for e in carol.events),
                   what="the stored state")
        assert sorted(carol.texts) == sorted(expected)
        assert len(carol.entries) == len({i for i, _ in carol.entries}) == 60
        [installed] = [e for e in carol.events if isinstance(e, events.StateInstalled)]
        assert installed.source == "store"
    finally:
        comm.close()
