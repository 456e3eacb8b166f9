"""The built-in causality modules, registered through the same hooks as third parties."""

from __future__ import annotations

import importlib
from typing import Any

from groupcomm.plugins.hookspecs import hookimpl

#: name -> "module:Class"; imported lazily so a broken module names itself clearly.
BUILTIN_MODULES = {
    "none": "groupcomm.filters.none:NoneModule",
    "fifo": "groupcomm.filters.fifo:FifoModule",
    "vector": "groupcomm.filters.vector:VectorModule",
    "matrix": "groupcomm.filters.matrix:MatrixModule",
    "matrix-delta": "groupcomm.filters.matrix_delta:MatrixDeltaModule",
    "ks": "groupcomm.filters.ks:KsModule",
    "mfss": "groupcomm.filters.mfss:MfssModule",
    "cykas": "groupcomm.filters.cykas:CykasModule",
    # known-bad protocols, kept for the model checker and the trace analysis to catch
    "cykas-secret-sends": "groupcomm.filters.cykas:CykasSecretSendsModule",
    "scalar-id": "groupcomm.filters.scalar_id:ScalarIdModule",
    "last-sender": "groupcomm.filters.last_sender:LastSenderModule",
    "vector-forgets-joins": "groupcomm.filters.vector_forgets_joins:VectorForgetsJoinsModule",
}


def _load(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


@hookimpl
def groupcomm_causality_modules() -> list[type[Any]]:
    found = []
    for spec in BUILTIN_MODULES.values():
        try:
            found.append(_load(spec))
        except (ImportError, AttributeError):
            continue  # not written yet in this checkout
    return found


@hookimpl
def groupcomm_filters() -> list[dict[str, Any]]:
    from groupcomm.layers.faults import FAULT_FILTERS
    from groupcomm.layers.reliable import RELIABLE_FILTER

    return [RELIABLE_FILTER, *FAULT_FILTERS]
