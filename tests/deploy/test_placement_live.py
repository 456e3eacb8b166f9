"""Members given several servers (``Communicator(servers=...)``) meet at their session's
first server in rendezvous order; when it stops answering they move to the next, and
when it answers again (here: started again at its address) they come back together
(docs/deploy.md)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from groupcomm.protocol.placement import rendezvous_order
from groupcomm.tools.procs import ServerProcess
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection
from groupcomm.transport.keys import write_new_key


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[Path, list[ServerProcess]]]:
    key = tmp_path / "session.key"
    write_new_key(key)
    started: list[ServerProcess] = []
    try:
        for _ in range(2):
            started.append(ServerProcess(key, extra=["--heartbeat-timeout", "1.5"]))
        yield key, started
    finally:
        for server in started:
            if server.alive():
                server.process.send_signal(signal.SIGCONT)
            server.kill()


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.05)


def receive_all(member: Communicator, count: int, timeout: float = 20.0) -> list[object]:
    got: list[object] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = member.receive(timeout=0.2)
        if message is not None:
            got.append(message.user_message)
    return got


@pytest.mark.long
def test_members_move_off_a_silent_server_and_come_back_when_it_answers_again(two_servers):
    key, servers = two_servers
    addresses = [s.address for s in servers]
    order = rendezvous_order("lab", addresses)
    home = next(s for s in servers if s.address == order[0])
    options = dict(servers=list(reversed(addresses)), key_file=str(key),
                   connection=Connection(probe_every=1.0))
    members: list[Communicator] = []
    try:
        alice = Communicator("alice", "lab", **options)
        members.append(alice)
        bob = Communicator("bob", "lab", **options)
        members.append(bob)
        assert alice.server_address == bob.server_address == order[0]
        wait_until(lambda: len(alice.members) == 2, 10, "alice sees bob")
        alice.to_others("before")
        assert receive_all(bob, 1) == ["before"]
        home.process.send_signal(signal.SIGSTOP)  # silent, yet it accepts connections
        stopped = home
        wait_until(lambda: alice.server_address == bob.server_address == order[1], 20,
                   "both moved to the next server")
        wait_until(lambda: len(alice.members) == 2 and len(bob.members) == 2, 20,
                   "both joined there")
        alice.to_others("moved")
        assert receive_all(bob, 1) == ["moved"]
        # this one dies while stopped and is started again at its address (one that
        # resumes instead: tests/deploy/test_failover_stall.py)
        stopped.kill()
        servers.append(ServerProcess(key, bind=order[0], extra=["--heartbeat-timeout", "1.5"]))
        wait_until(lambda: alice.server_address == bob.server_address == order[0], 20,
                   "both back at the first server")
        wait_until(lambda: len(alice.members) == 2 and len(bob.members) == 2, 20,
                   "both joined it again")
        bob.to_others("home again")
        assert receive_all(alice, 1) == ["home again"]
        assert alice.counters()["server_moves"] == 2
    finally:
        for member in members:
            member.close()


@pytest.mark.long
def test_a_join_while_the_first_server_is_down_goes_to_the_next(two_servers):
    key, servers = two_servers
    addresses = [s.address for s in servers]
    order = rendezvous_order("lab", addresses)
    next(s for s in servers if s.address == order[0]).kill()
    with Communicator("carol", "lab", servers=addresses, key_file=str(key)) as carol:
        assert carol.server_address == order[1]
        assert carol.members == ["carol"]
