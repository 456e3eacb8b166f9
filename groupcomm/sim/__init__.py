"""Discrete-event simulation of the causality modules (Cykas paper, 004 §5): whole clients
in virtual time (:mod:`~groupcomm.sim.engine`), their workloads, a vectorised model of
the matrix protocol for large runs and the paper's figures (``groupcomm simulate``; the
model: docs/sim_results.md).
"""

from groupcomm.sim.engine import SimConfig, Simulation, SimulationError, simulate
from groupcomm.sim.workload import script_from_dict

__all__ = ["SimConfig", "Simulation", "SimulationError", "script_from_dict", "simulate"]
