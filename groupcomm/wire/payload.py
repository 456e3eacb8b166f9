"""User objects on the wire: standard pickle when it can, dill when it must (lambdas,
closures, functions defined in ``__main__``, which must arrive and run at the
receiver). Only ever called on verified bytes (see :mod:`groupcomm.wire.frames`)."""

from __future__ import annotations

import pickle
from typing import Any

import dill

from groupcomm.core.messages import MessageError

#: payload formats
PAYLOAD_PICKLE = 0
PAYLOAD_DILL = 1
PAYLOAD_CONTROL = 2


def dump_payload(obj: Any) -> tuple[int, bytes]:
    """Serialize a user object: ``(format, bytes)``; standard pickle first, dill if needed.

    Standard pickle stores functions by reference; a function defined in ``__main__``
    cannot be imported by the receiver that way, so a pickle that names ``__main__``
    is redone with dill, which stores such functions by value. Lambdas and closures
    make standard pickle fail, and go to dill too.
    """
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
    raise MessageError(f"unknown payload format {fmt}")
