"""A newcomer gets the application state through the communicator: real sockets, a real
server, traffic flowing while it joins."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from tests.helpers import wait_until


class Log:
    """An application whose state is the list of messages it was handed."""

    def __init__(self, provides: bool = True) -> None:
        self.entries: list[str] = []
        self.lock = threading.Lock()
        self.provides = provides
        self.installed = 0

    def on_message(self, message: Any) -> None:
        # the payload, not the id: under mfss and cykas each destination of a send gets
        # a copy with an id of its own
        with self.lock:
            self.entries.append(message.user_message)

    def provide(self) -> list[str]:
        if not self.provides:
            raise RuntimeError("this member keeps no state")
        with self.lock:
            return list(self.entries)

    def consume(self, state: list[str]) -> None:
        with self.lock:
            self.installed += 1
            self.entries[:0] = state


def _member(group: ProcessGroup, name: str, log: Log, module: str) -> Communicator:
    assert group.server is not None
    comm = Communicator(name, "s", server=group.server.address, key_file=str(group.key_file),
                        causality=module, state_provider=log.provide,
                        state_consumer=log.consume)
    comm.add_message_listener(log.on_message)
    return comm


@pytest.mark.parametrize("module", ["matrix", "vector", "mfss", "cykas"])
def test_a_newcomer_installs_the_state_and_then_sees_every_message_once(
    group: ProcessGroup, module: str
) -> None:
    logs = {name: Log() for name in ("alice", "bob", "carol")}
    comms: dict[str, Communicator] = {}
    try:
        for name in ("alice", "bob"):
            comms[name] = _member(group, name, logs[name], module)
        wait_until(lambda: len(comms["alice"].members) == 2, what="bob's join")
        stop = threading.Event()

        def talk(name: str) -> None:
            i = 0
            while not stop.is_set() and i < 400:
                comms[name].to_all(f"{name} {i}")
                i += 1
                time.sleep(0.002)

        talkers = [threading.Thread(target=talk, args=(n,)) for n in ("alice", "bob")]
        for thread in talkers:
            thread.start()
        wait_until(lambda: len(logs["alice"].entries) > 100, what="traffic")
        comms["carol"] = _member(group, "carol", logs["carol"], module)
        for thread in talkers:
            thread.join(30)
        total = 2 * 400
        wait_until(lambda: all(len(log.entries) >= total for log in logs.values()),
                   timeout=30, what="every message everywhere")
        assert logs["carol"].installed == 1
        for name in ("alice", "bob", "carol"):
            entries = logs[name].entries
            assert sorted(entries) == sorted(f"{n} {i}" for n in ("alice", "bob")
                                             for i in range(400)), name
        assert comms["carol"].counters()["state_installed"] == 1
    finally:
        for comm in comms.values():
            comm.close()


def test_a_member_without_state_sends_the_newcomer_to_the_next(group: ProcessGroup) -> None:
    logs = {"alice": Log(provides=False), "bob": Log(), "carol": Log()}
    comms: dict[str, Communicator] = {}
    try:
        for name in ("alice", "bob"):
            comms[name] = _member(group, name, logs[name], "matrix")
        wait_until(lambda: len(comms["alice"].members) == 2, what="bob's join")
        comms["alice"].to_all("before carol")
        wait_until(lambda: len(logs["bob"].entries) == 1, what="bob's delivery")
        comms["carol"] = _member(group, "carol", logs["carol"], "matrix")
        wait_until(lambda: logs["carol"].installed == 1, what="bob's snapshot")
        assert logs["carol"].entries == ["before carol"]
        comms["alice"].to_all("after carol")
        wait_until(lambda: len(logs["carol"].entries) == 2, what="alice's next message")
        assert comms["carol"].counters()["state_requests"] == 2
    finally:
        for comm in comms.values():
            comm.close()
