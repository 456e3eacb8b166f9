"""Discrete-event simulation of the causality modules (Cykas paper, 004 §5).

Whole clients (the real client protocol, filters and managers) run in virtual time
behind per-process NICs of limited bandwidth, links with propagation delay, and
applications that run long jobs:
:mod:`~groupcomm.sim.engine` (the engine), :mod:`~groupcomm.sim.workload` (what the
processes send), :mod:`~groupcomm.sim.matrix_model` (a vectorised model of the matrix
protocol for large runs, cross-checked against the real module),
:mod:`~groupcomm.sim.figures` (the paper's Figures 4-6) and
:mod:`~groupcomm.cli.simulate` (``groupcomm simulate``).
"""

from groupcomm.sim.engine import SimConfig, SimResult, Simulation, SimulationError, simulate
from groupcomm.sim.workload import (
    PlannedSend,
    Workload,
    WorkloadError,
    load_script,
    random_workload,
    script_from_dict,
)

__all__ = [
    "PlannedSend",
    "SimConfig",
    "SimResult",
    "Simulation",
    "SimulationError",
    "Workload",
    "WorkloadError",
    "load_script",
    "random_workload",
    "script_from_dict",
    "simulate",
]
