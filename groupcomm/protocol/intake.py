"""Message frames in, for one member: :class:`FrameIntake` verifies a routed frame,
unwraps and decodes its batch, and checks sender and session once per batch."""

from __future__ import annotations

from collections import Counter

from groupcomm.core.messages import MessageError, ReceivedMessage
from groupcomm.protocol.rejects import RejectLog
from groupcomm.wire.envelopes import unpack_envelopes
from groupcomm.wire.frames import ROUTED, FrameCodec, FrameRejected, kind_of
from groupcomm.wire.streams import StreamDecoder

__all__ = ["FrameIntake"]


class FrameIntake:
    """What it refuses is counted by reason in ``rejects`` and logged."""

    def __init__(self, codec: FrameCodec, *, application: str, session: str,
                 rejects: RejectLog, stats: Counter[str]) -> None:
        self.codec = codec
        self.application = application
        self.session = session
        self.rejects = rejects
        self.stats = stats
        self.streams = StreamDecoder(max_body=codec.max_frame)

    def open(self, frame: bytes, attested: bytes | None,
             receiver: str) -> tuple[str | None, list[ReceivedMessage]]:
        """The sender (None when undecodable or an impersonation) and messages (empty when
        refused) of a routed frame; ``attested``: the sender the server vouches for."""
        try:
            body, nonce, _ = self.codec.open(frame)
            if kind_of(body) != ROUTED:
                raise FrameRejected("malformed", "a session frame where a message frame "
                                    "was expected")
            body = self.streams.unwrap(nonce, body)
            self.stats["frames_received"] += 1
            try:
                app, session, sender, messages, errors = unpack_envelopes(body, receiver)
            except MessageError as error:
                raise FrameRejected("malformed", str(error)) from None
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return None, []
        reject = self.rejects.reject
        for detail in errors:  # one count per bad message
            reject("malformed", detail)
        if attested is not None and sender != attested.decode("utf-8", "replace"):
            for _ in messages:
                reject("impersonation",
                       f"{attested.decode('utf-8', 'replace')!r} sent a message signed as "
                       f"from {sender!r}")
            return None, []
        if session != self.session or app != self.application:
            for _ in messages:
                reject("wrong_session", f"message for {app}/{session}")
            return sender, []
        return sender, messages
