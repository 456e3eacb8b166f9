"""The batches of a routed stream, each sent as its difference from the one before.

Within one stream (:mod:`groupcomm.wire.streams`) a receiver has decoded every earlier
batch, so a batch travels as its bytes minus the previous batch's, over the length the
two share, the rest as it is. Two successive keystrokes differ in a few bytes: the
counts of the stamp and the tag clock that went up, the id's number, the character.
Their difference is zeros with a few small values, always at the same places, which
deflate turns into a match with the previous difference; the counts themselves would
cost a literal byte each. Under a matrix clock with three members this takes a
keystroke's compressed batch from about 36 bytes to about 23.

The difference is taken as one little-endian integer (a C-level subtraction, under a
microsecond for a keystroke's batch): a byte that went down borrows from the byte after
it, towards the end of the batch, where the payload is, so the header's zeros stay
zeros. It knows nothing of the batch's structure: any body, of any module, comes back
exactly (:func:`restore` is the inverse of :func:`difference` for the same previous
batch).
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
