"""What the shared text is made of: runs of characters, their blocks, their ids."""

from __future__ import annotations

from typing import Any

from groupcomm.core.messages import Tag

#: the timestamp of a character whose insert is causally stable: smaller than any other
STABLE = (0, "")


class Run:
    """Consecutive characters of one insert, in one state; or a *chain* of stable,
    visible single-character inserts whose ids count up (``p1#7``, ``p1#8``, ...).

    ``op`` is the insert's id (a chain: the ids' prefix, ``p1#``), ``start`` the offset
    of the first character (a chain: the number of its first id). ``sum`` (the sum of
    the insert's clock) and ``tag`` become 0 and ``None`` once the insert is stable.
    ``deleted`` is the tag of the delete that hid the characters."""

    __slots__ = ("op", "start", "text", "sum", "tag", "deleted", "block", "chain")

    def __init__(self, op: str, start: int, text: str, total: int, tag: Tag | None,
                 deleted: Tag | None, block: Block, chain: bool = False) -> None:
        self.op = op
        self.start = start
        self.text = text
        self.sum = total
        self.tag = tag
        self.deleted = deleted
        self.block = block
        self.chain = chain

    def char_id(self, k: int) -> str:
        """The id of this run's ``k``-th character."""
        offset = self.start + k
        if self.chain:
            return f"{self.op}{offset}"
        return self.op if offset == 0 else f"{self.op}+{offset}"


class Block:

    __slots__ = ("runs", "visible", "index")

    def __init__(self, runs: list[Run], index: int) -> None:
        self.runs = runs
        self.visible = sum(len(r.text) for r in runs if r.deleted is None)
        self.index = index


def op_kind(op: Any, kinds: tuple[str, ...], arity: int) -> str:
    """The kind of ``op``, or ``ValueError`` unless it is a tuple of ``arity`` elements
    whose first is one of ``kinds``."""
    if not isinstance(op, tuple) or len(op) != arity or op[0] not in kinds:
        raise ValueError(f"not an operation of this type: {op!r} (expected one of "
                         f"{', '.join(kinds)} with {arity - 1} argument(s))")
    return op[0]


def check_int(value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} is an integer, got {value!r:.40}")


def start_of(run: Run) -> int:
    return run.start


def numbered(ident: str) -> tuple[str, int] | None:
    """``(prefix, number)`` of an id that ends in a number without leading zeros
    (``p1#12`` -> ``("p1#", 12)``), else ``None``."""
    digits = len(ident) - len(ident.rstrip("0123456789"))
    if not digits or (digits > 1 and ident[-digits] == "0"):
        return None
    return ident[:-digits], int(ident[-digits:])


def split_id(ident: str) -> tuple[str, int]:
    """``(insert id, offset)`` of a character id (``id`` or ``id+k``)."""
    base, plus, suffix = ident.rpartition("+")
    if plus and suffix.isascii() and suffix.isdigit() and suffix[0] != "0":
        return base, int(suffix)
    return ident, 0
