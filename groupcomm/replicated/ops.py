"""The shape check every replicated type applies to an operation before its effect."""

from __future__ import annotations

from typing import Any


def op_kind(op: Any, kinds: tuple[str, ...], arity: int) -> str:
    """The kind of ``op`` (its first element), or ``ValueError`` if ``op`` is not a tuple
    of ``arity`` elements whose kind is one of ``kinds``."""
    if not isinstance(op, tuple) or len(op) != arity or op[0] not in kinds:
        raise ValueError(f"not an operation of this type: {op!r} (expected one of "
                         f"{', '.join(kinds)} with {arity - 1} argument(s))")
    return op[0]
