"""``matrix-delta``: the ``matrix`` protocol with compressed stamps (beyond the sources).

The rules are exactly those of :mod:`filters.matrix` (Raynal, Schiper and Toueg, in the
"increment, then attach" form that makes multicasts correct); only the metadata
differs. Instead of the whole SENT matrix, the copy of a message for destination d
carries (header ``D``) only the entries of SENT that changed since the sender's
previous message to d — always including ``SENT[sender][d]``, which the send itself
just incremented. A multicast is therefore split into one copy per destination, each
with its own delta.

**Why the receiver needs nothing more.** Write m' for the previous message from j to i
and SENT_m, SENT_m' for the sender's matrices attached to them; entries absent from the
delta of m are equal in SENT_m and SENT_m'. The matrix rule delivers messages of one
pair in send order (``DELIV_i[j] == SENT_m[j][i] - 1``), so when m becomes deliverable
m' has been delivered and merged: ``SENT_i >= SENT_m'`` entrywise and, for every k,
``DELIV_i[k] >= SENT_m'[k][i]``. Hence

* the deliverability test of the full stamp holds iff it holds on the delta entries
  (the others were already satisfied for m'), and
* ``max(SENT_i, SENT_m) == max(SENT_i, delta)``.

So the receiver applies a delta *when it delivers the message*, never when it receives
it, and keeps no per-sender copy of anyone's matrix; its state is the matrix module's.

**Link requirements.** Because deltas are applied at delivery, in the per-pair order the
protocol enforces anyway, the module does *not* depend on links being FIFO: frames may
overtake one another (the simulator's ``jitter_ms``, the model checker) and delivery
stays causal — the tests check this. It does rely on what the matrix module relies on,
**reliable links**: every message sent to us must eventually arrive. A lost message
blocks later ones from the same sender (as in ``matrix``); and if the application then
skips it with :meth:`MatrixManager.release_waiting_on`, the entries that only the lost
message carried are never merged, so this member's later stamps may understate what it
knows — causality towards third parties is then no longer guaranteed, and the module
logs a warning saying so. A delta that is malformed (no entry for the message itself) is
refused with :class:`~groupcomm.core.causality.ProtocolViolation`, as in ``matrix``.

**Bookkeeping at the sender.** The version counts this member's sends. Every change of
an entry of SENT is marked with the version of the next send (the one whose stamps
must carry it) and moves that entry to the end of an insertion-ordered dict; the delta
for d is read backwards from the end of that dict down to the version of the last send
to d, so it costs the size of the delta, not of the matrix. Changes between two sends
share a version because a delta takes all of them or none: their order is never read,
and the snapshot lists them by (version, row, column), so that renaming the members
(the model checker's symmetry reduction) or changing the order of deliveries between two
sends leaves no trace in the state. The first message to a destination still carries
the whole (non-zero) matrix: the saving comes from pairs that talk repeatedly.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from groupcomm.filters.matrix import MatrixManager
from groupcomm.module_kit import (
    CausalityModule,
    FilterHost,
    SentMessage,
    encode_matrix,
    freeze_clock,
    freeze_matrix,
    with_header_unchecked,
)

log = logging.getLogger(__name__)

NAME = "matrix-delta"
STAMP = "D"

Matrix = dict[str, dict[str, int]]


def _change_order(change: tuple[tuple[str, str], int]) -> tuple[int, str, str]:
    (row, column), version = change
    return version, row, column


class MatrixDeltaManager(MatrixManager):
    """SENT, DELIV and the buffer (as in ``matrix``) plus per-destination versions."""

    stamp_header = STAMP
    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        #: (row, column) -> version of the send its last change is due to travel with,
        #: in order of last change
        self.changes: dict[tuple[str, str], int] = {}
        #: the number of sends stamped so far
        self.version = 0
        #: destination -> version of the last send stamped for it
        self.last_to: dict[str, int] = {}

    def _changed(self, row: str, column: str) -> None:
        key = (row, column)
        changes = self.changes
        if key in changes:
            del changes[key]
        changes[key] = self.version + 1

    def delta_for(self, dest: str) -> Matrix:
        """Entries of SENT changed since the last message stamped for ``dest``."""
        base = self.last_to.get(dest, 0)
        sent = self.sent
        delta: Matrix = {}
        for (row, column), version in reversed(self.changes.items()):
            if version <= base:
                break
            delta.setdefault(row, {})[column] = sent[row][column]
        return delta

    # -- send side ----------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Count the send in SENT and attach each destination's delta."""
        for copy in self.stamp_copies(message):
            self.send_downstream(copy)

    def stamp_copies(self, message: SentMessage) -> list[SentMessage]:
        """One copy per destination, each carrying its delta."""
        me = self.host.name
        row = self.sent.setdefault(me, {})
        for dest in message.destinations:
            row[dest] = row.get(dest, 0) + 1
            self._changed(me, dest)
        self.version += 1
        copies = []
        split = len(message.destinations) > 1
        for dest in message.destinations:
            delta = self.delta_for(dest)
            self.last_to[dest] = self.version
            copy = message.to((dest,)) if split else message
            copies.append(with_header_unchecked(copy, STAMP, encode_matrix(delta)))
        return copies  # type: ignore[return-value]

    # -- receive side: matrix's on_receive, reading the delta header ------------------
    def _raised(self, row: str, column: str, count: int) -> None:
        self._changed(row, column)

    def release_waiting_on(self, name: str) -> list[str]:
        released = super().release_waiting_on(name)
        if released:
            log.warning(
                "%s: skipped message(s) from %s that never came; with %s the entries "
                "only they carried are lost, so causality towards others is no longer "
                "guaranteed", self.host.name, name, NAME,
            )
        return released

    # -- introspection ------------------------------------------------------------------
    def snapshot(self) -> Hashable:
        return (
            freeze_matrix(self.sent),
            freeze_clock(self.deliv),
            # the buffer in its own order (the scan order of _drain), not sorted:
            # messages do not define an ordering
            tuple((m, freeze_matrix(s)) for m, s in self.buffer),
            self.control_count,
            # by (version, row, column): the order within a version is never read
            tuple(sorted(self.changes.items(), key=_change_order)),
            self.version,
            freeze_clock(self.last_to),
        )

    def restore(self, snapshot: Hashable) -> None:
        (sent, deliv, buffer, self.control_count, changes, self.version,
         last_to) = snapshot  # type: ignore[misc]
        self.sent = {r: dict(row) for r, row in sent}
        self.deliv = dict(deliv)
        self.buffer = [(m, {r: dict(row) for r, row in s}) for m, s in buffer]
        self._held_by = {}
        self._buffered_ids = {m.message_id for m, _ in self.buffer}
        self.changes = dict(changes)
        self.last_to = dict(last_to)


class MatrixDeltaModule(CausalityModule):
    """Raynal-Schiper-Toueg causal order with per-destination delta stamps."""

    name = NAME
    manager_class = MatrixDeltaManager
    description = ("causal unicast/multicast: matrix clocks sending only the entries changed "
                   "since the last message to the same destination")
    #: the delta is in matrix's encoding; the snapshot orders changes by name within a
    #: version, so renaming the members maps states onto states (tested)
    symmetry_headers = {STAMP: "matrix"}
