"""``none``: no causality, arrival order: the baseline every other module is measured
against, and the module the trace analysis and the model checker must catch."""

from __future__ import annotations

from collections.abc import Hashable

from groupcomm.module_kit import CausalityManager, CausalityModule, GroupMessage


class NoneManager(CausalityManager):
    """Holds nothing: messages pass on unchanged both ways (the base hooks)."""

    def held(self) -> list[GroupMessage]:
        return []

    def snapshot(self) -> Hashable:
        return ()

    def restore(self, snapshot: Hashable) -> None:
        return None


class NoneModule(CausalityModule):
    name = "none"
    manager_class = NoneManager
    description = "no causal ordering: deliver in arrival order (baseline)"
    delivery_order = "arrival"
    symmetry_headers = {}
