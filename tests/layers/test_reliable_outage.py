"""The reliable layer through a session server's outage, on a real server process:
what a member sends while the server is down waits in its client and arrives once the
server is back; meanwhile the layer resends only a probe a timeout, not every waiting
frame, so the peer gets a handful of duplicates, not one per frame per timeout."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from groupcomm.layers.reliable import MAX_RTO
from groupcomm.tools.procs import ProcessGroup
from groupcomm.tools.store_crash import Log, Probe, _member, _wait

MESSAGES = 200
OUTAGE = 6.0


@pytest.mark.long
def test_an_outage_costs_a_probe_a_timeout_not_every_frame(tmp_path: Path) -> None:
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    with ProcessGroup(tmp_path / "run", server_bind=f"tcp://127.0.0.1:{port}",
                      server_extra=["--heartbeat-timeout", "1.5"]) as group:
        logs = {name: Log() for name in ("alice", "bob")}
        probes = {name: Probe() for name in logs}
        comms = {name: _member(group, name, logs[name], probes[name]) for name in logs}
        try:
            _wait(lambda: all(len(c.members) == 2 for c in comms.values()), 20, "joins")
            _wait(lambda: all(log.settled() for log in logs.values()), 20, "states")
            assert group.server is not None
            group.server.kill()
            sent = []
            for _ in range(MESSAGES):
                sent.append(logs["alice"].send())
                time.sleep(0.005)
            time.sleep(OUTAGE)
            group.start_server()
            _wait(lambda: set(sent) <= set(logs["bob"].entries), 60, "every message at bob")
            time.sleep(2 * MAX_RTO)  # nothing more may come
            layers = {name: probes[name].host.shared["reliable"] for name in logs}
            assert logs["bob"].received == sent  # each once, in order
            alice, bob = layers["alice"].stats, layers["bob"].stats
            print(alice, bob)
            # a probe each timeout of the backoff (0.5, 1, 2, 3, 3, ... s), none per frame
            assert alice["retransmissions"] == alice["probes"] <= OUTAGE + 4
            assert bob["duplicates_dropped"] <= alice["retransmissions"]
            assert not layers["alice"].held()
        finally:
            for comm in comms.values():
                comm.close()
