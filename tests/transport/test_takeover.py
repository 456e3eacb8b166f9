"""Restarting a crashed client at once under its name, and a server restarted with
another key: real server and peer processes on 127.0.0.1."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from groupcomm.tools.procs import PeerProcess, ProcessError, ProcessGroup, ServerProcess
from groupcomm.transport.keys import write_new_key
from tests.helpers import wait_until

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long

#: long enough that only the takeover, not the heartbeat timeout, can explain a rejoin
SLOW_TIMEOUT = ["--heartbeat-timeout", "60"]


def test_a_client_restarted_at_once_after_a_crash_takes_over_its_name(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run", server_extra=SLOW_TIMEOUT) as group:
        group.start_peer("alice", causality="matrix")
        group.start_peer("bob", causality="matrix")
        group.wait_members(["alice", "bob"])
        group.peers["bob"].kill()  # SIGKILL: no leave, heartbeats just stop
        # within the join's own deadline, far inside the 60 s heartbeat timeout
        bob = group.start_peer("bob", causality="matrix")
        alice = group.peers["alice"]
        left = alice.wait_for(lambda e: e.get("event") == "left", what="bob left")
        assert left["client"] == "bob"
        joined = alice.wait_for(lambda e: e.get("event") == "joined"
                                and e.get("client") == "bob~2", what="bob~2 joined")
        assert joined["all_users"] == ["alice", "bob~2"]
        alice.command(op="send", to=["bob"], payload="welcome back", label="m")
        assert bob.wait_for(lambda e: e.get("event") == "deliver")["label"] == "m"


def test_a_running_client_keeps_its_name_and_the_second_is_told_why(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run", server_extra=SLOW_TIMEOUT) as group:
        group.start_peer("alice")
        with pytest.raises(ProcessError):
            group.start_peer("alice")
        second = group.peers["alice"]
        assert any("duplicate_name" in line and "is running" in line
                   for line in second.stderr_lines), second.stderr_tail()


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
def test_a_frozen_holder_loses_its_name_and_comes_back_as_a_new_member(
        tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run", server_extra=SLOW_TIMEOUT) as group:
        frozen = group.start_peer("alice")
        os.kill(frozen.process.pid, signal.SIGSTOP)
        try:
            group.start_peer("alice")  # the frozen one cannot answer the probe
        finally:
            os.kill(frozen.process.pid, signal.SIGCONT)
        # resumed, the old one finds its name taken by its successor and stops trying
        _wait_stderr(frozen, "this client was replaced by alice~2")
        successor = group.peers["alice"]
        successor.command(op="members")
        members = successor.wait_for(lambda e: e.get("event") == "members")
        assert members["members"] == ["alice~2"]
        assert sum("replaced by" in line for line in frozen.stderr_lines) == 1
        frozen.quit()


def test_a_server_restarted_with_another_key_is_named_as_such_once(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run") as group:
        alice = group.start_peer("alice")
        assert group.server is not None
        address = group.server.address
        group.stop_server()
        other_key = tmp_path / "other.key"
        write_new_key(other_key)
        server = ServerProcess(other_key, bind=address)
        try:
            mismatch = "not with this client's session key"
            _wait_stderr(alice, mismatch)
            # it keeps trying; a client started with the right key for this server works
            newcomer = PeerProcess("carol", address, other_key)
            try:
                newcomer.wait_for(lambda e: e.get("event") == "ready", what="carol ready")
            finally:
                newcomer.quit()
            said = next(i for i, line in enumerate(alice.stderr_lines) if mismatch in line)
            assert sum(mismatch in line for line in alice.stderr_lines) == 1
            # once the key is named, silence is not reported as an outage on top of it
            assert not any("no answer from the session server" in line
                           for line in alice.stderr_lines[said:])
        finally:
            server.terminate()
        group.start_server()  # the old key again: alice gets back in
        _wait_stderr(alice, "accepts this client's key again")


def test_a_client_with_the_wrong_key_is_told_at_once(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run") as group:
        wrong = tmp_path / "wrong.key"
        write_new_key(wrong)
        assert group.server is not None
        peer = PeerProcess("mallory", group.server.address, wrong)
        try:
            peer.process.wait(20)
            assert any("another session key" in line for line in peer.stderr_lines), (
                peer.stderr_tail())
        finally:
            peer.kill()


def _wait_stderr(peer: PeerProcess, text: str, timeout: float = 20.0) -> None:
    wait_until(lambda: any(text in line for line in peer.stderr_lines), timeout,
               what=f"{peer.name} saying {text!r}")
