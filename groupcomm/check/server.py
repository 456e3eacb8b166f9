"""The session server inside the causality model: the real
:class:`~groupcomm.protocol.registry.SessionRegistry`, each distinct state of it kept once
and named by a small integer (what a model state holds), its transitions memoized (the
answer is a pure function of state and input, so a registry is copied only the first
time an input meets a state).
"""

from __future__ import annotations

from typing import Any

from groupcomm.check.plain_state import clone, freeze
from groupcomm.protocol.registry import Action, Input, Leave, SessionRegistry

__all__ = ["ServerTable", "registry_state"]

#: registry attributes that count what happened (or when it started), not who is a
#: member: states that differ only in them are the same server
_COUNTERS = frozenset({"relayed", "_probes", "started_at",
                       # commands arriving in parts: every frame of the model is under
                       # the frame limit, so none is ever being put back together
                       "parts"})


def registry_state(registry: SessionRegistry) -> Any:
    """A hashable image of ``registry``'s rules state (members in join order,
    incarnations given, parked frames, takeovers), without its counters."""
    return freeze({k: v for k, v in vars(registry).items() if k not in _COUNTERS})


def _input_key(event: Input) -> Any:
    """A hashable key for ``event`` (a leave's counts are a mapping)."""
    if isinstance(event, Leave):
        return (Leave, event.conn, event.client, event.application, event.session,
                event.now, tuple(sorted(event.direct_frames.items())), event.counts_valid)
    return event


class ServerTable:
    """Interned registry states and their memoized transitions."""

    def __init__(self, registry: SessionRegistry) -> None:
        #: id -> the registry in that state (never changed once here)
        self.registries: list[SessionRegistry] = []
        self._ids: dict[Any, int] = {}
        self._memo: dict[tuple[int, Any], tuple[int, tuple[Action, ...]]] = {}
        self.initial = self._intern(registry)

    def __len__(self) -> int:
        return len(self.registries)

    def _intern(self, registry: SessionRegistry) -> int:
        key = registry_state(registry)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.registries)
            self.registries.append(registry)
        return found

    def handle(self, server: int, event: Input) -> tuple[int, tuple[Action, ...]]:
        """The registry state after ``event`` in state ``server``, and its actions."""
        key = (server, _input_key(event))
        hit = self._memo.get(key)
        if hit is None:
            registry = clone(self.registries[server])
            actions = tuple(registry.handle(event))
            hit = self._memo[key] = (self._intern(registry), actions)
        return hit

    def members(self, server: int, application: str, session: str) -> list[str]:
        """The member ids of ``session`` in state ``server``, in join order."""
        return self.registries[server].members_of(application, session)

    def restore_tables(self, registries: list[SessionRegistry]) -> None:
        """Continue with a checkpoint's registries (ids are given in discovery order,
        which is deterministic, so they extend this fresh table's)."""
        self.registries = list(registries)
        self._ids = {registry_state(r): k for k, r in enumerate(self.registries)}
        self._memo.clear()
