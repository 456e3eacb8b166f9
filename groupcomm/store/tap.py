"""What the session server reads of a relayed frame for its store: the application
messages in it, payloads untouched (never deserialized here). It decodes the frame's
compressed stream as a receiver would (the server sees every chunk of every stream, in
order), and counts what it cannot read."""

from __future__ import annotations

import logging
from collections import Counter

import msgpack

from groupcomm.core.messages import GROUP_HEADER
from groupcomm.protocol.store_rules import Candidate
from groupcomm.wire.frames import FrameRejected
from groupcomm.wire.payload import PAYLOAD_CONTROL
from groupcomm.wire.streams import StreamDecoder

__all__ = ["FrameTap"]

log = logging.getLogger(__name__)


class FrameTap:
    """Reads the messages of verified routed bodies (``max_body``: the frame limit)."""

    def __init__(self, max_body: int) -> None:
        self._streams = StreamDecoder(max_body=max_body)
        #: frames and messages it could not read, by reason
        self.unreadable: Counter[str] = Counter()

    def read(self, nonce: bytes, body: bytes) -> tuple[str, str, list[Candidate]]:
        """``(application, session, messages)`` of a routed body from the sender of
        ``nonce``; an unreadable frame gives no messages and is counted."""
        try:
            batch = self._streams.unwrap(nonce, body)
        except FrameRejected as error:
            self.unreadable[error.reason] += 1
            log.warning("store: a relayed frame is not kept (%s: %s)", error.reason,
                        error.detail)
            return "", "", []
        try:
            value = msgpack.unpackb(memoryview(batch)[1:], raw=False, use_list=False,
                                    strict_map_key=True)
            app, session, sender, entries = value
        except Exception as error:  # msgpack raises several unrelated types
            self.unreadable["malformed"] += 1
            log.warning("store: a relayed batch is not kept (not a packed batch: %s)", error)
            return "", "", []
        found = []
        for fields in entries:
            try:
                message_id, dests, _kind, headers, vc, fmt, payload = fields
                if fmt == PAYLOAD_CONTROL or "#" not in message_id:
                    # a module's own (an acknowledgement), or the session layer's (a
                    # state request or reply, numbered "member~stateN"): not the
                    # application's (a module may mark an application message with a
                    # kind of its own, as cykas's "eager" copies)
                    continue
                group = headers.get(GROUP_HEADER) if headers else None
                tag = tuple((str(k), int(v)) for k, v in vc)
                app_id = message_id
                if group is not None:  # a copy of a split send: the send's id and tag
                    # (as ReceivedMessage.app_message_id and app_tag make them)
                    app_id = f"{sender}#{group[0]}"
                    tag = tuple((k, int(group[1]) if k == sender else v) for k, v in tag)
                found.append(Candidate(app_id, sender, tuple(dests), fmt, bytes(payload),
                                       tag, grouped=group is not None))
            except (TypeError, ValueError, IndexError, AttributeError):
                self.unreadable["malformed"] += 1
        return app, session, found
