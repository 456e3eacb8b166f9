"""The built-in causality modules, registered through the same hooks as third parties."""

from __future__ import annotations

import importlib
from typing import Any

from plugins.hookspecs import hookimpl

#: name -> "module:Class"; imported lazily so a broken module names itself clearly.
BUILTIN_MODULES = {
    "none": "filters.none:NoneModule",
    "fifo": "filters.fifo:FifoModule",
    "vector": "filters.vector:VectorModule",
    "matrix": "filters.matrix:MatrixModule",
    "matrix-delta": "filters.matrix_delta:MatrixDeltaModule",
    "mfss": "filters.mfss:MfssModule",
    "cykas": "filters.cykas:CykasModule",
    # known-bad protocols, kept for the model checker and the trace analysis to catch
    "cykas-secret-sends": "filters.cykas:CykasSecretSendsModule",
    "scalar-id": "filters.scalar_id:ScalarIdModule",
    "last-sender": "filters.last_sender:LastSenderModule",
    "vector-forgets-joins": "filters.vector_forgets_joins:VectorForgetsJoinsModule",
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
