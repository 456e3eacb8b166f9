"""The simulator's processes are client protocol objects that join through the session
server's side: the registry decides the member lists and the order, each process's
protocol processes its notices (signed session frames) and takes the messages that
arrive."""

from __future__ import annotations

import pytest

from groupcomm.sim import SimConfig, Simulation, SimulationError
from groupcomm.sim.workload import Workload


def _joins(sim: Simulation, process: str) -> list[tuple[str, list[str]]]:
    return [(r["client"], r["members"]) for r in sim.tracer.records
            if r["event"] == "join" and r["process"] == process]


def test_vector_processes_hear_every_join_from_the_registry() -> None:
    sim = Simulation(SimConfig(protocol="vector", processes=3, messages_per_process=1,
                               broadcast=True, engine="real"), trace=True)
    stack = sim.stack
    a, b, c = sim.names
    assert stack.server.members() == sim.names
    assert _joins(sim, a) == [(a, [a]), (b, [a, b]), (c, [a, b, c])]
    assert _joins(sim, c) == [(c, [a, b, c])]
    assert all(m.protocol.membership.phase == "joined"
               and list(m.protocol.membership.current.values()) == sim.names
               for m in stack.members.values())


def test_other_modules_process_their_own_join_with_the_members_at_time_zero() -> None:
    sim = Simulation(SimConfig(protocol="cykas", processes=3, messages_per_process=1,
                               engine="real"), trace=True)
    everyone = sim.stack.server.members()
    assert everyone == sim.names
    for name in sim.names:
        assert _joins(sim, name) == [(name, everyone)]
        assert sim.stack.nodes[name].members == everyone
        assert sim.stack.members[name].protocol.membership.phase == "joined"
    result = sim.run()
    assert result.stuck == 0 and result.deliveries == 3  # one unicast each
    # the receiving clients took every message (and ACK) as a frame's: nothing refused
    received = 0
    for member in sim.stack.members.values():
        counters = member.protocol.counters()
        assert not [k for k in counters if k.startswith("rejected_")], counters
        received += counters["messages_received"]
    assert received == 6  # three messages and their ACKs


def test_a_process_name_that_cannot_be_a_client_name_is_refused() -> None:
    workload = Workload(processes=["a", "b~2"], sends={"a": [], "b~2": []})
    with pytest.raises(SimulationError, match="'b~2' cannot join"):
        Simulation(SimConfig(protocol="mfss", engine="real"), workload)
