"""Wire codec: compact envelopes, signed frames, replay protection.

A frame on the wire is ``signature (32 bytes) | body`` where the signature is
HMAC-SHA256 over the body under the session key, and the body is

    ``MAGIC (2) | sender nonce (8) | counter (8, big-endian) | msgpack envelope``.

:meth:`FrameCodec.open` checks size, signature and replay window *before* anything
is decoded; only verified bytes ever reach msgpack, and only verified payloads ever
reach pickle or dill. Every rejection raises :class:`FrameRejected` with a ``reason``
that the transport counts.

The envelope and protocol metadata (``headers``) are msgpack, never dill. The user
payload is pickled with the standard (fast) pickle when it can be, and with dill when
it cannot (lambdas, closures, functions defined in ``__main__`` — those must arrive
and run at the receiver).
"""

from __future__ import annotations

import hmac
import os
import pickle
import struct
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dill
import msgpack

from groupcomm.messages import (
    ControlMessage,
    HeaderValue,
    MessageError,
    ReceivedMessage,
    SentMessage,
)

MAGIC = b"g1"
SIGNATURE_SIZE = 32
_PREFIX = struct.Struct(">2s8sQ")
HEADER_SIZE = SIGNATURE_SIZE + _PREFIX.size
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
DEFAULT_REPLAY_WINDOW = 4096

# payload formats
PAYLOAD_PICKLE = 0
PAYLOAD_DILL = 1
PAYLOAD_CONTROL = 2

REJECT_REASONS = (
    "oversized",
    "truncated",
    "bad_signature",
    "replayed",
    "malformed",
    "unknown_peer",
    "wrong_session",
)


class FrameRejected(Exception):
    """A frame was refused; ``reason`` is one of :data:`REJECT_REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


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
    """Protocol metadata bytes this message carries on the wire (the ``meta_bytes`` field).

    For application messages: the encoded headers, plus one byte when the message's
    ``kind`` is not ``normal`` (Cykas' eager flag is protocol information). For control messages the whole
    message is protocol traffic: its control fields plus headers.
    """
    size = len(encode_headers(message.headers))
    if message.kind != "normal":
        size += 1  # the kind (eager, ...) is one byte of the envelope that carries meaning
    control = message.user_message
    if isinstance(control, ControlMessage):
        size += len(msgpack.packb((control.kind, control.about), use_bin_type=True))
    return size


@dataclass(frozen=True, slots=True)
class Envelope:
    """A decoded frame: the message and its addressing, as the receiver sees it."""

    message: SentMessage
    nonce: bytes
    counter: int


_local = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's msgpack packer: reusing one halves the cost of a small envelope
    (``msgpack.packb`` builds a packer per call); packers are not thread-safe."""
    try:
        return _local.packer
    except AttributeError:
        _local.packer = msgpack.Packer(use_bin_type=True)
        return _local.packer


def encode_message(message: SentMessage, payload: tuple[int, bytes] | None = None) -> bytes:
    """The msgpack envelope of ``message`` (payload serialized unless given)."""
    user = message.user_message
    if isinstance(user, ControlMessage):
        fmt, data = PAYLOAD_CONTROL, msgpack.packb((user.protocol, user.kind, user.about))
    elif message.is_user_message():
        fmt, data = payload if payload is not None else dump_payload(user)
    else:
        raise MessageError(f"{type(user).__name__} does not travel on the wire")
    return _packer().pack(
        (
            message.application_name,
            message.session_name,
            message.message_id,
            message.sender,
            message.destinations,
            message.kind,
            encode_headers(message.headers),
            message.vc,
            fmt,
            data,
        ),
    )


def decode_message(data: bytes) -> SentMessage:
    """Inverse of :func:`encode_message`; raises ``MessageError`` on a bad shape."""
    message = _decode(data, None)
    assert isinstance(message, SentMessage)
    return message


def decode_received(data: bytes, receiver: str) -> ReceivedMessage:
    """The :class:`ReceivedMessage` ``receiver`` gets from an envelope, built directly.

    Raises ``MessageError`` on a bad shape or when ``receiver`` is not a destination.
    """
    message = _decode(data, receiver)
    assert isinstance(message, ReceivedMessage)
    return message


def _decode(data: bytes, receiver: str | None) -> SentMessage | ReceivedMessage:
    try:
        fields = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types
        raise MessageError(f"envelope is not msgpack: {error}") from None
    if not isinstance(fields, tuple) or len(fields) != 10:
        raise MessageError("envelope must be a 10-element array")
    (app, session, message_id, sender, dests, kind, headers, vc, fmt, payload) = fields
    if type(app) is not str or type(session) is not str or type(kind) is not str:
        for name, value in (("application", app), ("session", session), ("kind", kind)):
            if not isinstance(value, str):
                raise MessageError(f"envelope field {name} must be a string")
    if type(headers) is not bytes or type(payload) is not bytes:
        raise MessageError("envelope headers and payload must be bytes")
    if type(vc) is not tuple:
        raise MessageError("envelope vector clock must be (name, int) pairs")
    for pair in vc:  # a loop, not all(<generator>): this runs for every message
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or (
            type(pair[1]) is not int
        ):
            raise MessageError("envelope vector clock must be (name, int) pairs")
    if fmt == PAYLOAD_CONTROL:
        try:
            protocol, control_kind, about = msgpack.unpackb(payload, raw=False)
        except Exception as error:
            raise MessageError(f"control message malformed: {error}") from None
        user: Any = ControlMessage(protocol=protocol, kind=control_kind, about=about)
    elif fmt in (PAYLOAD_PICKLE, PAYLOAD_DILL):
        try:
            user = load_payload(fmt, payload)
        except Exception as error:
            raise MessageError(f"payload does not unpickle: {error!r}") from None
    else:
        raise MessageError(f"unknown payload format {fmt!r}")
    try:
        decoded_headers = decode_headers(headers)
    except Exception as error:
        raise MessageError(f"headers malformed: {error}") from None
    if not isinstance(dests, tuple):
        raise MessageError("envelope destinations must be an array")
    if receiver is not None:
        if receiver not in dests:
            raise MessageError(f"{message_id!r} is not addressed to {receiver!r}")
        if not decoded_headers:  # the common case: every field is checked above or here
            if type(message_id) is not str or not message_id:
                raise MessageError("message_id must be a non-empty string")
            if type(sender) is not str or not sender:
                raise MessageError("sender must be a non-empty string")
            return ReceivedMessage.checked_elsewhere(app, session, user, message_id, sender,
                                                     vc, kind, receiver)
        return ReceivedMessage(
            application_name=app, session_name=session, user_message=user,
            message_id=message_id, sender=sender, headers=decoded_headers, vc=vc,
            kind=kind, receiver=receiver,
        )
    return SentMessage(
        application_name=app, session_name=session, user_message=user,
        message_id=message_id, sender=sender, headers=decoded_headers, vc=vc, kind=kind,
        destinations=dests,
    )


def encode_batch(envelopes: list[bytes]) -> bytes:
    """Several message envelopes in one frame body (``B`` frames): one signature,
    one ZeroMQ send, however many messages were queued for the same destinations."""
    return b"B" + msgpack.packb(envelopes, use_bin_type=True)


def decode_batch(body: bytes) -> list[bytes]:
    """Inverse of :func:`encode_batch`; raises ``MessageError`` on a bad shape."""
    try:
        envelopes = msgpack.unpackb(body[1:], raw=False, use_list=True)
    except Exception as error:
        raise MessageError(f"batch is not msgpack: {error}") from None
    if not isinstance(envelopes, list) or not all(isinstance(e, bytes) for e in envelopes):
        raise MessageError("a batch must be an array of envelopes")
    return envelopes


class ReplayWindow:
    """Remembers, per sender nonce, the highest counter and which recent ones were seen.

    A counter older than ``size`` behind the highest is refused, as is a repeat. The
    number of nonces remembered is bounded (least recently used are forgotten), so a
    flood of fresh nonces cannot exhaust memory.
    """

    def __init__(self, size: int = DEFAULT_REPLAY_WINDOW, max_senders: int = 4096) -> None:
        self.size = size
        self.max_senders = max_senders
        self._state: OrderedDict[bytes, tuple[int, int]] = OrderedDict()

    def check_and_record(self, nonce: bytes, counter: int) -> None:
        """Raise :class:`FrameRejected` (``replayed``) if seen or too old; else record."""
        state = self._state.get(nonce)
        if state is None:
            self._state[nonce] = (counter, 1)
            if len(self._state) > self.max_senders:
                self._state.popitem(last=False)
            return
        self._state.move_to_end(nonce)
        highest, bits = state
        if counter > highest:
            shift = counter - highest
            bits = ((bits << shift) | 1) & ((1 << self.size) - 1) if shift < self.size else 1
            self._state[nonce] = (counter, bits)
            return
        offset = highest - counter
        if offset >= self.size:
            raise FrameRejected("replayed", f"counter {counter} is older than the window")
        if bits >> offset & 1:
            raise FrameRejected("replayed", f"counter {counter} was already received")
        self._state[nonce] = (highest, bits | (1 << offset))


class FrameCodec:
    """Signs outgoing frames and verifies incoming ones under one session key."""

    def __init__(
        self,
        key: bytes,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        replay_window: int = DEFAULT_REPLAY_WINDOW,
    ) -> None:
        if not isinstance(key, bytes) or len(key) < 16:
            raise ValueError("the session key must be at least 16 bytes")
        self._key = key
        self.max_frame = max_frame
        self.nonce = os.urandom(8)
        self._counter = 0
        self._replay = ReplayWindow(replay_window)

    def seal(self, body: bytes) -> bytes:
        """Prefix ``body`` with nonce and counter and sign it (a pure function of state)."""
        self._counter += 1
        signed = _PREFIX.pack(MAGIC, self.nonce, self._counter) + body
        return hmac.digest(self._key, signed, "sha256") + signed  # one-shot C HMAC

    def open(self, frame: bytes) -> tuple[bytes, bytes, int]:
        """Verify ``frame``; return ``(body, nonce, counter)`` or raise :class:`FrameRejected`."""
        size = len(frame)
        if size > self.max_frame:
            raise FrameRejected("oversized", f"{size} bytes > limit {self.max_frame}")
        if size < HEADER_SIZE:
            raise FrameRejected("truncated", f"{size} bytes < header {HEADER_SIZE}")
        signature, signed = frame[:SIGNATURE_SIZE], frame[SIGNATURE_SIZE:]
        expected = hmac.digest(self._key, signed, "sha256")
        if not hmac.compare_digest(signature, expected):
            raise FrameRejected("bad_signature", "HMAC-SHA256 does not verify")
        magic, nonce, counter = _PREFIX.unpack_from(signed)
        if magic != MAGIC:
            raise FrameRejected("malformed", f"unknown frame version {magic!r}")
        self._replay.check_and_record(nonce, counter)
        return signed[_PREFIX.size :], nonce, counter

    def seal_message(self, message: SentMessage, payload: tuple[int, bytes] | None = None) -> bytes:
        """Encode and sign an application or control message (an ``M`` frame)."""
        return self.seal(b"M" + encode_message(message, payload))

    def open_message(self, frame: bytes) -> Envelope:
        """Verify then decode a message frame (``malformed`` if the envelope is bad)."""
        body, nonce, counter = self.open(frame)
        if body[:1] != b"M":
            raise FrameRejected("malformed", f"expected a message frame, got {body[:1]!r}")
        try:
            message = decode_message(body[1:])
        except MessageError as error:
            raise FrameRejected("malformed", str(error)) from None
        return Envelope(message, nonce, counter)


def received(message: SentMessage, receiver: str) -> ReceivedMessage:
    """The message as delivered to ``receiver``."""
    return message.received_by(receiver)
