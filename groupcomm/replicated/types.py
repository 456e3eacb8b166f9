"""The counter, the add-wins set and the multi-value register. ``prepare_*`` returns the
operation to broadcast; ``effect`` applies a delivered one with its tag, message id and sender
(only the text needs the id and the sender), ``ValueError`` for one of the wrong shape."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.runs import op_kind


class Counter:
    """An op-based counter: increments commute (the tag is taken, not needed)."""

    def __init__(self) -> None:
        self.value = 0

    @staticmethod
    def prepare_add(amount: int) -> tuple[str, int]:
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValueError(f"a counter adds integers, got {amount!r}")
        return ("add", amount)

    def effect(self, op: Any, tag: Tag, op_id: str | None = None,
               sender: str | None = None) -> None:
        op_kind(op, ("add",), 2)
        self.value += self.prepare_add(op[1])[1]


class AddWinsSet:
    """An op-based add-wins (observed-remove) set: a remove drops the adds whose tags
    happened before it; a concurrent add survives."""

    def __init__(self) -> None:
        self._adds: dict[Hashable, set[Tag]] = {}

    @staticmethod
    def prepare_add(element: Hashable) -> tuple[str, Hashable]:
        return ("add", element)

    @staticmethod
    def prepare_remove(element: Hashable) -> tuple[str, Hashable]:
        return ("remove", element)

    def effect(self, op: Any, tag: Tag, op_id: str | None = None,
               sender: str | None = None) -> None:
        kind = op_kind(op, ("add", "remove"), 2)
        element = op[1]
        if kind == "add":
            self._adds.setdefault(element, set()).add(tag)
            return
        kept = {t for t in self._adds.get(element, ()) if not t.happened_before(tag)}
        if kept:
            self._adds[element] = kept
        else:
            self._adds.pop(element, None)

    @property
    def value(self) -> frozenset:
        return frozenset(self._adds)

    def __contains__(self, element: object) -> bool:
        return element in self._adds


class MultiValueRegister:
    """An op-based multi-value register: a write supersedes the writes that happened
    before it; concurrent ones are all kept, in an order every replica agrees on."""

    def __init__(self) -> None:
        self._writes: list[tuple[Any, Tag]] = []

    @staticmethod
    def prepare_write(value: Any) -> tuple[str, Any]:
        return ("write", value)

    def effect(self, op: Any, tag: Tag, op_id: str | None = None,
               sender: str | None = None) -> None:
        op_kind(op, ("write",), 2)
        self._writes = [(v, t) for v, t in self._writes if not t.happened_before(tag)]
        self._writes.append((op[1], tag))

    @property
    def value(self) -> list[Any]:
        ordered = sorted(self._writes, key=lambda entry: sorted(entry[1].clock.items()))
        return [v for v, _ in ordered]
