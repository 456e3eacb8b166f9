"""Message envelopes, msgpack (never dill; the payload is :mod:`groupcomm.wire.payload`'s).
Packed batches (:func:`pack_envelopes`, :func:`unpack_envelopes`) are what communicators
send inside routed frames; a single message's envelope (:func:`encode_message`,
:func:`decode_received`) is what the in-process hosts pass, never in a frame.
"""

from __future__ import annotations

import dataclasses
import pickle
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import msgpack

from groupcomm.core.headers import decode_headers, encode_headers
from groupcomm.core.messages import (
    ControlMessage,
    MessageError,
    ReceivedMessage,
    SentMessage,
    SystemMessage,
    checked_headers,
    received_unchecked,
)
from groupcomm.wire.payload import (
    PAYLOAD_CONTROL,
    PAYLOAD_MSGPACK,
    PAYLOAD_PICKLE,
    dump_payload,
    load_payload,
    load_plain,
)

_local = threading.local()
_NOT_YET = object()
_ATOMS = (str, bytes, int, float, bool, type(None))


def _packer() -> msgpack.Packer:
    """This thread's msgpack packer (reusing one halves the cost of a small envelope)."""
    try:
        return _local.packer
    except AttributeError:
        _local.packer = msgpack.Packer(use_bin_type=True)
        return _local.packer


def _payload(user: Any) -> tuple[int, bytes]:
    """``(format, bytes)`` of a message's payload; ``MessageError`` if it cannot travel."""
    if isinstance(user, ControlMessage):
        return PAYLOAD_CONTROL, _packer().pack((user.protocol, user.kind, user.about))
    if isinstance(user, SystemMessage) and not user.travels_pickled:
        raise MessageError(f"{type(user).__name__} does not travel on the wire")
    return dump_payload(user)


def encode_message(message: SentMessage) -> bytes:
    """The msgpack envelope of ``message``."""
    fmt, data = _payload(message.user_message)
    return _packer().pack((message.application_name, message.session_name, message.message_id,
                           message.sender, message.destinations, message.kind,
                           encode_headers(message.headers), message.vc, fmt, data))


def decode_message(data: bytes) -> SentMessage:
    """Inverse of :func:`encode_message`; raises ``MessageError`` on a bad shape."""
    message = _decode(data, None)
    assert isinstance(message, SentMessage)
    return message


def decode_received(data: bytes, receiver: str) -> ReceivedMessage:
    """The :class:`ReceivedMessage` ``receiver`` gets from an envelope; ``MessageError`` on
    a bad shape or when ``receiver`` is not a destination."""
    message = _decode(data, receiver)
    assert isinstance(message, ReceivedMessage)
    return message


def _load(fmt: int, payload: bytes) -> Any:
    """The object a verified payload carries: ``MessageError`` for an unknown format,
    whatever its decoder raises for bad bytes."""
    if fmt == PAYLOAD_CONTROL:
        protocol, kind, about = msgpack.unpackb(payload, raw=False)
        return ControlMessage(protocol=protocol, kind=kind, about=about)
    return load_payload(fmt, payload)


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
    try:
        user = _load(fmt, payload)
    except MessageError:
        raise
    except Exception as error:
        raise MessageError(f"payload (format {fmt!r}) does not decode: {error!r}") from None
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
            return received_unchecked(app, session, user, message_id, sender, vc, kind,
                                      receiver)
        return ReceivedMessage(
            application_name=app, session_name=session, user_message=user,
            message_id=message_id, sender=sender, headers=decoded_headers, vc=vc,
            kind=kind, receiver=receiver)
    return SentMessage(
        application_name=app, session_name=session, user_message=user,
        message_id=message_id, sender=sender, headers=decoded_headers, vc=vc, kind=kind,
        destinations=dests)


# Packed batches: ``P`` then one msgpack document, ``[application, session, sender, [[message_id,
# destinations, kind, headers, vc, payload_format, payload], ...]]``: one msgpack call
# decodes a batch, and the shared fields are checked once. ``headers`` is a map inside
# the document; the kind ``"normal"`` travels as 0.

#: the first byte of a packed batch
PACKED = b"P"

#: one message packed in advance: ``((application, session, sender), packed array)`` (a
#: message held by an injected delay waits as this, serialized when it was transmitted)
PackedEnvelope = tuple[tuple[str, str, str], bytes]

#: the kind of (nearly) every message; 0 in a packed batch
NORMAL = "normal"

_PACKED_HEAD = PACKED + b"\x94"  # then a fixed 4-element msgpack array


class PayloadTooLarge(MessageError):
    """A message whose envelope is larger than a frame may carry."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size:,} bytes packed, more than the {limit:,} a frame may carry "
                         "(max_frame)")


def pack_envelope(message: SentMessage) -> PackedEnvelope:
    """One message as a :data:`PackedEnvelope` (``MessageError`` if it cannot travel)."""
    fmt, data = _payload(message.user_message)
    return ((message.application_name, message.session_name, message.sender),
            _packer().pack((message.message_id, message.destinations,
                            0 if message.kind == NORMAL else message.kind,
                            dict(message.headers), message.vc, fmt, data)))


def pack_envelopes(items: Iterable[SentMessage | PackedEnvelope], budget: int,
                   on_error: Any = None, limit: int | None = None) -> Iterator[bytes]:
    """Packed batches carrying ``items`` in order (the send path of every message).

    Consecutive messages of the same application, session and sender share a body of at
    most ``budget`` bytes (a larger message travels alone). ``on_error(message, error)``
    is called for a message that cannot be serialized or packs to more than ``limit``
    bytes (raised when it is None): the message is left out, or replaced by what it
    returns.
    """
    packer = _packer()
    pack = packer.pack
    dumps, highest = pickle.dumps, pickle.HIGHEST_PROTOCOL
    parts: list[bytes] = []
    size = 0
    app = session = sender = None
    for item in items:
        if type(item) is tuple:  # packed in advance (see PackedEnvelope)
            (item_app, item_session, item_sender), packed = item
        else:
            message: SentMessage = item  # type: ignore[assignment]
            user = message.user_message
            try:
                if isinstance(user, SystemMessage):
                    packed = pack_envelope(message)[1]
                else:
                    if type(user) is tuple:  # perhaps plain: msgpack (see dump_payload)
                        fmt, data = dump_payload(user)
                    else:  # dump_payload, inlined for the common case (pickle works)
                        try:
                            data = dumps(user, highest)
                            fmt = PAYLOAD_PICKLE
                        except (pickle.PicklingError, TypeError, AttributeError):
                            fmt, data = dump_payload(user)
                        else:
                            if b"__main__" in data:
                                fmt, data = dump_payload(user)
                    headers = message.headers
                    kind = message.kind
                    packed = pack((message.message_id, message.destinations,
                                   0 if kind == NORMAL else kind,
                                   headers if type(headers) is dict else dict(headers),
                                   message.vc, fmt, data))
                if limit is not None and len(packed) > limit:
                    raise PayloadTooLarge(len(packed), limit)
            except Exception as error:
                if on_error is None:
                    raise
                replacement = on_error(message, error)
                if replacement is None:
                    continue
                packed = pack_envelope(replacement)[1]
            item_app = message.application_name
            item_session = message.session_name
            item_sender = message.sender
        if parts and (size + len(packed) > budget or item_sender != sender
                      or item_app != app or item_session != session):
            yield _packed_body(packer, app, session, sender, parts)  # type: ignore[arg-type]
            parts, size = [], 0
        app, session, sender = item_app, item_session, item_sender
        parts.append(packed)
        size += len(packed)
    if parts:
        yield _packed_body(packer, app, session, sender, parts)  # type: ignore[arg-type]


def _packed_body(packer: msgpack.Packer, app: str, session: str, sender: str,
                 parts: list[bytes]) -> bytes:
    # a msgpack array is its header then its elements: messages packed one by one (sized
    # exactly, for the budget) join into one document
    pack = packer.pack
    return b"".join((_PACKED_HEAD, pack(app), pack(session), pack(sender),
                     packer.pack_array_header(len(parts)), *parts))


def unpack_envelopes(body: bytes,
                     receiver: str) -> tuple[str, str, str, list[ReceivedMessage], list[str]]:
    """``(application, session, sender, messages, errors)`` of a verified packed batch for
    ``receiver``: a bad message, or one not addressed to it, is left out and described
    in ``errors``. Raises ``MessageError`` when the body as a whole is malformed."""
    return messages_for(read_batch(body), receiver, share=False)


class BatchEntry:
    """One message of a batch: its checked fields (or what is wrong with them), and its
    headers and payload once checked or decoded (or why they could not be), kept for
    the next receiver of the same batch."""

    __slots__ = ("fields", "headers", "user")

    def __init__(self, fields: tuple | str) -> None:
        self.fields = fields
        self.headers: Any = _NOT_YET  # checked dict, or the error's text
        self.user: Any = _NOT_YET  # a payload every receiver may share


#: a batch read once: ``(application, session, sender, entries)``
Batch = tuple[str, str, str, list[BatchEntry]]


def read_batch(body: bytes) -> Batch:
    """A verified packed batch's fields, each entry's checked; ``MessageError`` when the
    body as a whole is malformed."""
    app, session, sender, raw = batch_fields(body)
    return app, session, sender, [BatchEntry(checked_entry(fields)) for fields in raw]


def messages_for(batch: Batch, receiver: str,
                 share: bool) -> tuple[str, str, str, list[ReceivedMessage], list[str]]:
    """:func:`unpack_envelopes`' answer for ``receiver`` from a batch read once. With
    ``share``, a payload that cannot change is kept in its entry for the next receiver;
    any other is decoded for each, so that one receiver's change of it is no other's.
    Each receiver gets headers of its own (a copy of the checked ones)."""
    app, session, sender, entries = batch
    messages: list[ReceivedMessage] = []
    errors: list[str] = []
    for entry in entries:
        fields = entry.fields
        if type(fields) is str:
            errors.append(fields)
            continue
        message_id, dests, kind, headers, vc, fmt, payload = fields
        if receiver not in dests:  # before deserializing anything of it
            errors.append(f"{message_id!r} is not addressed to {receiver!r}")
            continue
        user = entry.user
        if user is _NOT_YET:
            try:
                user = decode_payload(fmt, payload)
            except Exception as error:
                errors.append(f"payload of {message_id!r} does not decode: {error!r}")
                continue
            if share and _immutable(user):
                entry.user = user
        if not headers:  # the common case: every field is checked above
            messages.append(received_unchecked(app, session, user, message_id, sender, vc,
                                               kind, receiver))
            continue
        if entry.headers is _NOT_YET:
            try:
                entry.headers = checked_headers(headers)
            except Exception as error:
                entry.headers = f"headers of {message_id!r} malformed: {error}"
        if type(entry.headers) is str:
            errors.append(entry.headers)
            continue
        own = dict(entry.headers) if share else entry.headers
        messages.append(received_unchecked(app, session, user, message_id, sender, vc,
                                           kind, receiver, own))
    return app, session, sender, messages, errors


def _immutable(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` cannot change: atoms, tuples of such and frozen dataclasses of
    such (a few levels deep; deeper is taken as changeable)."""
    if type(value) in _ATOMS:
        return True
    if depth > 4:
        return False
    if type(value) is tuple:
        return all(_immutable(item, depth + 1) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        params = getattr(type(value), "__dataclass_params__", None)
        return bool(params is not None and params.frozen) and all(
            _immutable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


def batch_fields(body: bytes) -> tuple[str, str, str, tuple]:
    """``(application, session, sender, entries)`` of a verified packed batch, the
    entries unchecked; ``MessageError`` when the body as a whole is malformed."""
    try:
        value = msgpack.unpackb(memoryview(body)[1:], raw=False, use_list=False,
                                strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types
        raise MessageError(f"batch is not msgpack: {error}") from None
    if type(value) is not tuple or len(value) != 4:
        raise MessageError("a packed batch must be a 4-element array")
    app, session, sender, entries = value
    if type(app) is not str or type(session) is not str:
        raise MessageError("batch application and session must be strings")
    if type(sender) is not str or not sender:
        raise MessageError("sender must be a non-empty string")
    if type(entries) is not tuple:
        raise MessageError("batch messages must be an array")
    return app, session, sender, entries


def checked_entry(fields: Any) -> tuple | str:
    """A batch entry's ``(message_id, dests, kind, headers, vc, fmt, payload)`` with
    every field but the headers and payload checked, or what is wrong with it."""
    if type(fields) is not tuple or len(fields) != 7:
        return "a packed message must be a 7-element array"
    message_id, dests, kind, headers, vc, fmt, payload = fields
    if kind == 0 and type(kind) is int:
        kind = NORMAL
    if (type(message_id) is not str or not message_id or type(kind) is not str
            or type(headers) is not dict
            or type(payload) is not bytes
            or type(dests) is not tuple or type(vc) is not tuple):
        return _shape_error(message_id, kind, headers, payload, dests)
    for pair in vc:  # a loop, not all(<generator>): this runs for every message
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or (
            type(pair[1]) is not int
        ):
            return "envelope vector clock must be (name, int) pairs"
    return message_id, dests, kind, headers, vc, fmt, payload


def decode_payload(fmt: Any, payload: bytes) -> Any:
    """An entry's payload (of a verified batch: pickles too)."""
    if fmt == PAYLOAD_PICKLE:
        return pickle.loads(payload)
    if fmt == PAYLOAD_MSGPACK:
        return load_plain(payload)
    return _load(fmt, payload)


def _shape_error(message_id: Any, kind: Any, headers: Any, payload: Any, dests: Any) -> str:
    if type(message_id) is not str or not message_id:
        return "message_id must be a non-empty string"
    if type(kind) is not str:
        return "envelope field kind must be a string"
    if type(headers) is not dict:
        return "envelope headers must be a map"
    if type(payload) is not bytes:
        return "envelope payload must be bytes"
    if type(dests) is not tuple:
        return "envelope destinations must be an array"
    return "envelope vector clock must be (name, int) pairs"
