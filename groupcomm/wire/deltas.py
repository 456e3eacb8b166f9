"""The batches of a routed stream (:mod:`groupcomm.wire.streams`), each sent as its
difference from the one before over their common length: two keystrokes differ in a few
counts at the same places, which deflate matches (a matrix keystroke among three members
compresses to about 23 bytes instead of 36). One little-endian integer subtraction: a
borrow moves towards the payload at the end, so the header's zeros stay zeros.
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
