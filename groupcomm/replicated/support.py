"""Which causality modules the replicated types can rely on."""

from __future__ import annotations

from groupcomm.core.causality import CausalityModule
from groupcomm.core.registry import available_modules, get_module

#: modules that give no causal order between different senders
UNORDERED = {"none": "it gives no delivery order at all",
             "fifo": "it orders each sender's messages, not causally related messages of "
                     "different senders"}


def unsupported_reason(module: str | CausalityModule) -> str | None:
    """Why replicas of an operation-based type may diverge over ``module`` (``None``
    when the module delivers every multicast operation in causal order)."""
    found = get_module(module) if isinstance(module, str) else module
    if found.name in UNORDERED:
        return f"{found.name}: {UNORDERED[found.name]}; replicas may diverge"
    if found.unicast_events:
        return (f"{found.name}: a multicast is sent as one unicast per destination, each "
                "ordered on its own, so an operation can be delivered before a member's "
                "copy of one it depends on; replicas may diverge")
    if found.known_bad:
        return f"{found.name}: a known-bad module (it violates causal order)"
    return None


def supported_modules() -> list[str]:
    """The installed modules without an :func:`unsupported_reason`."""
    return [name for name in available_modules() if unsupported_reason(name) is None]
