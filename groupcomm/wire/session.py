"""Session commands (client -> server) and notices (server -> client): signed ``S``
frames holding a msgpack map whose op and known field names travel as their codes
(:data:`OP_CODES`, :data:`FIELD_CODES`; spelling one out is refused). One larger than a
frame (a stored state, a snapshot for the store) travels as ``part`` frames
(:func:`seal_session_parts`, :func:`whole_session`; :mod:`groupcomm.wire.parts`).
"""

from __future__ import annotations

from typing import Any

import msgpack

from groupcomm.wire.frames import SESSION, FrameCodec, FrameRejected
from groupcomm.wire.parts import PART_HEADROOM, PartsError, Reassembler, digest, split

#: each op's required fields, in the order of the ops' codes (optional fields not listed)
SESSION_FIELDS: dict[str, tuple[str, ...]] = {
    "join": ("client", "application", "session", "address"),
    "leave": ("client", "application", "session"),
    "heartbeat": ("client", "application", "session"),
    "joined": ("client", "application", "session", "is_new_session", "is_new_application",
               "all_users", "addresses"),
    "left": ("client", "application", "session"),
    "error": ("reason", "detail"),
    "welcome": ("client", "server_id"),
    "pong": ("server_id",),
    "probe": ("probe",),
    # the session store (docs/storage.md)
    "snapshot": ("client", "application", "session", "request", "available"),
    "snapshot_request": ("request",),
    "stored_state": ("generation", "available"),
    "state": ("client", "application", "session"),
    # a command or notice larger than a frame, in parts (``of``: its op); a command's
    # parts also carry its client, application and session
    "part": ("of", "part", "parts", "size", "digest", "chunk"),
}


#: ops as they travel: their index here (the wire format: SESSION_FIELDS keeps the order)
OP_CODES: tuple[str, ...] = tuple(SESSION_FIELDS)
#: field names as they travel: their index here
FIELD_CODES: tuple[str, ...] = (
    "op", "client", "application", "session", "address", "is_new_session",
    "is_new_application", "all_users", "addresses", "reason", "detail", "server_id", "probe",
    "direct_frames", "incarnation", "wants_state", "returned", "generation", "request",
    "available", "fmt", "data", "reflected", "clock", "messages", "stored",
    "generation_changed", "has_state", "kept", "of", "part", "parts", "size", "digest",
    "chunk", "known", "refused")
_FIELD_INDEX = {name: code for code, name in enumerate(FIELD_CODES)}
_OP_INDEX = {name: code for code, name in enumerate(OP_CODES)}


def seal_session(codec: FrameCodec, op: str, **fields: Any) -> bytes:
    """Sign a session command or notice; raises ``ValueError`` for an op that is not in
    :data:`OP_CODES`."""
    if op not in _OP_INDEX:
        raise ValueError(f"unknown session op {op!r}")
    compact = {0: _OP_INDEX[op], **{_FIELD_INDEX.get(k, k): v for k, v in fields.items()}}
    return codec.seal(SESSION + msgpack.packb(compact, use_bin_type=True))


#: fields every part of a command repeats (the server checks them on each frame)
_COMMAND_FIELDS = ("client", "application", "session")


def seal_session_parts(codec: FrameCodec, op: str, **fields: Any) -> list[bytes]:
    """:func:`seal_session`, as one frame when it fits the codec's ``max_frame``, else as
    ``part`` frames of half a frame each, to put back together with
    :func:`whole_session`."""
    if op not in _OP_INDEX:
        raise ValueError(f"unknown session op {op!r}")
    compact = {0: _OP_INDEX[op], **{_FIELD_INDEX.get(k, k): v for k, v in fields.items()}}
    body = msgpack.packb(compact, use_bin_type=True)
    if len(body) <= codec.max_frame - PART_HEADROOM:
        return [codec.seal(SESSION + body)]
    chunks = split(body, max(1, codec.max_frame // 2 - PART_HEADROOM))
    whole = digest(body)
    common = {k: fields[k] for k in _COMMAND_FIELDS if k in fields}
    return [seal_session(codec, "part", of=op, part=index, parts=len(chunks),
                         size=len(body), digest=whole, chunk=chunk, **common)
            for index, chunk in enumerate(chunks)]


def whole_session(parts: Reassembler, sender: object, fields: dict[str, Any]
                  ) -> dict[str, Any] | None:
    """``fields`` as opened, or for a ``part``: the whole command or notice once its last
    part came (None before). Raises :class:`FrameRejected`: ``too_large`` past the
    reassembler's limit, else ``malformed``."""
    if fields["op"] != "part":
        return fields
    try:
        body = parts.part(sender, fields)
    except PartsError as error:
        raise FrameRejected("too_large" if error.too_large else "malformed",
                            f"{fields.get('of')!r} in parts: {error}") from None
    if body is None:
        return None
    whole = open_session(SESSION + body)
    if whole["op"] != fields["of"] or whole["op"] == "part":
        raise FrameRejected("malformed", f"parts of {fields['of']!r} make a {whole['op']!r}")
    return whole


def _names(value: dict) -> dict[str, Any]:
    """The map with its codes replaced by names; ``FrameRejected`` on an unknown code or
    a spelt-out name that has a code."""
    fields: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is int:
            if not 0 <= key < len(FIELD_CODES):
                raise FrameRejected("malformed", f"unknown session field code {key}")
            key = FIELD_CODES[key]
        elif type(key) is not str:
            raise FrameRejected("malformed", "session field names must be strings or codes")
        elif key in _FIELD_INDEX:
            raise FrameRejected("malformed", f"session field {key!r} must travel as its "
                                f"code, {_FIELD_INDEX[key]}")
        if type(item) is dict and any(type(k) is not str for k in item):
            raise FrameRejected("malformed", f"session field {key!r}: map keys must be strings")
        fields[key] = item
    op = fields.get("op")
    if type(op) is not int or not 0 <= op < len(OP_CODES):
        raise FrameRejected("malformed", f"session op must be one of the {len(OP_CODES)} op "
                            f"codes, not {op!r}")
    fields["op"] = OP_CODES[op]
    return fields


def open_session(body: bytes) -> dict[str, Any]:
    """Decode a verified ``S`` body; raises :class:`FrameRejected` (``malformed``)."""
    try:
        # integer keys: the compact field codes (checked by _names)
        value = msgpack.unpackb(body[1:], raw=False, strict_map_key=False)
    except Exception as error:
        raise FrameRejected("malformed", f"session frame is not msgpack: {error}") from None
    if not isinstance(value, dict):
        raise FrameRejected("malformed", "session frame must be a map with an 'op'")
    value = _names(value)
    op = value["op"]
    missing = [f for f in SESSION_FIELDS[op] if f not in value]
    if missing:
        raise FrameRejected("malformed", f"session op {op!r} lacks {', '.join(missing)}")
    return value
