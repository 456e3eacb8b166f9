"""Frames between clients and the session server, and between peers.

Every frame is signed by :class:`~groupcomm.transport.codec.FrameCodec`. The first byte of a
verified body says what follows: ``M`` an application or control message envelope
(see :mod:`groupcomm.transport.codec`), ``P`` the messages queued for the same destinations in
one turn of the I/O loop, packed as one msgpack document (what communicators send; see
:func:`~groupcomm.transport.codec.pack_envelopes`), ``B`` an older batch form (an array of ``M``
envelopes; still accepted), ``S`` a session command or notice (msgpack map). A relayed
message travels as a two-part ZeroMQ message: a signed ``S`` relay command naming the
destinations, then the sender's signed message frame, which the server forwards
unchanged (receivers verify the original sender's signature).
"""

from __future__ import annotations

from typing import Any

import msgpack

from groupcomm.transport.codec import FrameCodec, FrameRejected

MESSAGE = b"M"
BATCH = b"B"
PACKED = b"P"
SESSION = b"S"

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


def kind_of(body: bytes) -> bytes:
    """``MESSAGE``, ``PACKED``, ``BATCH`` or ``SESSION``; raises :class:`FrameRejected`
    otherwise."""
    head = body[:1]
    if head not in (MESSAGE, PACKED, BATCH, SESSION):
        raise FrameRejected("malformed", f"unknown frame type {head!r}")
    return head
