"""Header codecs of causality modules: readers that turn a peer's missing or
wrong-shape metadata into a precise :class:`~groupcomm.core.causality.ProtocolViolation`,
and the compact encodings of vector clocks and matrices, with their renamers for the
model checker's symmetry reduction (docs/writing-a-module.md, section 9).

Clocks travel keyed by member name, not by position: members join and leave, and a late
joiner does not know who left before it came. The names are sent once per message, the
entries refer to them by index, only non-zero entries are sent, and every encoding is
canonical (names sorted): the model checker compares snapshots and frames by value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import compress
from typing import Any

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.messages import GroupMessage

Clock = dict[str, int]
Matrix = dict[str, dict[str, int]]
#: renames one process name (what the checker hands a header renamer)
Rename = Callable[[str], str]

__all__ = ["INT_ONLY", "Clock", "Matrix", "Rename", "decode_clock", "decode_matrix",
           "encode_clock", "encode_matrix", "freeze_clock", "freeze_matrix", "header",
           "int_header", "rename_clock", "rename_matrix"]

def header(message: GroupMessage, key: str, protocol: str) -> Any:
    """The header ``key`` of ``message``; a missing one breaks the protocol."""
    try:
        return message.headers[key]
    except KeyError:
        raise ProtocolViolation(
            f"{protocol}: message {message.message_id} from {message.sender} carries no "
            f"{key!r} header (is the sender running another causality module?)"
        ) from None


def int_header(message: GroupMessage, key: str, protocol: str, minimum: int = 0) -> int:
    """An integer header no smaller than ``minimum``."""
    value = header(message, key, protocol)
    if type(value) is not int or value < minimum:
        raise ProtocolViolation(
            f"{protocol}: header {key!r} of {message.message_id} from {message.sender} "
            f"must be an integer >= {minimum}, got {value!r}"
        )
    return value


INT_ONLY = frozenset({int})
_STR_ONLY = frozenset({str})


def encode_clock(clock: Mapping[str, int]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``(names, counts)`` of the non-zero entries, names sorted (canonical)."""
    # C-level passes (every send of vector stamps one)
    names = sorted(clock)
    counts = tuple(map(clock.__getitem__, names))
    if 0 in counts:  # a member known to have sent nothing (a base of 0)
        return tuple(compress(names, counts)), tuple(filter(None, counts))
    return tuple(names), counts


def decode_clock(message: GroupMessage, key: str, protocol: str) -> Clock:
    """Inverse of :func:`encode_clock`, validating the shape."""
    value = header(message, key, protocol)
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)} must be a pair (names, counts), got "
            f"{value!r:.80}")
    names, counts = value
    if (not (isinstance(names, tuple) and isinstance(counts, tuple))
            or len(names) != len(counts)):
        raise ProtocolViolation(f"{_where(message, key, protocol)}: names and counts must "
                                "be tuples of equal length")
    # checked in C-level passes (this runs for every message that arrives with a clock);
    # the loop that says which entry is bad only runs for a bad one
    if not (_STR_ONLY.issuperset(map(type, names)) and all(names)
            and INT_ONLY.issuperset(map(type, counts)) and (not counts or min(counts) >= 0)):
        for name, count in zip(names, counts, strict=True):
            if type(name) is not str or not name or type(count) is not int or count < 0:
                raise ProtocolViolation(
                    f"{_where(message, key, protocol)}: bad entry {name!r}: {count!r}")
    return dict(zip(names, counts, strict=True))


def _where(message: GroupMessage, key: str, protocol: str) -> str:
    """The start of a bad-metadata error (built only for a bad header: formatting it for
    every message that arrives would cost more than checking it)."""
    return f"{protocol}: header {key!r} of {message.message_id} from {message.sender}"


def encode_matrix(matrix: Mapping[str, Mapping[str, int]]) -> tuple[tuple[str, ...], tuple]:
    """``(names, flat)`` where ``flat`` is ``(row, column, count)`` index triples of the
    non-zero entries; names sorted, entries in row-major order (canonical)."""
    names = sorted(
        {r for r, row in matrix.items() if any(row.values())}
        | {c for row in matrix.values() for c, v in row.items() if v}
    )
    index = {n: i for i, n in enumerate(names)}
    flat: list[int] = []
    for r in sorted(matrix):
        row = matrix[r]
        for c in sorted(row):
            v = row[c]
            if v:
                flat += (index[r], index[c], v)
    return tuple(names), tuple(flat)


def decode_matrix(message: GroupMessage, key: str, protocol: str) -> Matrix:
    """Inverse of :func:`encode_matrix`, validating the shape."""
    value = header(message, key, protocol)
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)} must be a pair (names, entries), got "
            f"{value!r:.80}")
    names, flat = value
    if not (isinstance(names, tuple) and isinstance(flat, tuple)) or len(flat) % 3:
        raise ProtocolViolation(f"{_where(message, key, protocol)}: names must be a tuple "
                                "and entries index triples")
    if not (_STR_ONLY.issuperset(map(type, names)) and all(names)):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)}: names must be non-empty strings")
    size = len(names)
    rows, columns, counts = flat[0::3], flat[1::3], flat[2::3]
    # checked in C-level passes (this runs for every message that arrives with a stamp);
    # the loop below, which says which entry is bad, only runs for a bad stamp
    if not (INT_ONLY.issuperset(map(type, flat))
            and (not flat or (min(flat) >= 0 and max(rows) < size and max(columns) < size))):
        for i in range(0, len(flat), 3):
            r, c, v = flat[i : i + 3]
            if not (
                type(r) is int and type(c) is int and type(v) is int
                and 0 <= r < size and 0 <= c < size and v >= 0
            ):
                raise ProtocolViolation(
                    f"{_where(message, key, protocol)}: bad entry {flat[i : i + 3]!r}")
    matrix: Matrix = {}
    for r, c, v in zip(rows, columns, counts, strict=True):
        row = matrix.get(names[r])
        if row is None:
            row = matrix[names[r]] = {}
        row[names[c]] = v
    return matrix


def freeze_clock(clock: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """A canonical hashable form of a clock (zero entries dropped)."""
    return tuple(sorted((k, v) for k, v in clock.items() if v))


def freeze_matrix(matrix: Mapping[str, Mapping[str, int]]) -> tuple:
    """A canonical hashable form of a matrix (zero entries dropped)."""
    return tuple(
        (r, freeze_clock(row)) for r, row in sorted(matrix.items()) if any(row.values())
    )


def rename_clock(value: Any, rename: Rename) -> Any:
    """The encoded clock ``value`` (:func:`encode_clock`) with every name renamed,
    re-encoded canonically."""
    names, counts = value
    return encode_clock({rename(n): c for n, c in zip(names, counts, strict=True)})


def rename_matrix(value: Any, rename: Rename) -> Any:
    """The encoded matrix ``value`` (:func:`encode_matrix`) with every name renamed,
    re-encoded canonically."""
    names, flat = value
    matrix: Matrix = {}
    for k in range(0, len(flat), 3):
        r, c, v = flat[k:k + 3]
        matrix.setdefault(rename(names[r]), {})[rename(names[c])] = v
    return encode_matrix(matrix)
