"""Bytes larger than a frame, carried in parts (docs/sessions.md, "State transfer"): an
application state, a session notice or command. The sender splits them into parts under
the frame limit and names their total size and digest; the receiver puts them back
together in order, refuses more than its limit before buffering it, and checks size and
digest before anything reads the bytes.

Why the parts come in order: each travels from one sender to one receiver over one
connection (a session notice or command) or as one member's messages to another, which
causal delivery hands over in the order they were sent.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from groupcomm.wire.frames import DEFAULT_MAX_FRAME

__all__ = ["DEFAULT_MAX_STATE", "DEFAULT_PART_SIZE", "PART_HEADROOM", "Assembly", "PartsError",
           "Reassembler", "digest", "split"]

#: the largest state (or notice) a receiver puts back together unless told otherwise
DEFAULT_MAX_STATE = 256 * 1024 * 1024
#: bytes per part: half a default frame leaves room for headers and batching
DEFAULT_PART_SIZE = DEFAULT_MAX_FRAME // 2 - 4096
#: room a part keeps under the frame limit for headers and its other fields
PART_HEADROOM = 4096
#: bytes of a BLAKE2b digest a whole carries
DIGEST_SIZE = 16
#: wholes a receiver builds at once (one per sender); the oldest is dropped beyond
MAX_ASSEMBLIES = 16


class PartsError(ValueError):
    """Parts that do not make their whole (one line); ``too_large``: past the limit."""

    def __init__(self, detail: str, *, too_large: bool = False) -> None:
        super().__init__(detail)
        self.too_large = too_large


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def split(data: bytes, part_size: int) -> list[bytes]:
    """``data`` in parts of at most ``part_size`` bytes (one, empty, for no data)."""
    if part_size < 1:
        raise ValueError(f"part size {part_size}: must be >= 1")
    return [data[i:i + part_size] for i in range(0, len(data), part_size)] or [b""]


def _mib(size: int) -> str:
    return f"{size / 1048576:.1f} MiB"


class Assembly:
    """One whole arriving in ``parts`` parts: ``size`` bytes with digest ``expected``;
    refused at once when ``size`` is past ``limit``."""

    def __init__(self, parts: int, size: int, expected: bytes, limit: int) -> None:
        if size > limit:
            raise PartsError(f"{size:,} bytes ({_mib(size)}) is more than the limit of "
                             f"{limit:,} ({_mib(limit)}; raise max_state to take it)",
                             too_large=True)
        if parts < 1 or size < 0 or len(expected) != DIGEST_SIZE or parts > size + 1:
            raise PartsError(f"a whole of {size} bytes in {parts} parts with a "
                             f"{len(expected)}-byte digest does not add up")
        self.parts, self.size, self.expected = parts, size, expected
        self._chunks: list[bytes] = []
        self.received = 0

    def add(self, index: int, chunk: bytes) -> bytes | None:
        """Part ``index``; the whole once the last part came (checked), else None."""
        if index != len(self._chunks):
            raise PartsError(f"part {index} came after {len(self._chunks)} of {self.parts}")
        if self.received + len(chunk) > self.size:
            raise PartsError(f"the parts hold more than the {self.size:,} bytes announced")
        self._chunks.append(chunk)
        self.received += len(chunk)
        if len(self._chunks) < self.parts:
            return None
        whole = b"".join(self._chunks)
        self._chunks = []
        if len(whole) != self.size:
            raise PartsError(f"{len(whole):,} bytes arrived, {self.size:,} were announced")
        if digest(whole) != self.expected:
            raise PartsError("the parts put together do not match their digest")
        return whole


@dataclass
class Reassembler:
    """Wholes arriving in parts from several senders (one whole at a time each), under
    ``limit`` bytes each and altogether: a sender's parts must not hold memory the
    others need, nor an abandoned whole stay for ever (the oldest is dropped). A
    dataclass, so that copies of a registry holding one compare by what they hold."""

    limit: int = DEFAULT_MAX_STATE
    _building: OrderedDict[Hashable, Assembly] = field(default_factory=OrderedDict)
    #: sender -> the digest of the whole refused last: its other parts are dropped
    #: without a word (the refusal said it once)
    _refused: OrderedDict[Hashable, bytes] = field(default_factory=OrderedDict)

    def part(self, sender: Hashable, fields: Mapping[str, Any]) -> bytes | None:
        """A part (``part``, ``parts``, ``size``, ``digest``, ``chunk``) from ``sender``:
        the whole when it is complete. :class:`PartsError` drops what ``sender`` had."""
        try:
            index, parts, size = fields.get("part"), fields.get("parts"), fields.get("size")
            expected, chunk = fields.get("digest"), fields.get("chunk")
            if not (all(type(v) is int for v in (index, parts, size))
                    and isinstance(expected, bytes) and isinstance(chunk, bytes)):
                raise PartsError("a part needs part, parts and size (integers), digest "
                                 "and chunk (bytes)")
            assert isinstance(index, int) and isinstance(parts, int) and isinstance(size, int)
            if index > 0 and sender not in self._building and (
                    self._refused.get(sender) == expected):
                return None
            if index == 0:
                self._refused.pop(sender, None)
                self._building.pop(sender, None)
                held = sum(a.size for a in self._building.values())
                building = Assembly(parts, size, expected, self.limit)
                if held + size > self.limit:
                    self._drop_oldest(size)
                self._building[sender] = building
                while len(self._building) > MAX_ASSEMBLIES:
                    self._building.popitem(last=False)
            building = self._building.get(sender)  # type: ignore[assignment]
            if building is None:
                raise PartsError(f"part {index} of {parts} without its first part")
            if (parts, size, expected) != (building.parts, building.size, building.expected):
                raise PartsError("a part of another whole than the one being built")
            whole = building.add(index, chunk)
        except PartsError:
            self._building.pop(sender, None)
            if isinstance(fields.get("digest"), bytes):
                self._refused[sender] = fields["digest"]
                while len(self._refused) > MAX_ASSEMBLIES:
                    self._refused.popitem(last=False)
            raise
        if whole is not None:
            del self._building[sender]
        return whole

    def _drop_oldest(self, room: int) -> None:
        """Make ``room`` bytes under the limit by dropping the oldest wholes."""
        while self._building and (sum(a.size for a in self._building.values()) + room
                                  > self.limit):
            self._building.popitem(last=False)

    def forget(self, sender: Hashable) -> None:
        self._building.pop(sender, None)

    @property
    def pending(self) -> int:
        return len(self._building)
