"""The messages of a routed stream, each sent as its difference from the one before.

Within one stream (:mod:`groupcomm.wire.streams`) a receiver has decoded every earlier
message, so a message whose envelope has the same *shape* as the previous one's travels
as the differences of its integers only. The shape of a message is everything in its
envelope but the integers: the sender's name in its id, its destinations, its kind, and
its stamp (the module's headers) and tag clock with every integer taken out. Under a
vector or matrix clock the shape stays the same from one message to the next (until a
member joins or leaves), and most differences are 0 or 1, one byte each, which deflate
then squeezes further: a keystroke's stamp and tag clock, some 54 bytes, become a few.
Modules whose headers change shape (``ks`` sends what changed since the last message to
that destination) fall back to whole envelopes, which deflate still shortens.

A ``P`` body's messages are ``(message_id, dests, kind, headers, vc, fmt, payload)``
(see :mod:`groupcomm.wire.envelopes`). In a stream, a message may instead be the triple
``(deltas, fmt, payload)``: ``deltas`` are the integers of ``(id number, headers, vc)``
minus the previous message's, in the same order. Both sides work on the msgpack-decoded
form (arrays as tuples), so they see the same shapes.
"""

from __future__ import annotations

from typing import Any

from groupcomm.wire.frames import FrameRejected

_HOLE = object()  # where an integer was, in a shape


def _split(value: Any, ints: list[int]) -> Any:
    """``value`` with its integers (not booleans) moved to ``ints``, in order."""
    kind = type(value)
    if kind is int:
        ints.append(value)
        return _HOLE
    if kind is tuple:
        return tuple([_split(item, ints) for item in value])
    if kind is dict:
        return tuple([(key, _split(item, ints)) for key, item in value.items()]), dict
    return value


def _fill(shape: Any, ints: list[int], at: list[int]) -> Any:
    """Inverse of :func:`_split`: the integers put back in order."""
    if shape is _HOLE:
        value = ints[at[0]]
        at[0] += 1
        return value
    if type(shape) is tuple:
        if len(shape) == 2 and shape[1] is dict:
            return {key: _fill(item, ints, at) for key, item in shape[0]}
        return tuple([_fill(item, ints, at) for item in shape])
    return shape


def _id_parts(message_id: Any) -> tuple[Any, int | None]:
    """``("alice#", 17)`` for ``"alice#17"``; ``(message_id, None)`` for any other id."""
    if type(message_id) is str:
        prefix, mark, number = message_id.rpartition("#")
        if mark and number.isdigit() and number[0] != "0" and len(number) < 19:
            return prefix + mark, int(number)
    return message_id, None


class _Previous:
    __slots__ = ("ints", "key")

    def __init__(self, key: tuple[Any, ...], ints: list[int]) -> None:
        self.key = key
        self.ints = ints


def _describe(entry: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[int]] | None:
    """``(shape key, integers)`` of a whole message entry, or None when it has no usable
    shape (an id without a number)."""
    message_id, dests, kind, headers, vc, fmt, payload = entry
    prefix, number = _id_parts(message_id)
    if number is None:
        return None
    ints = [number]
    shape = _split((headers, vc), ints)
    return (prefix, dests, kind, shape), ints


class DeltaEncoder:
    """The sending side of one stream."""

    def __init__(self) -> None:
        self._previous: _Previous | None = None

    def reset(self) -> None:
        """The next message travels whole."""
        self._previous = None

    def encode(self, entries: tuple[Any, ...]) -> list[Any]:
        """The entries of a decoded ``P`` body, each as a delta where it can be."""
        out: list[Any] = []
        previous = self._previous
        for entry in entries:
            if type(entry) is not tuple or len(entry) != 7:  # not ours to judge: as is
                out.append(entry)
                previous = None
                continue
            described = _describe(entry)
            if described is None:
                out.append(entry)
                previous = None
                continue
            key, ints = described
            if previous is not None and previous.key == key:
                out.append(([now - before for now, before in zip(ints, previous.ints, strict=True)],
                            entry[5], entry[6]))
            else:
                out.append(entry)
            previous = _Previous(key, ints)
        self._previous = previous
        return out


class DeltaDecoder:
    """The receiving side of one stream."""

    def __init__(self) -> None:
        self._previous: _Previous | None = None

    def reset(self) -> None:
        """The next message arrives whole."""
        self._previous = None

    def decode(self, entries: tuple[Any, ...]) -> list[Any]:
        """Whole entries again; raises :class:`FrameRejected` (``malformed``) for a delta
        with nothing (or something of another length) before it."""
        out: list[Any] = []
        previous = self._previous
        for entry in entries:
            if type(entry) is tuple and len(entry) == 3:
                deltas, fmt, payload = entry
                if previous is None:
                    raise FrameRejected("malformed", "a message sent as a difference, with "
                                        "no message before it in its stream")
                if type(deltas) is not tuple or len(deltas) != len(previous.ints) or not all(
                        type(d) is int for d in deltas):
                    raise FrameRejected("malformed", "a message's differences do not match "
                                        "the message before it")
                ints = [d + before for d, before in zip(deltas, previous.ints, strict=True)]
                prefix, dests, kind, shape = previous.key
                headers, vc = _fill(shape, ints, [1])
                entry = (f"{prefix}{ints[0]}", dests, kind, headers, vc, fmt, payload)
                previous = _Previous(previous.key, ints)
                out.append(entry)
                continue
            out.append(entry)
            described = (_describe(entry) if type(entry) is tuple and len(entry) == 7
                         else None)
            previous = None if described is None else _Previous(*described)
        self._previous = previous
        return out
