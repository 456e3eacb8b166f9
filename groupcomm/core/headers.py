"""Protocol metadata on the wire: the compact encoding of a message's ``headers`` and
the number of metadata bytes a message carries (the ``meta_bytes`` trace field). Headers
are msgpack, never pickle."""

from __future__ import annotations

from collections.abc import Mapping

import msgpack

from groupcomm.core.messages import ControlMessage, HeaderValue, MessageError, SentMessage

#: on a copy sent again (the reliable layer's retransmission): the transport starts its
#: compressed stream to the copy's destinations afresh with it, since the copy before
#: may have been lost in a stream the receiver can no longer decode
RESENT = "~rs"


def encode_headers(headers: Mapping[str, HeaderValue]) -> bytes:
    """Compact encoding of protocol metadata (empty headers encode to nothing)."""
    if not headers:
        return b""
    return msgpack.packb(dict(headers), use_bin_type=True)


def decode_headers(data: bytes) -> dict[str, HeaderValue]:
    """Inverse of :func:`encode_headers` (arrays come back as tuples)."""
    if not data:
        return {}
    value = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True)
    if not isinstance(value, dict):
        raise MessageError("headers must decode to a map")
    return value


def meta_bytes(message: SentMessage) -> int:
    """Protocol metadata bytes this message carries on the wire (the ``meta_bytes``
    field): the encoded headers, one byte for a ``kind`` other than ``normal`` (Cykas'
    eager flag), and for a control message its control fields too."""
    size = len(encode_headers(message.headers))
    if message.kind != "normal":
        size += 1  # the kind (eager, ...) is one byte of the envelope that carries meaning
    control = message.user_message
    if isinstance(control, ControlMessage):
        size += len(msgpack.packb((control.kind, control.about), use_bin_type=True))
    return size
