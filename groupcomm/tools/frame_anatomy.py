"""What one typed key costs on the wire, part by part (``groupcomm text-wire --fields``):
three members type on the in-process network, and the first member's last keystroke is
encoded as a communicator would and broken down, frame and batch, field by field.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import msgpack

from groupcomm.core.messages import SentMessage
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.wire.envelopes import NORMAL, decode_message, pack_envelopes
from groupcomm.wire.frames import SIGNATURE_SIZE, FrameCodec, sealed_body
from groupcomm.wire.streams import StreamEncoder, routed_head

__all__ = ["keystroke_fields"]


def _typed(module: str, names: Sequence[str], history: int) -> list[SentMessage]:
    """What ``names[0]`` sends while everyone types ``history`` keys, and it one more."""
    net = LocalNetwork(list(names), module, trace=False)
    sent: list[SentMessage] = []
    last = {name: None for name in names}
    for k in range(history + 1):
        typists = names if k < history else names[:1]
        for name in typists:
            before = len(net.in_flight)
            message = net.to_others(name, ("insert", last[name], "abcdefgh "[k % 9]))
            last[name] = message.message_id
            if name == names[0]:
                frames = dict.fromkeys(f.frame for f in net.in_flight[before:])
                sent += [decode_message(frame) for frame in frames]
        net.run()
    return sent


def keystroke_fields(module: str, names: Sequence[str] = ("p1", "p2", "p3"),
                     history: int = 60) -> dict[str, Any]:
    """Bytes of each part of one keystroke's frame under ``module``, after ``history``
    keystrokes by each member (the payload also as its pickle would take)."""
    codec = FrameCodec(b"frame-anatomy-key-0123456789abcd")
    streams = StreamEncoder()
    frame = body = b""
    message: SentMessage | None = None
    for message in _typed(module, names, history):
        body = next(pack_envelopes([message], 1 << 20))
        frame = codec.seal(streams.wrap(message.destinations, body))
    assert message is not None
    routed = sealed_body(frame)
    _, _, chunk_at = routed_head(routed)
    pack = msgpack.Packer(use_bin_type=True).pack
    kind = 0 if message.kind == NORMAL else message.kind
    user = message.user_message
    stamp = dict(message.headers)
    head = (2 + len(pack(message.application_name)) + len(pack(message.session_name))
            + len(pack(message.sender)) + 1)
    fmt_and_payload = len(body) - head - 1 - sum(len(pack(v)) for v in (
        message.message_id, message.destinations, kind, stamp, message.vc))
    return {
        "frame": len(frame),
        "signature": SIGNATURE_SIZE,
        "frame_header": len(frame) - SIGNATURE_SIZE - len(routed),
        "routed_head": chunk_at,
        "compressed_batch": len(routed) - chunk_at,
        "batch": len(body),
        "batch_head": head,
        "message_array_header": 1,
        "message_id": len(pack(message.message_id)),
        "destinations": len(pack(message.destinations)),
        "kind": len(pack(kind)),
        "stamp": len(pack(stamp)),
        "tag_clock": len(pack(message.vc)),
        "payload": fmt_and_payload,
        "payload_pickled": 1 + len(pack(pickle.dumps(user, pickle.HIGHEST_PROTOCOL))),
    }
