"""Routed frames, the only message frames (docs/security.md, "What a frame looks like"):
``Z | msgpack destinations | msgpack seq | data``, the destinations outside the
compressed part so the server routes without inflating. ``seq`` 0: ``data`` is a packed
batch as is; 1: it starts a stream afresh; k > 1: the stream's k-th raw-deflate chunk
(``Z_SYNC_FLUSH``, its four-byte tail cut off), refused as ``stream_gap`` unless chunk
k - 1 was the last decoded. In a stream a batch goes as its difference from the one
before (:mod:`groupcomm.wire.deltas`) or, when fewer than half its bytes agree, as it
is; the first byte tells them apart (``P`` starts a batch, 0 a difference).

The members of one process that share a poll thread (a web gateway's tabs) receive the
same chunks of each stream, one copy each: :class:`SharedStreams` lets their decoders
inflate each chunk once (each member still checks its own order of chunks).
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
#: streams the decoders of one :class:`SharedStreams` have in common (least recently
#: started are dropped: their members go on with them, a newcomer starts its own)
MAX_SHARED_STREAMS = 4096
#: the last batches of a shared stream kept for the members that have not read them yet
#: (one further behind inflates its own copy of the stream from the kept chunks)
SHARED_KEPT = 64
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

    def restart_with(self, members: Sequence[str]) -> None:
        """Every stream to any of ``members`` (alone or with others) starts afresh with
        its next frame: a copy resent to one member says it may have lost a chunk of any
        of them, and would refuse every later chunk of that stream."""
        names = set(members)
        for key in [key for key in self._streams if not names.isdisjoint(key)]:
            del self._streams[key]


class _Incoming:
    __slots__ = ("decompressor", "last", "previous")

    def __init__(self) -> None:
        self.decompressor = zlib.decompressobj(-WINDOW_BITS)
        self.previous = b""  # the last batch decoded in this stream
        self.last = 0

    def take(self, data: bytes, max_body: int) -> bytes:
        """The batch of the stream's next chunk ``data``; :class:`FrameRejected` when it
        does not inflate (the stream is unusable after)."""
        try:
            inner = self.decompressor.decompress(data + _TAIL, max_body)
        except zlib.error as error:
            raise FrameRejected("malformed", f"routed frame does not inflate: {error}") \
                from None
        if self.decompressor.unconsumed_tail:
            raise FrameRejected("oversized", f"routed frame inflates to more than "
                                f"{max_body} bytes")
        self.last += 1
        if inner[:1] != PACKED:  # a difference from the batch before
            inner = restore(inner, self.previous)
        self.previous = inner
        return inner


class _Common:
    """A stream as the members sharing it received it: its chunks so far, inflated once."""

    __slots__ = ("batches", "broken", "chunks", "stream")

    def __init__(self) -> None:
        self.stream = _Incoming()
        self.chunks: list[bytes] = []  # chunk k is chunks[k - 1]
        self.batches: dict[int, bytes] = {}  # chunk number -> its batch, the last few
        self.broken = False  # a chunk did not inflate: the members go on alone

    def batch(self, seq: int, data: bytes, max_body: int) -> bytes | None:
        """Chunk ``seq``'s batch for a member that read chunks 1 .. seq - 1 of this
        stream; None when it is not kept or ``data`` is not this stream's chunk."""
        if seq == len(self.chunks) + 1 and not self.broken:
            try:
                inner = self.stream.take(data, max_body)
            except FrameRejected:
                self.broken = True
                return None  # the member's own copy says why
            self.chunks.append(data)
            self.batches[seq] = inner
            self.batches.pop(seq - SHARED_KEPT, None)
            return inner
        if seq <= len(self.chunks) and self.chunks[seq - 1] == data:
            return self.batches.get(seq)
        return None

    def replay(self, upto: int, max_body: int) -> _Incoming:
        """A stream of the member's own that read chunks 1 .. ``upto``."""
        own = _Incoming()
        for data in self.chunks[:upto]:
            own.take(data, max_body)
        return own


class _Follower:
    """A member's place in a shared stream."""

    __slots__ = ("common", "last")

    def __init__(self, common: _Common) -> None:
        self.common = common
        self.last = 0


class SharedStreams:
    """The streams that the decoders of the members on one thread have in common, by
    scope (the session and application: the members that verify with the same key),
    sender and destinations. Not thread-safe: the decoders using it run on one thread."""

    def __init__(self, max_streams: int = MAX_SHARED_STREAMS) -> None:
        self.max_streams = max_streams
        self._common: OrderedDict[tuple, _Common] = OrderedDict()
        #: chunks inflated, and chunks a member took already inflated
        self.inflated = 0
        self.reused = 0

    def start(self, key: tuple, first: bytes) -> _Common:
        """The stream whose first chunk is ``first``: the one in common if its first
        chunk is the same, else a new one."""
        common = self._common.get(key)
        if common is None or common.chunks[:1] != [first]:
            common = self._common[key] = _Common()
            self._common.move_to_end(key)
            if len(self._common) > self.max_streams:
                self._common.popitem(last=False)
        return common


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

    def __init__(self, *, max_body: int, max_streams: int = MAX_RECEIVER_STREAMS,
                 shared: SharedStreams | None = None, scope: tuple = ()) -> None:
        """``shared``: inflate each chunk once with the other decoders of ``scope``
        there (members verifying with the same key)."""
        self.max_body = max_body
        self.max_streams = max_streams
        self.shared = shared
        self.scope = scope
        self._streams: OrderedDict[tuple[bytes, tuple[str, ...]],
                                   _Incoming | _Follower] = OrderedDict()

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
                # a stream to one member has no other reader to share it with
                stream = streams[key] = _Incoming() if self.shared is None or len(dests) < 2 \
                    else _Follower(self.shared.start((self.scope, *key), bytes(data)))
                if len(streams) > self.max_streams:
                    streams.popitem(last=False)
            elif stream is None or stream.last != seq - 1:
                last = "none" if stream is None else stream.last
                raise FrameRejected("stream_gap", f"chunk {seq} of the stream to "
                                    f"{', '.join(dests)} after chunk {last}: frames were lost")
            else:
                streams.move_to_end(key)
            try:
                inner = self._take(key, stream, seq, bytes(data))
            except FrameRejected:
                del streams[key]
                raise
        if inner[:1] != PACKED:
            raise FrameRejected("malformed", "a routed frame must carry a packed batch")
        return inner

    def _take(self, key: tuple, stream: _Incoming | _Follower, seq: int, data: bytes) -> bytes:
        """Chunk ``seq``'s batch: from the shared stream when it has it, else inflated
        by the member's own copy of the stream (made from the shared one's chunks when
        the member falls too far behind or the chunk is not the shared stream's)."""
        if isinstance(stream, _Follower):
            assert self.shared is not None
            common = stream.common
            fresh = seq == len(common.chunks) + 1
            inner = common.batch(seq, data, self.max_body)
            if inner is not None:
                stream.last = seq
                if fresh:
                    self.shared.inflated += 1
                else:
                    self.shared.reused += 1
                return inner
            stream = self._streams[key] = common.replay(seq - 1, self.max_body)
        return stream.take(data, self.max_body)
