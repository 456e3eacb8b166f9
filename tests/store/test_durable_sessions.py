"""Durable sessions through real communicators and a real ``groupcomm serve --store``
process: what a newcomer gets after every member left and after the server was killed."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
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

    def on_event(self, event: events.SessionEvent) -> None:
        self.events.append(event)
        if isinstance(event, events.StoreGenerationChanged):
            # this state is of another generation: start over from the transfer that
            # follows (an editor would apply its unsent edits again afterwards)
            with self.lock:
                self.entries.clear()

    @property
    def texts(self) -> list[str]:
        with self.lock:
            return [text for _, text in self.entries]


def _member(server: str, key: Path, name: str, log: Log,
            causality: str = "matrix") -> Communicator:
    comm = Communicator(name, "s", server=server, key_file=str(key), causality=causality,
                        state=StateTransfer(provider=log.provide, consumer=log.consume),
                        listeners=Listeners(message=log.on_message, event=log.on_event))
    log.comm = comm
    return comm


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[ProcessGroup]:
    store = tmp_path / "sessions.db"
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "1.5", "--store", str(store),
            "--snapshot-every", "20", "--snapshot-seconds", "0.5"]) as group:
        yield group


@pytest.mark.parametrize("module", ["matrix", "cykas"])
def test_a_newcomer_after_everyone_left_and_the_server_was_killed_gets_everything(
        stored: ProcessGroup, module: str) -> None:
    """Under cykas, a send to the two others is split into unicasts, kept once."""
    assert stored.server is not None
    names = ("alice", "bob", "dan")
    logs = {name: Log() for name in names}
    comms = {name: _member(stored.server.address, stored.key_file, name, logs[name], module)
             for name in names}
    try:
        wait_until(lambda: all(len(c.members) == 3 for c in comms.values()), what="joins")
        settled(comms)
        for i in range(60):
            logs[names[i % 3]].send(f"line {i}")
        try:
            wait_until(lambda: all(len(lg.entries) == 60 for lg in logs.values()),
                       what="every line everywhere")
        except AssertionError as error:
            raise AssertionError(f"{error}: {_progress(logs, comms)}") from None
    finally:
        for comm in comms.values():
            comm.close()
    expected = logs["alice"].texts
    assert sorted(expected) == sorted(logs["bob"].texts)
    stored.server.kill()  # SIGKILL
    stored.start_server()
    carol = Log()
    comm = _member(stored.server.address, stored.key_file, "carol", carol, module)
    try:
        wait_until(lambda: any(isinstance(e, events.StateInstalled) for e in carol.events),
                   what="the stored state")
        assert sorted(carol.texts) == sorted(expected)
        assert len(carol.entries) == len({i for i, _ in carol.entries}) == 60
        [installed] = [e for e in carol.events if isinstance(e, events.StateInstalled)]
        assert installed.source == "store"
    finally:
        comm.close()


def settled(comms: dict[str, Communicator]) -> None:
    """Wait until every member's state transfer is over: a line sent before would be in
    the snapshot it installs as well (Log prepends it), as an app that edits before
    ``wait_for_state`` loses or doubles its edit."""
    wait_until(lambda: all(c.wait_for_state(0) for c in comms.values()),
               what="every state transfer")


def _progress(logs: dict[str, Log], comms: dict[str, Communicator]) -> str:
    """What each member has and the counters that say why a message is missing."""
    keys = ("reincarnations", "undeliverable_frames", "lost_on_reincarnation",
            "frames_resent", "server_silent", "rejoins")
    return "; ".join(
        f"{name}: {len(logs[name].entries)} entries, members {comm.members}, "
        + ", ".join(f"{k}={v}" for k, v in comm.counters().items()
                    if k in keys or "gone" in k or "reject" in k)
        for name, comm in comms.items())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_member_back_to_another_store_generation_gets_a_fresh_state_and_an_event(
        tmp_path: Path) -> None:
    """The store is replaced while alice is away (the server restarts on another file,
    whose session carol and dave filled): alice's state is not merged; she is told
    (StoreGenerationChanged) and gets the new store's state instead."""
    first, second = str(tmp_path / "first.db"), str(tmp_path / "second.db")
    extra = ["--heartbeat-timeout", "1.5", "--snapshot-every", "5",
             "--snapshot-seconds", "0.3"]
    port = _free_port()
    # the second store: carol and dave talk in the session, then leave
    with ProcessGroup(tmp_path / "other", server_extra=[*extra, "--store", second]) as other:
        assert other.server is not None
        logs = {n: Log() for n in ("carol", "dave")}
        comms = {n: _member(other.server.address, other.key_file, n, logs[n]) for n in logs}
        try:
            wait_until(lambda: all(len(c.members) == 2 for c in comms.values()))
            settled(comms)
            logs["carol"].send("from the other store")
            wait_until(lambda: len(logs["dave"].entries) == 1, what="dave's line")
        finally:
            for comm in comms.values():
                comm.close()
    key = tmp_path / "other" / "session.key"
    with ProcessGroup(tmp_path / "run", server_bind=f"tcp://127.0.0.1:{port}",
                      server_extra=[*extra, "--store", first]) as group:
        group.key_file.write_bytes(key.read_bytes())  # the same key for both servers
        group.stop_server()
        group.start_server()
        assert group.server is not None
        alice, bob = Log(), Log()
        comms = {"alice": _member(group.server.address, group.key_file, "alice", alice),
                 "bob": _member(group.server.address, group.key_file, "bob", bob)}
        try:
            wait_until(lambda: all(len(c.members) == 2 for c in comms.values()))
            alice.send("alice's line")
            wait_until(lambda: len(bob.entries) == 1, what="bob's copy")
            comms.pop("bob").close()
            group.stop_server()
            group.server_extra = [*extra, "--store", second]
            group.start_server()
            wait_until(lambda: any(isinstance(e, events.StoreGenerationChanged)
                                   for e in alice.events), what="the generation change")
            wait_until(lambda: alice.texts == ["from the other store"],
                       what="the other store's state at alice")
            [changed] = [e for e in alice.events
                         if isinstance(e, events.StoreGenerationChanged)]
            assert changed.previous and changed.generation != changed.previous
        finally:
            for comm in comms.values():
                comm.close()


def test_the_stored_messages_stay_bounded_and_a_newcomer_is_exact_with_snapshots_in_traffic(
        stored: ProcessGroup, tmp_path: Path) -> None:
    """Two members type fast while the store asks for a snapshot every 20 messages: the
    store never holds many messages, and a newcomer after everyone left has every
    message exactly once."""
    assert stored.server is not None
    logs = {name: Log() for name in ("alice", "bob")}
    comms = {name: _member(stored.server.address, stored.key_file, name, logs[name])
             for name in logs}
    store = tmp_path / "sessions.db"
    counts: list[int] = []
    total = 2000
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()), what="joins")
        settled(comms)

        def type_(name: str) -> None:
            for i in range(total // 2):
                logs[name].send(f"{name} {i}")
                time.sleep(0.002)  # some 400 keys a second from the two

        typists = [threading.Thread(target=type_, args=(n,)) for n in logs]
        for thread in typists:
            thread.start()
        reader = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        while any(t.is_alive() for t in typists) or any(
                len(lg.entries) < total for lg in logs.values()):
            counts.append(reader.execute("SELECT count(*) FROM messages").fetchone()[0])
            time.sleep(0.01)
            if len(counts) > 6000:
                break
        reader.close()
        for thread in typists:
            thread.join(30)
        wait_until(lambda: all(len(lg.entries) == total for lg in logs.values()),
                   what="every message everywhere")
    finally:
        for comm in comms.values():
            comm.close()
    print(f"stored messages: at most {max(counts)} of {total} sent ({len(counts)} samples)")
    assert max(counts) < total / 10, counts
    carol = Log()
    comm = _member(stored.server.address, stored.key_file, "carol", carol)
    try:
        wait_until(lambda: comm.counters().get("state_installed") == 1, what="the state")
        assert len(carol.entries) == total
        assert sorted(carol.texts) == sorted(logs["alice"].texts) == sorted(logs["bob"].texts)
    finally:
        comm.close()
