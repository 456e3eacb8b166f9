"""User objects on the wire, only ever decoded from verified bytes: msgpack for plain
tuples (a text operation: half the bytes of its pickle, back as the same tuple),
standard pickle when it can, dill when it must (lambdas, closures, ``__main__``'s
functions, which must arrive and run).
"""

from __future__ import annotations

import pickle
from typing import Any

import dill
import msgpack

from groupcomm.core.messages import MessageError

PAYLOAD_PICKLE = 0
PAYLOAD_DILL = 1
PAYLOAD_CONTROL = 2
PAYLOAD_MSGPACK = 3

_SCALARS = (type(None), bool, int, float, str, bytes)
#: how deep a plain tuple may nest (deeper ones are pickled)
_MAX_DEPTH = 8


def is_plain_tuple(obj: Any, depth: int = 0) -> bool:
    """Whether ``obj`` is a tuple that msgpack carries exactly (see the module doc)."""
    if type(obj) is not tuple or depth > _MAX_DEPTH:
        return False
    for item in obj:  # a loop, not all(<generator>): this runs for every text operation
        if type(item) not in _SCALARS and not is_plain_tuple(item, depth + 1):
            return False
    return True


def load_plain(data: bytes) -> tuple:
    """A plain tuple from msgpack; raises ``MessageError`` on anything but a tuple."""
    try:
        value = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types
        raise MessageError(f"msgpack payload malformed: {error}") from None
    if type(value) is not tuple:
        raise MessageError(f"a msgpack payload must be an array, not {type(value).__name__}")
    return value


def dump_payload(obj: Any) -> tuple[int, bytes]:
    """``(format, bytes)`` of a user object. A pickle that names ``__main__`` is redone
    with dill (the receiver cannot import it by reference), as is one that fails."""
    if type(obj) is tuple and is_plain_tuple(obj):
        try:
            return PAYLOAD_MSGPACK, msgpack.packb(obj, use_bin_type=True)
        except (OverflowError, UnicodeEncodeError, ValueError, TypeError):
            pass  # not exactly (an integer out of range, a string that is not UTF-8)
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return PAYLOAD_DILL, dill.dumps(obj, recurse=True)
    if b"__main__" in data:
        return PAYLOAD_DILL, dill.dumps(obj, recurse=True)
    return PAYLOAD_PICKLE, data


def load_payload(fmt: int, data: bytes) -> Any:
    """Inverse of :func:`dump_payload`. Call only on verified bytes."""
    if fmt == PAYLOAD_PICKLE:
        return pickle.loads(data)
    if fmt == PAYLOAD_DILL:
        return dill.loads(data)
    if fmt == PAYLOAD_MSGPACK:
        return load_plain(data)
    raise MessageError(f"unknown payload format {fmt!r}")
