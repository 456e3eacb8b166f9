"""The built-in plugin: the project's causality modules and extra filters, through the
same hooks and entry-point group as a third-party plugin (``builtin =
groupcomm.plugins.builtin`` in setup.cfg). A module file that does not import makes it
fail to load, and the registry reports it with its error.
"""

from __future__ import annotations

from typing import Any

from groupcomm.core.causality import CausalityModule
from groupcomm.core.hookspecs import hookimpl
from groupcomm.filters.cykas import CykasModule, CykasSecretSendsModule
from groupcomm.filters.fifo import FifoModule
from groupcomm.filters.ks import KsModule
from groupcomm.filters.matrix import MatrixModule
from groupcomm.filters.matrix_delta import MatrixDeltaModule
from groupcomm.filters.mfss import MfssModule
from groupcomm.filters.none import NoneModule
from groupcomm.filters.seed_schemes import LastSenderModule, ScalarIdModule
from groupcomm.filters.vector import VectorForgetsJoinsModule, VectorModule
from groupcomm.layers.faults import FAULT_FILTERS
from groupcomm.layers.reliable import RELIABLE_FILTER

BUILTIN_MODULES: tuple[type[CausalityModule], ...] = (
    NoneModule,
    FifoModule,
    VectorModule,
    MatrixModule,
    MatrixDeltaModule,
    KsModule,
    MfssModule,
    CykasModule,
    # known-bad protocols, kept for the model checker and the trace analysis to catch
    CykasSecretSendsModule,
    ScalarIdModule,
    LastSenderModule,
    VectorForgetsJoinsModule,
)


@hookimpl
def groupcomm_causality_modules() -> list[type[CausalityModule]]:
    return list(BUILTIN_MODULES)


@hookimpl
def groupcomm_filters() -> list[dict[str, Any]]:
    return [RELIABLE_FILTER, *FAULT_FILTERS]
