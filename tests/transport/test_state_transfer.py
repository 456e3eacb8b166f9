"""A newcomer gets the application state through the communicator: real sockets, a real
server, traffic flowing while it joins."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import StateTransfer
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
    comm = Communicator(
        name, "s", server=group.server.address, key_file=str(group.key_file),
        causality=module, state=StateTransfer(provider=log.provide, consumer=log.consume))
    comm.add_message_listener(log.on_message)
    return comm


@pytest.mark.parametrize("module", ["matrix", "vector", "ks", "mfss", "cykas"])
@pytest.mark.parametrize("quiet_join", [True, False], ids=["quiet-join", "join-in-traffic"])
def test_a_newcomer_installs_the_state_and_then_sees_every_message_once(
    group: ProcessGroup, module: str, quiet_join: bool
) -> None:
    """Traffic paused at the join, or flowing through it: either way the newcomer's log
    (snapshot, then deliveries) is exactly everyone's, nothing twice, nothing missing,
    including messages sent before the join and still on their way to the provider."""
    logs = {name: Log() for name in ("alice", "bob", "carol")}
    comms: dict[str, Communicator] = {}
    try:
        for name in ("alice", "bob"):
            comms[name] = _member(group, name, logs[name], module)
        wait_until(lambda: len(comms["alice"].members) == 2, what="bob's join")
        go = threading.Event()
        go.set()
        paused = {n: threading.Event() for n in ("alice", "bob")}
        sent = {n: 0 for n in ("alice", "bob")}
        after_join: list[str] = []

        def talk(name: str) -> None:
            for i in range(400):
                if not go.is_set():
                    paused[name].set()
                    go.wait(30)
                text = f"{name} {i}"
                seen = all(len(comms[n].members) == 3 for n in ("alice", "bob"))
                comms[name].to_all(text)
                sent[name] += 1
                if seen:
                    after_join.append(text)
                time.sleep(0.002)

        talkers = [threading.Thread(target=talk, args=(n,)) for n in ("alice", "bob")]
        for thread in talkers:
            thread.start()
        wait_until(lambda: len(logs["alice"].entries) > 100, what="traffic")
        if quiet_join:  # every message sent so far delivered everywhere, then the join
            go.clear()
            wait_until(lambda: all(e.is_set() for e in paused.values()), what="a pause")
            wait_until(lambda: all(len(logs[n].entries) == sum(sent.values())
                                   for n in ("alice", "bob")), what="a quiet session")
        comms["carol"] = _member(group, "carol", logs["carol"], module)
        wait_until(lambda: logs["carol"].installed == 1, what="the snapshot")
        go.set()
        for thread in talkers:
            thread.join(60)
        everything = sorted(f"{n} {i}" for n in ("alice", "bob") for i in range(400))
        wait_until(lambda: all(len(logs[n].entries) == 800 for n in ("alice", "bob")),
                   timeout=30, what="every message at alice and bob")
        wait_until(lambda: set(after_join) <= set(logs["carol"].entries), timeout=30,
                   what="every message sent after the join at carol")
        for name in ("alice", "bob"):
            assert sorted(logs[name].entries) == everything, name
        carol = logs["carol"].entries
        assert len(carol) == len(set(carol)), "a message reached carol twice"
        try:
            wait_until(lambda: len(logs["carol"].entries) == 800, timeout=30,
                       what="every message at carol")
        except AssertionError:
            missing = sorted(set(everything) - set(carol))
            raise AssertionError((missing, {n: comms[n].counters() for n in comms})) from None
        assert sorted(logs["carol"].entries) == everything
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
