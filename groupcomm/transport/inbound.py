"""The communicator's inbound path: frames from the network to the node.

Every frame is verified (:class:`~groupcomm.wire.FrameCodec`) before anything
in it is decoded; then each message is checked against the attested sender (per-client
keys), the session and the membership. Messages from senders that are not current
members go to the session protocol (:meth:`SessionLink._admit`: early, departing or a
stale incarnation); bad input is counted by reason in
the :class:`~groupcomm.transport.rejects.RejectLog` and dropped. Runs on the I/O thread.
"""

from __future__ import annotations

from time import perf_counter_ns

from groupcomm.core.messages import MessageError
from groupcomm.wire.envelopes import decode_batch, decode_received, unpack_envelopes
from groupcomm.wire.frames import BATCH, MESSAGE, PACKED, FrameRejected, kind_of


class Inbound:
    """Frame validation and hand-over to the node, a part of
    :class:`~groupcomm.transport.communicator.Communicator` (I/O thread)."""

    def _handle_message_frame(self, frame: bytes, attested: bytes | None = None,
                              direct: bool = False) -> None:
        timeline = self.frame_timeline
        if timeline is not None:
            timeline.append(("in", perf_counter_ns()))
        try:
            body, _, _ = self.codec.open(frame)
            head = kind_of(body)
            if head == PACKED:
                self.stats["frames_received"] += 1
                origin = self._handle_packed(body, attested)
                envelopes: list[bytes] = []
            elif head == MESSAGE:
                envelopes = [body[1:]]
            elif head == BATCH:
                try:
                    envelopes = decode_batch(body)
                except MessageError as error:
                    raise FrameRejected("malformed", str(error)) from None
            else:
                raise FrameRejected("malformed", "expected a message frame")
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return
        if envelopes:
            self.stats["frames_received"] += 1
            sender = attested.decode("utf-8", "replace") if attested is not None else None
            origin = None
            for envelope in envelopes:
                origin = self._handle_envelope(envelope, sender) or origin
        self._drain_node()
        if direct and origin is not None:
            self._apply(self.membership.on_direct_frame(origin))

    def _handle_packed(self, body: bytes, attested: bytes | None) -> str | None:
        """Hand on the messages of a verified ``P`` body (the checks every message of
        one sender shares are made once); returns the sender's name once it decoded.
        Raises :class:`FrameRejected` when the body as a whole is malformed."""
        try:
            app, session, sender, messages, errors = unpack_envelopes(body, self.node.name)
        except MessageError as error:
            raise FrameRejected("malformed", str(error)) from None
        reject = self.rejects.reject
        for detail in errors:  # one count per bad message, as for separate envelopes
            reject("malformed", detail)
        if attested is not None and sender != attested.decode("utf-8", "replace"):
            for _ in messages:
                reject("impersonation",
                       f"{attested.decode('utf-8', 'replace')!r} sent a message signed as "
                       f"from {sender!r}")
            return None
        if session != self.session or app != self.application:
            for _ in messages:
                reject("wrong_session", f"message for {app}/{session}")
            return sender
        if not messages:
            return sender
        if sender not in self.node.member_set:
            self._admit(messages)
            return sender
        self.stats["messages_received"] += len(messages)
        self.node.arrived_many(messages)
        return sender

    def _handle_envelope(self, envelope: bytes, attested: str | None = None) -> str | None:
        """Hand one verified envelope on; returns its sender's name once it decoded."""
        try:
            try:
                message = decode_received(envelope, self.node.name)
            except MessageError as error:
                raise FrameRejected("malformed", str(error)) from None
            if attested is not None and message.sender != attested:
                raise FrameRejected(
                    "impersonation",
                    f"{attested!r} sent a message signed as from {message.sender!r}",
                )
            if message.session_name != self.session or (
                message.application_name != self.application
            ):
                raise FrameRejected(
                    "wrong_session",
                    f"message for {message.application_name}/{message.session_name}",
                )
            if message.sender not in self.node.member_set:
                self._admit([message])
                return message.sender
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return None
        self.stats["messages_received"] += 1
        self.node.arrived(message)
        return message.sender
