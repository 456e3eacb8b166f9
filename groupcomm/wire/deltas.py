"""The batches of a routed stream (:mod:`groupcomm.wire.streams`), each sent as its
difference from the one before, over the length they share. Two keystrokes' batches
differ in a few counts at the same places, which deflate then matches: under a matrix
clock with three members a keystroke's compressed batch goes from about 36 bytes to 23.

The difference is one little-endian integer subtraction (C-level, under a microsecond):
a borrow moves towards the payload at the end, so the header's zeros stay zeros. It
knows nothing of the batch's structure; :func:`restore` inverts :func:`difference`.
"""

from __future__ import annotations


def difference(body: bytes, previous: bytes) -> bytes:
    """``body`` minus ``previous`` over their common length, then the rest of ``body``."""
    shared = min(len(body), len(previous))
    if not shared:
        return body
    value = (int.from_bytes(body[:shared], "little")
             - int.from_bytes(previous[:shared], "little")) % (1 << (8 * shared))
    return value.to_bytes(shared, "little") + body[shared:]


def restore(diff: bytes, previous: bytes) -> bytes:
    """Inverse of :func:`difference`: the body whose difference from ``previous`` is
    ``diff``."""
    shared = min(len(diff), len(previous))
    if not shared:
        return diff
    value = (int.from_bytes(diff[:shared], "little")
             + int.from_bytes(previous[:shared], "little")) % (1 << (8 * shared))
    return value.to_bytes(shared, "little") + diff[shared:]
