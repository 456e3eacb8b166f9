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
        #: the transition that broke the property (set by :meth:`Model.successors`)
        self.action: tuple | None = None
        #: causal / fifo: (process, sender, index) of the message delivered too late
        self.missing: tuple[int, int, int] | None = None


def exact(value: Any) -> Any:
    """``value`` with every message replaced by what it carries *including* its
    ground-truth clock (messages compare without it: :meth:`GroupMessage.freeze`), so
    two snapshots that differ only in a held message's clock stay apart."""
    if isinstance(value, tuple):
        for v in value:
            if type(v) not in _ATOMIC:
                return tuple([exact(v) for v in value])
        return value  # only atoms (the common case: clocks, matrices, counters)
    if isinstance(value, GroupMessage):
        return (value.freeze(), value.vc)
    return value


#: values :func:`exact` leaves as they are
_ATOMIC = frozenset({int, str, bytes, float, bool, type(None)})


def describe_action(action: tuple) -> str:
    if action[0] == "send":
        return f"{action[1]} sends to {', '.join(action[2])}"
    if action[0] == "join":
        return f"{action[1]} joins"
    if action[0] == "leave":
        return f"{action[1]} leaves"
    if action[0] == "send-racing":
        return (f"{action[1]} sends to {', '.join(action[2])} as it learns of a departure "
                "(before the send reaches its module)")
    if action[3][:1] == b"\x00":
        what = "join" if action[3][2:3] == b"J" else "departure"
        return f"{action[2]} is told of a {what}"
    return f"frame {action[1].rstrip(chr(0))} -> {action[2]} arrives"
