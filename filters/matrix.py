"""``matrix``: causal unicast and multicast (seed 000; Raynal, Schiper and Toueg 1991;
the rule: docs/protocols.md).

SENT and DELIV are sparse and keyed by member name, so members may join at any time (a
newcomer's row and column start at zero: nothing was sent to it before it came). Of the
two forms in 000 this is "increment, then attach": a multicast to {a, b} attaches one
snapshot to both copies, so b learns of the copy to a and holds a's reply until that
copy is delivered; "attach, increment" per copy would let the reply overtake it. The
stamp (header ``M``) holds the non-zero entries of SENT as index triples into names sent
once.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Mapping
from typing import ClassVar

from groupcomm.module_kit import (
    INT_ONLY,
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ProtocolViolation,
    ReceivedMessage,
    SentMessage,
    blocking,
    decode_matrix,
    encode_matrix,
    freeze_clock,
    freeze_matrix,
    take_first_deliverable,
    warn_held_on,
    with_header_unchecked,
    without_header_unchecked,
)

log = logging.getLogger(__name__)

NAME = "matrix"
STAMP = "M"


class MatrixManager(CausalityManager):
    """SENT, DELIV and the buffer of one member."""

    #: the header holding the sender's SENT (all of it here, a delta in matrix-delta)
    stamp_header: ClassVar[str] = STAMP
    protocol: ClassVar[str] = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        #: this member's name, which the rule reads for every stamp (a host keeps its name)
        self._me = host.name
        self.sent: dict[str, dict[str, int]] = {}
        self.deliv: dict[str, int] = {}
        self.buffer: list[tuple[ReceivedMessage, dict[str, dict[str, int]]]] = []
        #: message id -> the member that held it at the last look (see take_first_deliverable)
        self._held_by: dict[str, str] = {}
        #: the ids of the buffered messages (a duplicate is found without a scan)
        self._buffered_ids: set[str] = set()
        # the stamp's encoding (see encode_matrix), kept from one send to the next: a send
        # or a merge that only raises entries already non-zero changes values in place;
        # a new non-zero entry (a new pair, a newcomer) makes the next send re-encode
        self._stamp_names: tuple[str, ...] = ()
        self._stamp_flat: list[int] | None = None
        #: (row, column) -> index of that entry's count in _stamp_flat
        self._stamp_slot: dict[tuple[str, str], int] = {}
        #: sender -> how to read its stamps while their shape stays the same (see
        #: _StampPlan, made by _learn_shape): usually only the counts differ
        self._plans: dict[str, _StampPlan] = {}
        #: sender -> its last stamp delivered through the general path
        self._last_general: dict[str, tuple] = {}

    # -- send side ----------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Count the send in SENT and attach the snapshot (one for every destination)."""
        me = self.host.name
        row = self.sent.setdefault(me, {})
        for dest in message.destinations:
            count = row[dest] = row.get(dest, 0) + 1
            self._raised(me, dest, count)
        flat = self._stamp_flat
        if flat is None:
            names, counts = encode_matrix(self.sent)
            index = {(names[counts[i]], names[counts[i + 1]]): i + 2
                     for i in range(0, len(counts), 3)}
            self._stamp_names, self._stamp_flat, self._stamp_slot = names, list(counts), index
            encoded = (names, counts)
        else:
            encoded = (self._stamp_names, tuple(flat))
        self.send_downstream(with_header_unchecked(message, STAMP, encoded))

    def _raised(self, row: str, column: str, count: int) -> None:
        """SENT[row][column] was raised to ``count`` (a send, a merge): keep the stamp's
        encoding in step (matrix-delta records the change instead)."""
        flat = self._stamp_flat
        if flat is not None:
            slot = self._stamp_slot.get((row, column))
            if slot is None:
                self._stamp_flat = None  # a new entry: the names or the order change
            else:
                flat[slot] = count

    # -- receive side -------------------------------------------------------------------
    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver ``message`` when DELIV covers its stamp, else buffer it (the rule is the
        same for a whole matrix and for matrix-delta's changed entries)."""
        sender = message.sender
        plan = self._plans.get(sender)
        if plan is not None and not self.buffer:
            # a stamp of the plan's shape, its counts checked in C-level passes, goes to
            # the rule and is merged where its counts sit; any other (a bad one too: the
            # general path says what is wrong), or a held one, takes the general path.
            # The length is compared too, or a stamp cut short by one count would match
            # rows and columns
            value = message.headers.get(self.stamp_header)
            if (type(value) is tuple and len(value) == 2 and value[0] == plan.names
                    and type(flat := value[1]) is tuple and len(flat) == 3 * len(plan.rows)
                    and flat[0::3] == plan.rows and flat[1::3] == plan.columns
                    and INT_ONLY.issuperset(map(type, counts := flat[2::3]))
                    and min(counts) >= 0):
                for i, row in plan.cells:
                    row[plan.me] = counts[i]
                own = counts[plan.own]
                if self.blocker(sender, own, plan.others) is None:
                    self.deliv[sender] = own
                    sent = self.sent
                    raised = self._raised
                    for (r, c), v in zip(plan.targets, counts, strict=True):
                        mine = sent.get(r)
                        if mine is None:
                            mine = sent[r] = {}
                        if mine.get(c, 0) < v:
                            mine[c] = v
                            raised(r, c, v)
                    self.deliver_upstream(without_header_unchecked(message, self.stamp_header))
                    return
        stamp = decode_matrix(message, self.stamp_header, self.protocol)
        me = self.host.name
        own = stamp.get(sender, {}).get(me, 0)
        if own < 1:
            raise ProtocolViolation(
                f"{self.protocol}: stamp of {message.message_id} does not count the message "
                f"itself (SENT[{sender}][{me}] = {own})"
            )
        if own <= self.deliv.get(sender, 0) or message.message_id in self._buffered_ids:
            self.count("duplicates")
            return
        if self.blocker(sender, own, stamp.items()) is None:
            self._deliver(message, stamp)
            if self.buffer:
                self._drain()
            else:
                self._learn_shape(sender, message.headers[self.stamp_header])
        else:
            self.buffer.append((message, stamp))
            self._buffered_ids.add(message.message_id)
            self.host.trace("buffer", message, waiting_for=self._waits_on(sender, stamp))

    def _learn_shape(self, sender: str, value: tuple) -> None:
        """After a stamp of ``sender`` was decoded and delivered: when the one before had
        the same shape, read the next ones of that shape with a plan (matrix-delta's
        deltas mostly differ in shape: no plan is made for each)."""
        previous = self._last_general.get(sender)
        self._last_general[sender] = value
        # the same names and (row, column) pairs: only the counts differ
        if (previous is not None and previous[0] == value[0]
                and previous[1][0::3] == value[1][0::3]
                and previous[1][1::3] == value[1][1::3]):
            plan = _StampPlan(value, sender, self.host.name)
            # a name or an entry given twice decodes to its last value: only the general
            # path reads such a stamp as it always did
            if (len(set(plan.names)) == len(plan.names)
                    and len(set(plan.targets)) == len(plan.targets)):
                self._plans[sender] = plan

    # -- the delivery rule -------------------------------------------------------------
    def blocker(self, sender: str, own: int | None,
                rows: Iterable[tuple[str, Mapping[str, int]]]) -> str | None:
        """The delivery rule (docs/protocols.md): the member whose messages keep a message
        from ``sender`` from delivery here now, or None: deliverable. The rows are read in
        order up to the first that holds, so any part of a stamp can be tested alone.

        ``own`` is the message's ``SENT_m[sender][me]`` (None: leave that clause out) and
        ``rows`` the rows ``(k, SENT_m[k])`` of its stamp, of which only the counts of
        messages to us are read (the sender's row is passed over)."""
        deliv = self.deliv
        if own is not None and deliv.get(sender, 0) != own - 1:
            return sender
        me = self._me
        for k, row in rows:
            if deliv.get(k, 0) < row.get(me, 0) and k != sender:
                return k
        return None

    def _waits_on(self, sender: str, stamp: dict[str, dict[str, int]]) -> list[str]:
        """The members :meth:`blocker` finds holding a message (sorted)."""
        own = stamp[sender][self.host.name]
        first = [] if self.blocker(sender, own, ()) is None else [sender]
        return sorted(first + blocking(lambda rest: self.blocker(sender, None, rest),
                                       stamp.items()))

    def _deliver(self, message: ReceivedMessage, stamp: dict[str, dict[str, int]]) -> None:
        sender = message.sender
        self.deliv[sender] = self.deliv.get(sender, 0) + 1
        sent = self.sent
        for r, row in stamp.items():
            mine = sent.setdefault(r, {})
            for c, v in row.items():
                if mine.get(c, 0) < v:
                    mine[c] = v
                    self._raised(r, c, v)
        self.deliver_upstream(without_header_unchecked(message, self.stamp_header))

    def _drain(self) -> None:
        rule = self.blocker
        me = self.host.name

        def holder(entry: tuple) -> str | None:
            sender, stamp = entry[0].sender, entry[1]
            return rule(sender, stamp[sender][me], stamp.items())

        def still_held(entry: tuple, k: str) -> bool:
            sender, stamp = entry[0].sender, entry[1]
            return rule(sender, stamp[sender][me], ((k, stamp[k]),)) is not None

        while self.buffer and (entry := take_first_deliverable(
                self.buffer, self._held_by, self._buffered_ids, holder, still_held)):
            self.host.trace("unbuffer", entry[0])
            self._deliver(*entry)

    # -- introspection ------------------------------------------------------------------
    def held(self) -> list[GroupMessage]:
        return [m for m, _ in self.buffer]

    def waiting_for(self) -> dict[str, list[str]]:
        return {m.message_id: self._waits_on(m.sender, s) for m, s in self.buffer}

    def member_removed(self, name: str) -> None:
        warn_held_on(self, name, log)

    def release_waiting_on(self, name: str) -> list[str]:
        """Count the messages ``name`` sent us that never came as delivered."""
        before = {m.message_id for m, _ in self.buffer}
        me = self.host.name
        for _ in range(len(self.buffer) + 1):
            self._drain()
            current = self.deliv.get(name, 0)
            own = [s[name][me] - 1 for m, s in self.buffer if m.sender == name]
            needed = [s.get(name, {}).get(me, 0) for m, s in self.buffer if m.sender != name]
            options = [x for x in (min(own, default=0), max(needed, default=0)) if x > current]
            if not options:
                break
            self.deliv[name] = min(options)
        released = sorted(before - {m.message_id for m, _ in self.buffer})
        self.count("released", len(released))
        return released

    def snapshot(self) -> Hashable:
        return (
            freeze_matrix(self.sent),
            freeze_clock(self.deliv),
            tuple(sorted(((m, freeze_matrix(s)) for m, s in self.buffer),
                         key=lambda entry: entry[0].message_id)),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        sent, deliv, buffer, self.control_count = snapshot  # type: ignore[misc]
        self._stamp_flat = None
        self._plans, self._last_general = {}, {}
        self.sent = {r: dict(row) for r, row in sent}
        self.deliv = dict(deliv)
        self.buffer = [(m, {r: dict(row) for r, row in s}) for m, s in buffer]
        self._held_by = {}
        self._buffered_ids = {m.message_id for m, _ in self.buffer}


class _StampPlan:
    """Where the counts sit in a sender's stamps whose names and (row, column) pairs are
    those of a stamp already decoded and delivered, so that the ones the rule reads reach
    :meth:`MatrixManager.blocker`, and all are merged, without decoding into a matrix."""

    __slots__ = ("names", "rows", "columns", "targets", "own", "cells", "others", "me")

    def __init__(self, stamp: tuple, sender: str, me: str) -> None:
        names, flat = stamp
        self.names: tuple[str, ...] = names
        self.rows: tuple[int, ...] = flat[0::3]
        self.columns: tuple[int, ...] = flat[1::3]
        #: (row name, column name) of each count, in the stamp's order
        self.targets = tuple((names[r], names[c])
                             for r, c in zip(self.rows, self.columns, strict=True))
        #: where SENT[sender][me] is
        self.own = self.targets.index((sender, me))
        self.me = me
        # the other rows the rule reads, as far as it reads them (SENT[k][me]): rows of
        # the plan's own, each refilled from its count before the rule is asked (the
        # rule keeps nothing it is given), so no row is built per stamp
        column = [(i, r) for i, (r, c) in enumerate(self.targets) if c == me and r != sender]
        rows = [(r, {me: 0}) for _, r in column]
        #: (where, row) of each of those counts
        self.cells = tuple((i, row) for (i, _), (_, row) in zip(column, rows, strict=True))
        #: (k, row) of each of those rows, as the rule reads them
        self.others = tuple(rows)


class MatrixModule(CausalityModule):
    name = NAME
    manager_class = MatrixManager
    description = "causal unicast/multicast with Raynal-Schiper-Toueg SENT matrices"
    symmetry_headers = {STAMP: "matrix"}
