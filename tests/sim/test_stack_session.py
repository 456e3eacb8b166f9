"""The simulator's processes join through the session protocol's own objects: the
registry decides the member lists and the order, each process's Membership processes
its notices."""

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
    session = sim.stack.session
    a, b, c = sim.names
    assert session.members() == sim.names
    assert _joins(sim, a) == [(a, [a]), (b, [a, b]), (c, [a, b, c])]
    assert _joins(sim, c) == [(c, [a, b, c])]
    assert all(m.phase == "joined" and list(m.current.values()) == sim.names
               for m in session.clients.values())


def test_other_modules_process_their_own_join_with_the_members_at_time_zero() -> None:
    sim = Simulation(SimConfig(protocol="cykas", processes=3, messages_per_process=1,
                               engine="real"), trace=True)
    everyone = sim.stack.session.members()
    assert everyone == sim.names
    for name in sim.names:
        assert _joins(sim, name) == [(name, everyone)]
        assert sim.stack.nodes[name].members == everyone
        assert sim.stack.session.clients[name].phase == "joined"
    assert sim.run().stuck == 0


def test_a_process_name_that_cannot_be_a_client_name_is_refused() -> None:
    workload = Workload(processes=["a", "b~2"], sends={"a": [], "b~2": []})
    with pytest.raises(SimulationError, match="'b~2' cannot join"):
        Simulation(SimConfig(protocol="mfss", engine="real"), workload)
