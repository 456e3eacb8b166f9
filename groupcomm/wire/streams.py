"""Routed frames, the only message frames (docs/security.md, "What a frame looks like"):
``Z | msgpack destinations | msgpack seq | data``, the destinations outside the
compressed part so the server routes without inflating. ``seq`` 0: ``data`` is a packed
batch as is; 1: it starts a stream afresh; k > 1: the stream's k-th raw-deflate chunk
(``Z_SYNC_FLUSH``, its four-byte tail cut off), refused as ``stream_gap`` unless chunk
k - 1 was the last decoded. In a stream a batch goes as its difference from the one
before (:mod:`groupcomm.wire.deltas`) or, when fewer than half its bytes agree, as it
is; the first byte tells them apart (``P`` starts a batch, 0 a difference).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Sequence

import msgpack

from groupcomm.wire.deltas import difference, restore
from groupcomm.wire.envelopes import PACKED
from groupcomm.wire.frames import ROUTED, FrameRejected

#: a 1 KiB window: a keystroke finds its predecessor in it; a stream costs some 6 KiB to
#: send and 8 KiB to receive
WINDOW_BITS = 10
MEMORY_LEVEL = 2
#: level 6 (zlib's default) compresses these small bodies no better than 1 and is slower
LEVEL = 1
#: larger packed batches travel uncompressed (``seq`` 0): deflating them costs more CPU
#: than it saves on a local network
COMPRESS_LIMIT = 4096
#: every stream starts afresh after this many chunks
RESTART_EVERY = 256
#: streams a sender keeps (least recently used are dropped: their next frame restarts)
MAX_SENDER_STREAMS = 32
#: streams a receiver keeps (least recently used are dropped)
MAX_RECEIVER_STREAMS = 1024
_TAIL = b"\x00\x00\xff\xff"


class _Outgoing:
    __slots__ = ("compressor", "previous", "sent")

    def __init__(self) -> None:
        self.compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -WINDOW_BITS, MEMORY_LEVEL)
        self.previous = b""  # the last batch sent in this stream
        self.sent = 0


class StreamEncoder:
    """The sending side: packed batches into routed bodies, one stream per destination set."""

    def __init__(self, *, compress: bool = True, max_streams: int = MAX_SENDER_STREAMS,
                 restart_every: int = RESTART_EVERY,
                 compress_limit: int = COMPRESS_LIMIT) -> None:
        self.compress = compress
        self.max_streams = max_streams
        self.restart_every = restart_every
        self.compress_limit = compress_limit
        self._streams: OrderedDict[tuple[str, ...], _Outgoing] = OrderedDict()
        self._pack = msgpack.Packer(use_bin_type=True).pack

    def wrap(self, dests: Sequence[str], body: bytes) -> bytes:
        """The routed body carrying the packed batch ``body`` to ``dests``."""
        key = tuple(dests)
        head = ROUTED + self._pack(key)
        if not self.compress or len(body) > self.compress_limit:
            return head + b"\x00" + body
        streams = self._streams
        stream = streams.get(key)
        if stream is None or stream.sent >= self.restart_every:
            stream = streams[key] = _Outgoing()
            if len(streams) > self.max_streams:
                streams.popitem(last=False)
        else:
            streams.move_to_end(key)
        stream.sent += 1
        inner = difference(body, stream.previous)
        if inner.count(0) * 2 < len(inner):
            # little in common with the batch before: as it is, so that deflate may still
            # find its parts in earlier batches
            inner = body
        stream.previous = body
        compressor = stream.compressor
        data = compressor.compress(inner) + compressor.flush(zlib.Z_SYNC_FLUSH)
        return head + self._pack(stream.sent) + data[:-4]

    def restart(self) -> None:
        """Every stream starts afresh with its next frame."""
        self._streams.clear()

    def restart_for(self, dests: Sequence[str]) -> None:
        """The stream to ``dests`` starts afresh with its next frame."""
        self._streams.pop(tuple(dests), None)


class _Incoming:
    __slots__ = ("decompressor", "last", "previous")

    def __init__(self) -> None:
        self.decompressor = zlib.decompressobj(-WINDOW_BITS)
        self.previous = b""  # the last batch decoded in this stream
        self.last = 0


def _short_head(body: bytes) -> tuple[tuple[str, ...], int, int] | None:
    """:func:`routed_head` for the usual head (up to 15 short destinations, a chunk number
    below 65,536) without a msgpack unpacker (every routed frame comes here); else None."""
    try:
        count = body[1] - 0x90
        if not 0 < count < 16:
            return None
        at = 2
        dests = []
        for _ in range(count):
            size = body[at] - 0xA0
            if not 0 < size < 32:
                return None
            at += 1
            dests.append(body[at:at + size].decode("utf-8"))
            at += size
        code = body[at]
        if code < 0x80:
            return tuple(dests), code, at + 1
        if code == 0xCC:
            return tuple(dests), body[at + 1], at + 2
        if code == 0xCD:
            return tuple(dests), body[at + 1] << 8 | body[at + 2], at + 3
    except (IndexError, UnicodeDecodeError):
        return None
    return None


def routed_head(body: bytes) -> tuple[tuple[str, ...], int, int]:
    """``(destinations, seq, offset of the data)`` of a verified routed body; raises
    :class:`FrameRejected` (``malformed``) on a bad shape."""
    short = _short_head(body)
    if short is not None:
        return short
    unpacker = msgpack.Unpacker(raw=False, use_list=False, max_buffer_size=len(body))
    unpacker.feed(memoryview(body)[1:])
    try:
        dests = unpacker.unpack()
        seq = unpacker.unpack()
    except Exception as error:  # msgpack raises several unrelated types
        raise FrameRejected("malformed", f"routed frame head is not msgpack: {error}") from None
    if type(dests) is not tuple or not dests or not all(type(d) is str and d for d in dests):
        raise FrameRejected("malformed", "a routed frame's destinations must be a non-empty "
                            "array of member ids")
    if type(seq) is not int or seq < 0:
        raise FrameRejected("malformed", f"a routed frame's chunk number must be an integer "
                            f">= 0, not {seq!r}")
    return dests, seq, 1 + unpacker.tell()


class StreamDecoder:
    """The receiving side: the packed batch inside a verified routed body."""

    def __init__(self, *, max_body: int, max_streams: int = MAX_RECEIVER_STREAMS) -> None:
        self.max_body = max_body
        self.max_streams = max_streams
        self._streams: OrderedDict[tuple[bytes, tuple[str, ...]], _Incoming] = OrderedDict()

    def unwrap(self, nonce: bytes, body: bytes) -> bytes:
        """The packed batch of a routed ``body`` from the sender of ``nonce``. Raises
        :class:`FrameRejected`: ``stream_gap`` (a chunk before it was lost), ``oversized``
        or ``malformed``."""
        dests, seq, offset = routed_head(body)
        data = memoryview(body)[offset:]
        if seq == 0:
            inner = bytes(data)
        else:
            key = (nonce, dests)
            streams = self._streams
            stream = streams.get(key)
            if seq == 1:
                stream = streams[key] = _Incoming()
                if len(streams) > self.max_streams:
                    streams.popitem(last=False)
            elif stream is None or stream.last != seq - 1:
                last = "none" if stream is None else stream.last
                raise FrameRejected("stream_gap", f"chunk {seq} of the stream to "
                                    f"{', '.join(dests)} after chunk {last}: frames were lost")
            else:
                streams.move_to_end(key)
            try:
                inner = stream.decompressor.decompress(bytes(data) + _TAIL, self.max_body)
            except zlib.error as error:
                del streams[key]
                raise FrameRejected("malformed", f"routed frame does not inflate: {error}") \
                    from None
            if stream.decompressor.unconsumed_tail:
                del streams[key]
                raise FrameRejected("oversized", f"routed frame inflates to more than "
                                    f"{self.max_body} bytes")
            stream.last = seq
            if inner[:1] != PACKED:  # a difference from the batch before
                inner = restore(inner, stream.previous)
            stream.previous = inner
        if inner[:1] != PACKED:
            raise FrameRejected("malformed", "a routed frame must carry a packed batch")
        return inner
