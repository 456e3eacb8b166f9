"""Values shared by the model, its reductions and its reports: the exception a broken
property raises on a transition, the exact form of a snapshot (messages with their
ground-truth clocks), and how a transition is named in a counterexample."""

from __future__ import annotations

from typing import Any

from groupcomm.core.messages import GroupMessage


class Violation(Exception):
    """A property failed on a transition (internal: carries the property and why)."""

    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop
        self.detail = detail
        #: the transition that broke the property (set by :meth:`Model.expand`)
        self.action: tuple | None = None
        #: causal / fifo: (process, sender, index) of the message delivered too late
        self.missing: tuple[int, int, int] | None = None


def exact(value: Any) -> Any:
    """``value`` with every message replaced by what it carries *including* its
    ground-truth clock (messages compare without it: :meth:`GroupMessage.freeze`); a
    tuple with no message inside is returned as it is, not copied."""
    if isinstance(value, tuple):
        for position, v in enumerate(value):
            if type(v) not in _ATOMIC:
                changed = exact(v)
                if changed is not v:
                    return value[:position] + (changed,) + tuple(
                        [exact(w) for w in value[position + 1:]])
        return value  # no message inside (the common case: clocks, matrices, counters)
    if isinstance(value, GroupMessage):
        return (value.freeze(), value.vc)
    return value


#: values :func:`exact` leaves as they are
_ATOMIC = frozenset({int, str, bytes, float, bool, type(None)})
#: atoms :class:`ValuePool` may share: equal values of these types are the same value
#: (unlike ``True == 1 == 1.0``, which would turn a flag into a count if pooled by value)
_POOLED_ATOMS = frozenset({int, str, bytes, type(None)})


class ValuePool:
    """One shared copy of each equal immutable value stored in the search's tables
    (hash-consing the trees of tuples of snapshots, keys and truth entries). Only values
    whose equality is exact are pooled: tuples and frozensets of ints, strings, bytes,
    ``None`` and pooled values; anything else (a message, which compares without its
    ground-truth clock; a bool or float) is kept, and a tuple holding one is rebuilt
    around its shared parts but not pooled itself."""

    def __init__(self) -> None:
        self._pool: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._pool)

    def share(self, value: Any) -> Any:
        """``value``, or an equal value already in the pool (with its parts shared)."""
        return self._share(value)[0]

    def _share(self, value: Any) -> tuple[Any, bool]:
        """(the shared value, whether it is pooled)."""
        kind = type(value)
        if kind is tuple or kind is frozenset:
            # (no lookup of the whole value first: ``((True,),) == ((1,),)``, so only a
            # walk down to the atoms tells whether an equal pooled value is the same)
            pool = self._pool
            parts = []
            pooled = True
            for v in value:
                if type(v) in _POOLED_ATOMS:  # (most parts: shared without a call)
                    parts.append(pool.setdefault(v, v))
                else:
                    part, part_pooled = self._share(v)
                    parts.append(part)
                    pooled = pooled and part_pooled
            rebuilt = kind(parts)
            if pooled:
                return pool.setdefault(rebuilt, rebuilt), True
            return rebuilt, False
        if kind in _POOLED_ATOMS:
            return self._pool.setdefault(value, value), True
        return value, False


def describe_action(action: tuple) -> str:
    if action[0] == "send":
        return f"{action[1]} sends to {', '.join(action[2])}"
    if action[0] in ("join", "leave"):
        return f"{action[1]} {action[0]}s"
    if action[0] == "send-racing":
        return (f"{action[1]} sends to {', '.join(action[2])} as it learns of a departure "
                "(before the send reaches its module)")
    if action[3][:1] == b"\x00":
        what = "join" if action[3][2:3] == b"J" else "departure"
        return f"{action[2]} is told of a {what}"
    return f"frame {action[1].rstrip(chr(0))} -> {action[2]} arrives"
