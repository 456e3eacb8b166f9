"""Routed frames, the only message frames: a packed batch compressed in a stream per
destination set, behind a head that names the destinations.

A typed keystroke is one small message, and most of its envelope repeats the one before
it: the application, session and sender names, the member names in the stamp and the
tag clock, most of their counts, the operation's name. A sender therefore keeps one
raw-deflate stream per destination set and sends each small packed batch as that stream's
next chunk (flushed with ``Z_SYNC_FLUSH``, its constant four-byte tail cut off, as
WebSocket's permessage-deflate does). Every member of a destination set receives every
frame of that set's stream, in order (a ZeroMQ connection is FIFO, and the server
forwards a member's frames in the order they came), so each receiver can keep the
matching decompressor, keyed by the sender's frame nonce and the destination set.

The body of a routed frame (kind ``Z``) is::

    Z | msgpack destinations (array of member ids) | msgpack seq (int) | data

* ``seq`` 0: ``data`` is a packed batch as is (a large batch, not worth compressing; no
  stream is touched);
* ``seq`` 1: ``data`` starts a stream afresh (the receiver drops what it kept for it);
* ``seq`` k > 1: ``data`` is the stream's k-th chunk; the receiver refuses it
  (``stream_gap``) unless chunk k - 1 was the last it decoded of that stream.

Inside a stream a batch is compressed as its byte-wise difference from the batch before
it (:mod:`groupcomm.wire.deltas`): the counts of a keystroke's stamp and tag clock that
went up become the same small values, at the same places, from one keystroke to the
next, which deflate then matches. A batch that has little in common with the one before
(fewer than half its bytes equal) goes as it is; the receiver tells the two apart by the
first byte (a batch starts with ``P``, a difference with 0).

The destinations travel outside the compressed part so that the server can route the
frame by itself (it verifies the signature, then reads the head, and never inflates
anything). A stream starts afresh every :data:`RESTART_EVERY` chunks, when it is evicted
from the sender's bounded table, and when its sender asks (:meth:`StreamEncoder.restart`:
it came back after the server lost it, or as a new member, and frames it had compressed
may never have arrived), so a frame lost on the way costs at most the rest of one
stream's round, and is reported.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Sequence

import msgpack

from groupcomm.wire.deltas import difference, restore
from groupcomm.wire.envelopes import PACKED
from groupcomm.wire.frames import ROUTED, FrameRejected

#: raw deflate with a 1 KiB window: a keystroke's envelope finds its predecessor well
#: within it, and a stream costs some 6 KiB to send and 8 KiB to receive
WINDOW_BITS = 10
MEMORY_LEVEL = 2
#: level 6 (zlib's default) compresses these small bodies no better than 1 and is slower
LEVEL = 1
#: packed batches larger than this travel uncompressed (``seq`` 0): batches of a burst are
#: rare, large, and cost more CPU to deflate than they save on a local network
COMPRESS_LIMIT = 4096
#: every stream starts afresh after this many chunks
RESTART_EVERY = 256
#: streams a sender keeps (least recently used are dropped: their next frame restarts)
MAX_SENDER_STREAMS = 32
#: streams a receiver keeps (least recently used are dropped)
MAX_RECEIVER_STREAMS = 1024
_TAIL = b"\x00\x00\xff\xff"
_ROUTED_HEAD = ROUTED


class _Outgoing:
    __slots__ = ("compressor", "previous", "sent")

    def __init__(self) -> None:
        self.compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -WINDOW_BITS, MEMORY_LEVEL)
        self.previous = b""  # the last batch sent in this stream
        self.sent = 0


class StreamEncoder:
    """The sending side: turns packed batches into routed bodies, one stream per
    destination set."""

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
        head = _ROUTED_HEAD + self._pack(key)
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
            # little in common with the batch before (another kind of message): as it
            # is, so that deflate may still find its parts in earlier batches. It starts
            # with its kind, "P"; a difference starts with 0 ("P" minus "P")
            inner = body
        stream.previous = body
        compressor = stream.compressor
        data = compressor.compress(inner) + compressor.flush(zlib.Z_SYNC_FLUSH)
        return head + self._pack(stream.sent) + data[:-4]

    def restart(self) -> None:
        """Every stream starts afresh with its next frame."""
        self._streams.clear()


class _Incoming:
    __slots__ = ("decompressor", "last", "previous")

    def __init__(self) -> None:
        self.decompressor = zlib.decompressobj(-WINDOW_BITS)
        self.previous = b""  # the last batch decoded in this stream
        self.last = 0


def _short_head(body: bytes) -> tuple[tuple[str, ...], int, int] | None:
    """:func:`routed_head` for the usual head (at most 15 destinations, each a short
    string, and a chunk number below 65,536), read without a msgpack unpacker (every
    routed frame on both the server and its receivers goes through here); None for any
    other head."""
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
        """The packed batch of the routed ``body`` from the sender whose frames carry
        ``nonce``. Raises :class:`FrameRejected`: ``stream_gap`` when a chunk before
        this one did not arrive (this one cannot be decoded), ``oversized`` or
        ``malformed`` otherwise."""
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
