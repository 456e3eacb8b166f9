"""``none``: no causality. Messages are delivered in arrival order.

The baseline every other module is measured against, and the module the trace
analysis and the model checker must catch violating causality.
"""

from __future__ import annotations

from collections.abc import Hashable

from groupcomm.core.causality import (
    CausalityManager,
    CausalityModule,
    ModuleReceiveFilter,
    ModuleSendFilter,
)
from groupcomm.core.filtering import FilterHost
from groupcomm.core.messages import GroupMessage, ReceivedMessage, SentMessage


class NoneManager(CausalityManager):
    """Holds nothing; exists so every module has the same shape."""

    def held(self) -> list[GroupMessage]:
        return []

    def snapshot(self) -> Hashable:
        return ()

    def restore(self, snapshot: Hashable) -> None:
        return None


class NoneSendFilter(ModuleSendFilter):
    """Forwards application messages unchanged."""

    def on_user_message(self, message: SentMessage) -> None:
        self.forward(message)


class NoneReceiveFilter(ModuleReceiveFilter):
    """Delivers application messages as they arrive."""

    def on_user_message(self, message: ReceivedMessage) -> None:
        self.forward(message)


class NoneModule(CausalityModule):
    """No ordering at all (arrival order)."""

    name = "none"
    symmetry_headers = {}
    description = "no causal ordering: deliver in arrival order (baseline)"

    def create_manager(self, host: FilterHost) -> CausalityManager:
        return NoneManager(host)

    def create_send_filter(self, manager: CausalityManager) -> NoneSendFilter:
        return NoneSendFilter(manager)

    def create_receive_filter(self, manager: CausalityManager) -> NoneReceiveFilter:
        return NoneReceiveFilter(manager)
