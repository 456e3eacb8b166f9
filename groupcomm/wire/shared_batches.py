"""Packed batches unpacked once for the members on one poll thread: a web gateway's tabs
in one session each receive the same batch (the same bytes, each copy verified by its
member first). Each member still gets messages of its own (its name as receiver, a dict
of headers of its own); what is checked or decoded once is the msgpack, the headers and
a payload that cannot change (a string, a tuple of such, a frozen dataclass). Any other
payload is decoded again for each member, so that one member's change of it is no
other's (:func:`~groupcomm.wire.envelopes.messages_for`)."""

from __future__ import annotations

from collections import OrderedDict

from groupcomm.core.messages import ReceivedMessage
from groupcomm.wire.envelopes import Batch, messages_for, read_batch

#: batches kept (the latest; a batch reaches the members of a session within a turn)
KEPT = 256


class SharedBatches:
    """The batches the members on one thread unpacked, by their bytes. Not
    thread-safe: the members using it run on one thread."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._batches: OrderedDict[bytes, Batch] = OrderedDict()
        #: batches unpacked, and batches a member took already unpacked
        self.unpacked = 0
        self.reused = 0

    def unpack(self, body: bytes,
               receiver: str) -> tuple[str, str, str, list[ReceivedMessage], list[str]]:
        """:func:`~groupcomm.wire.envelopes.unpack_envelopes` of ``body`` for
        ``receiver``, the same answer, errors included."""
        batch = self._batches.get(body)
        if batch is None:
            batch = self._batches[body] = read_batch(body)
            if len(self._batches) > self.kept:
                self._batches.popitem(last=False)
            self.unpacked += 1
        else:
            self.reused += 1
        return messages_for(batch, receiver, share=True)
