"""Session commands (client -> server) and notices (server -> client): signed ``S``
frames holding a msgpack map with an ``op`` and its fields."""

from __future__ import annotations

from typing import Any

import msgpack

from groupcomm.wire.frames import SESSION, FrameCodec, FrameRejected

#: Session commands (client -> server) and notices (server -> client) and their required
#: fields. Optional: ``leave`` may carry ``direct_frames`` ({peer: frames pushed to it
#: directly}), and ``left`` then carries ``direct_frames`` (int, how many of them the
#: receiving member should still expect) so that a leaver's last direct frames, which
#: the notice can overtake, are not refused as coming from a non-member.
SESSION_FIELDS: dict[str, tuple[str, ...]] = {
    "join": ("client", "application", "session", "address"),
    "leave": ("client", "application", "session"),
    "heartbeat": ("client", "application", "session"),
    "relay": ("client", "application", "session", "dests"),
    "joined": ("client", "application", "session", "is_new_session", "is_new_application",
               "all_users", "addresses"),
    "left": ("client", "application", "session"),
    "error": ("reason", "detail"),
    "welcome": ("client", "server_id"),
    "pong": ("server_id",),
    # another client asks for this one's name: answer with a heartbeat echoing "probe"
    "probe": ("probe",),
}


def seal_session(codec: FrameCodec, op: str, **fields: Any) -> bytes:
    """Sign a session command or notice."""
    return codec.seal(SESSION + msgpack.packb({"op": op, **fields}, use_bin_type=True))


def open_session(body: bytes) -> dict[str, Any]:
    """Decode a verified ``S`` body; raises :class:`FrameRejected` (``malformed``)."""
    try:
        value = msgpack.unpackb(body[1:], raw=False, strict_map_key=True)
    except Exception as error:
        raise FrameRejected("malformed", f"session frame is not msgpack: {error}") from None
    if not isinstance(value, dict) or not isinstance(value.get("op"), str):
        raise FrameRejected("malformed", "session frame must be a map with an 'op'")
    op = value["op"]
    expected = SESSION_FIELDS.get(op)
    if expected is None:
        raise FrameRejected("malformed", f"unknown session op {op!r}")
    missing = [f for f in expected if f not in value]
    if missing:
        raise FrameRejected("malformed", f"session op {op!r} lacks {', '.join(missing)}")
    return value
