"""``matrix-delta``: the ``matrix`` protocol with compressed stamps (beyond the sources;
docs/protocols.md says why the receiver needs nothing more).

The copy for destination d carries (header ``D``) only the entries of SENT changed since
the sender's previous message to d, applied at delivery, so links need not be FIFO; they
must be reliable. If the application skips a lost message
(:meth:`MatrixManager.release_waiting_on`), the entries only it carried are never merged
and causality towards third parties is no longer guaranteed: the module logs a warning.
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


class MatrixDeltaManager(MatrixManager):
    """SENT, DELIV and the buffer (as in ``matrix``) plus per-destination versions."""

    stamp_header = STAMP
    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        #: (row, column) -> version of the send its last change is due to travel with,
        #: in order of last change: the delta for d is read backwards down to the version
        #: of the last send to d, so it costs the size of the delta, not of the matrix.
        #: Changes between two sends share a version (a delta takes all of them or none);
        #: the snapshot lists them by (version, row, column), so renaming the members or
        #: reordering deliveries between two sends leaves no trace in the state
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
        """Count the send in SENT, then send one copy per destination carrying its
        delta (all stamped before the first goes)."""
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
        for copy in copies:
            self.send_downstream(copy)

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
            tuple(sorted(self.changes.items(), key=lambda change: (change[1], *change[0]))),
            self.version,
            freeze_clock(self.last_to),
        )

    def restore(self, snapshot: Hashable) -> None:
        *matrix, changes, self.version, last_to = snapshot  # type: ignore[misc]
        super().restore(tuple(matrix))
        self.changes = dict(changes)
        self.last_to = dict(last_to)


class MatrixDeltaModule(CausalityModule):
    name = NAME
    manager_class = MatrixDeltaManager
    description = ("causal unicast/multicast: matrix clocks sending only the entries changed "
                   "since the last message to the same destination")
    #: the delta is in matrix's encoding; the snapshot orders changes by name within a
    #: version, so renaming the members maps states onto states (tested)
    symmetry_headers = {STAMP: "matrix"}
