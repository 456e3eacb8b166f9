"""Packed batches unpacked once for the members on one poll thread: a web gateway's tabs
in one session each receive the same batch (the same bytes, each copy verified by its
member first). Each member still gets messages of its own (its name as receiver, a dict
of headers of its own); what is checked or decoded once is the msgpack, the headers and
a payload that cannot change (a string, a tuple of such, a frozen dataclass). Any other
payload is decoded again for each member, so that one member's change of it is no
other's."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

from groupcomm.core.messages import ReceivedMessage, checked_headers, received_unchecked
from groupcomm.wire.envelopes import batch_fields, checked_entry, decode_payload

#: batches kept (the latest; a batch reaches the members of a session within a turn)
KEPT = 256
_NOT_YET = object()
_ATOMS = (str, bytes, int, float, bool, type(None))


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


class _Entry:
    """One message of a batch: its checked fields, and the headers and payload once
    checked or decoded (or why they could not be)."""

    __slots__ = ("fields", "headers", "user")

    def __init__(self, fields: tuple | str) -> None:
        self.fields = fields
        self.headers: Any = _NOT_YET  # checked dict, or the error's text
        self.user: Any = _NOT_YET  # a payload every member may share


class SharedBatches:
    """The batches the members on one thread unpacked, by their bytes. Not
    thread-safe: the members using it run on one thread."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._batches: OrderedDict[bytes, tuple[str, str, str, list[_Entry]]] = OrderedDict()
        #: batches unpacked, and batches a member took already unpacked
        self.unpacked = 0
        self.reused = 0

    def unpack(self, body: bytes,
               receiver: str) -> tuple[str, str, str, list[ReceivedMessage], list[str]]:
        """:func:`~groupcomm.wire.envelopes.unpack_envelopes` of ``body`` for
        ``receiver``, the same answer, errors included."""
        found = self._batches.get(body)
        if found is None:
            app, session, sender, raw = batch_fields(body)
            found = (app, session, sender, [_Entry(checked_entry(f)) for f in raw])
            self._batches[body] = found
            if len(self._batches) > self.kept:
                self._batches.popitem(last=False)
            self.unpacked += 1
        else:
            self.reused += 1
        app, session, sender, entries = found
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
                if _immutable(user):
                    entry.user = user
            if headers:
                if entry.headers is _NOT_YET:
                    try:
                        entry.headers = checked_headers(headers)
                    except Exception as error:
                        entry.headers = f"headers of {message_id!r} malformed: {error}"
                if type(entry.headers) is str:
                    errors.append(entry.headers)
                    continue
                messages.append(received_unchecked(app, session, user, message_id, sender,
                                                   vc, kind, receiver, dict(entry.headers)))
            else:
                messages.append(received_unchecked(app, session, user, message_id, sender,
                                                   vc, kind, receiver))
        return app, session, sender, messages, errors
