"""Across hosts: each client in its own network namespace with its own address.

The test builds the network itself — a bridge in the root namespace holding the server's
address and one veth pair per client namespace — and removes all of it afterwards. The
clients can reach each other only through their own addresses on the bridge, so a
client that advertised 127.0.0.1 (or bound only to loopback) would be unreachable: the
meeting scenario completing in causal order over direct routing shows that binding and
advertising addresses work across machines. Skipped, with the reason, where network
namespaces cannot be made (not root, no ``ip``, no bridge support).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from groupcomm.core.oracle import check_records
from groupcomm.tools.procs import ProcessGroup
from tests.helpers import read_traces

NAMES = ["alice", "bob", "carol"]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)


def _why_no_namespaces() -> str | None:
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"gcprobe{os.getpid()}"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    bridge = f"gcpb{os.getpid() % 100000}"
    made = _ip("link", "add", bridge, "type", "bridge")
    if made.returncode != 0:
        return f"cannot create a bridge: {made.stderr.strip()}"
    _ip("link", "del", bridge)
    return None


@dataclass
class Lan:
    """A bridge at ``server_host`` and one namespace per client name with its address."""

    server_host: str
    hosts: dict[str, str]
    namespaces: dict[str, str]

    def wrapper(self, name: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[name]]


@pytest.fixture
def lan() -> Iterator[Lan]:
    reason = _why_no_namespaces()
    if reason:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:6]
    subnet = 200 + int(tag, 16) % 50  # 10.231.200-249.0/24: unlikely to clash
    bridge = f"gcbr{tag}"
    namespaces = {name: f"gc{tag}{name}" for name in NAMES}
    hosts = {name: f"10.231.{subnet}.{i + 2}" for i, name in enumerate(NAMES)}
    server_host = f"10.231.{subnet}.1"
    commands: list[list[str]] = [
        ["link", "add", bridge, "type", "bridge"],
        ["addr", "add", f"{server_host}/24", "dev", bridge],
        ["link", "set", bridge, "up"],
    ]
    for i, name in enumerate(NAMES):
        ns, outer = namespaces[name], f"gcv{tag}{i}"
        commands += [
            ["netns", "add", ns],
            ["link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns],
            ["link", "set", outer, "master", bridge],
            ["link", "set", outer, "up"],
            ["-n", ns, "addr", "add", f"{hosts[name]}/24", "dev", "eth0"],
            ["-n", ns, "link", "set", "eth0", "up"],
            ["-n", ns, "link", "set", "lo", "up"],
        ]
    try:
        for command in commands:
            done = _ip(*command)
            if done.returncode != 0:
                pytest.skip(f"cannot build the test network (ip {' '.join(command)}): "
                            f"{done.stderr.strip()}")
        yield Lan(server_host, hosts, namespaces)
    finally:
        for ns in namespaces.values():
            _ip("netns", "del", ns)  # deletes the veth pair with it
        _ip("link", "del", bridge)



@pytest.mark.parametrize("direct", [False, True], ids=["relayed", "direct"])
def test_meeting_across_network_namespaces(lan: Lan, tmp_path: Path, direct: bool) -> None:
    traces = tmp_path / "traces"
    with ProcessGroup(tmp_path, server_bind=f"tcp://{lan.server_host}:0") as group:
        assert group.server is not None and lan.server_host in group.server.address
        for name in NAMES:
            ready = group.start_peer(
                name, causality="matrix", direct=direct, trace_dir=str(traces),
                wrapper=lan.wrapper(name), extra=["--bind-host", lan.hosts[name]],
            ).wait_for(lambda e: e.get("event") == "ready", what="ready")
            if direct:  # others reach it at its own address, not at loopback
                assert ready["address"].startswith(f"tcp://{lan.hosts[name]}:")
        group.wait_members(NAMES)
        alice, bob, carol = (group.peers[n] for n in NAMES)
        alice.command(op="delay", peer="carol", ms=600)
        alice.command(op="send", to=["carol"], payload="Let's meet at 3pm", label="m1")
        alice.command(op="send", to=["bob"], payload="Please join the meeting", label="m2")
        bob.wait_for(lambda e: e.get("label") == "m2", what="m2 at bob")
        bob.command(op="send", to=["carol"], payload="What is it about?", label="m3")
        assert [e["label"] for e in carol.wait_count("deliver", 2)] == ["m1", "m3"]
        for peer in group.peers.values():
            peer.quit()
    verdict = check_records(read_traces(traces))
    assert verdict.ok, verdict
