"""``ks``: causal unicast and multicast with a pruned log of pending destinations
(Kshemkalyani and Singhal's conditions, 1998; beyond the sources). The log, the send,
receive and merge rules and what they cost: docs/protocols.md.

A member's state is its ``clock``, ``delivered`` per sender and its ``log`` of entries
(s, t, Dests), as named there.

A newcomer starts with an empty log: an entry can name it only for a send made after
someone knew of its join, so it never waits for what was sent before. A member that
leaves is taken out of every Dests; what waits on its message that never came stays held
until ``release_waiting_on``. Links must be reliable; they need not be FIFO.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping

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
    freeze_clock,
    header,
    take_first_deliverable,
    warn_held_on,
    with_header_unchecked,
    without_header_unchecked,
)

log = logging.getLogger(__name__)

NAME = "ks"
STAMP = "K"

#: sender -> clock of one of its sends -> the members that may still wait for it
Log = dict[str, dict[int, frozenset[str]]]

_EMPTY: frozenset[str] = frozenset()
_STR_ONLY = frozenset({str})


def purge(entries: Log) -> None:
    """Drop each sender's entries with no destination left, except its newest one."""
    for sends in entries.values():
        purge_sender(sends)


def purge_sender(sends: dict[int, frozenset[str]]) -> None:
    """:func:`purge` for one sender's entries."""
    if len(sends) > 1:
        newest = max(sends)
        for t in [t for t, dests in sends.items() if not dests and t != newest]:
            del sends[t]


def encode_log(clock: int, entries: Log) -> tuple[int, tuple[str, ...], tuple[int, ...],
                                                  tuple[int, ...]]:
    """The stamp (header ``K``): ``(clock, names, newest, records)``. ``names`` lists each
    member the stamp refers to once; ``newest[i]`` is the clock of the newest entry
    carried of ``names[i]``'s sends (0: none), which is all a marker needs; each record
    is an entry with destinations left: ``sender index, clock, number of destinations,
    destination indices``. Canonical: names sorted, records by sender and clock,
    destinations sorted."""
    named = set(entries)
    for sends in entries.values():
        for dests in sends.values():
            if dests:  # most entries are markers, with no destination left
                named.update(dests)
    names = sorted(named)
    index = {name: i for i, name in enumerate(names)}
    newest = [0] * len(names)
    flat: list[int] = []
    for i, sender in enumerate(names):  # the senders in name order, as names are
        sends = entries.get(sender)
        if not sends:
            continue
        if len(sends) == 1:  # the common case: one entry (a marker, or a pending send)
            ((t, dests),) = sends.items()
            newest[i] = t
            if dests:
                flat += (i, t, len(dests))
                flat += sorted(map(index.__getitem__, dests))
            continue
        newest[i] = max(sends)
        for t, dests in sorted(sends.items()):
            if dests:
                flat += (i, t, len(dests))
                flat += sorted(map(index.__getitem__, dests))
    return clock, tuple(names), tuple(newest), tuple(flat)


def decode_log(message: GroupMessage) -> tuple[int, Log]:
    """Inverse of :func:`encode_log`, validating the shape: the message's clock and the
    entries it carries (its own included)."""
    value = header(message, STAMP, NAME)
    if not (isinstance(value, tuple) and len(value) == 4):
        raise ProtocolViolation(f"{_where(message)} must be (clock, names, newest, records), got "
                                f"{value!r:.80}")
    clock, names, newest, flat = value
    if type(clock) is not int or clock < 1:
        raise ProtocolViolation(
            f"{_where(message)}: the clock must be an integer >= 1, got {clock!r}")
    # C-level passes: this runs for every message that arrives
    if not (isinstance(names, tuple) and _STR_ONLY.issuperset(map(type, names))
            and all(names)):
        raise ProtocolViolation(f"{_where(message)}: names must be a tuple of non-empty strings")
    for part, what in ((newest, "newest"), (flat, "records")):
        if not (isinstance(part, tuple) and INT_ONLY.issuperset(map(type, part))
                and (not part or min(part) >= 0)):
            raise ProtocolViolation(f"{_where(message)}: {what} must be a tuple of integers >= 0")
    size = len(names)
    if len(newest) != size:
        raise ProtocolViolation(f"{_where(message)}: {len(newest)} newest clocks for {size} names")
    entries: Log = {name: {t: _EMPTY} for name, t in zip(names, newest, strict=True) if t}
    # each record checked and added in one pass (entries is thrown away on an error)
    position, end = 0, len(flat)
    while position < end:
        if position + 3 > end:
            raise ProtocolViolation(f"{_where(message)}: a record is cut short at {position}")
        sender, t, count = flat[position:position + 3]
        stop = position + 3 + count
        dests = flat[position + 3:stop]
        if (sender >= size or not 1 <= t <= newest[sender] or not count
                or len(dests) < count or max(dests) >= size):
            raise ProtocolViolation(f"{_where(message)}: bad record {flat[position:stop]!r}")
        entries[names[sender]][t] = frozenset(map(names.__getitem__, dests))
        position = stop
    own = entries.get(message.sender)
    if own is None or max(own) != clock:
        raise ProtocolViolation(f"{_where(message)}: the sender's newest send must be the message "
                                f"itself ({message.sender}, {clock})")
    return clock, entries


def _where(message: GroupMessage) -> str:
    """The start of a bad-stamp error (built only for a bad stamp: formatting it for every
    message that arrives cost a tenth of the decoding)."""
    return f"{NAME}: header {STAMP!r} of {message.message_id} from {message.sender}"


def rename_log(value: tuple, name: Callable[[str], str]) -> tuple:
    """An encoded log with every member name mapped through ``name`` (the model checker's
    symmetry reduction; ``value`` is a stamp this module made)."""
    clock, names, newest, flat = value
    names = tuple(map(name, names))
    entries: Log = {n: {t: _EMPTY} for n, t in zip(names, newest, strict=True) if t}
    position = 0
    while position < len(flat):
        sender, t, count = flat[position:position + 3]
        entries[names[sender]][t] = frozenset(
            names[d] for d in flat[position + 3:position + 3 + count])
        position += 3 + count
    return encode_log(clock, entries)


class KsManager(CausalityManager):
    """The send clock, what was delivered, the log of pending destinations and the
    buffer of one member."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.clock = 0
        self.delivered: dict[str, int] = {}
        self.log: Log = {}
        self.buffer: list[tuple[ReceivedMessage, int, Log]] = []
        #: message id -> the member whose send held it at the last look (see
        #: take_first_deliverable)
        self._held_by: dict[str, str] = {}
        #: the ids of the buffered messages (a duplicate is found without a scan)
        self._buffered_ids: set[str] = set()

    # -- send side ----------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Count the send and attach each destination's entries."""
        for copy in self.stamp_copies(message):
            self.send_downstream(copy)

    def stamp_copies(self, message: SentMessage) -> list[SentMessage]:
        """One copy per destination, each with the entries that destination needs."""
        me = self.host.name
        self.clock += 1
        clock = self.clock
        destinations = message.destinations
        dests = frozenset(destinations)
        own = self.log.setdefault(me, {})
        if len(destinations) == 1:
            # nothing to take out for other copies: the copy carries the log as it is,
            # with the message's own entry (no other destination)
            own[clock] = _EMPTY
            purge_sender(own)
            copies = [with_header_unchecked(message, STAMP, encode_log(clock, self.log))]
        else:
            copies = []
            for dest in destinations:
                entries: Log = {}
                for sender, sends in self.log.items():
                    entries[sender] = {t: (pending - dests) | (pending & {dest})
                                       for t, pending in sends.items()}
                entries[me][clock] = dests - {dest}
                purge(entries)
                copies.append(with_header_unchecked(message.to((dest,)), STAMP,
                                                    encode_log(clock, entries)))
        # a later message to d from anyone who knows these entries also knows of m
        if len(destinations) == 1:  # one membership test per entry, not a set operation
            dest = destinations[0]
            for sends in self.log.values():
                changed = False
                for t, pending in sends.items():
                    if dest in pending:
                        sends[t] = pending - dests
                        changed = True
                if changed:
                    purge_sender(sends)
        else:
            for sends in self.log.values():
                changed = False
                for t, pending in sends.items():
                    if not pending.isdisjoint(dests):
                        sends[t] = pending - dests
                        changed = True
                if changed:
                    purge_sender(sends)
        own[clock] = dests
        purge_sender(own)
        return copies  # type: ignore[return-value]

    # -- receive side -------------------------------------------------------------------
    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver ``message`` once what it waits for here has been delivered, else hold it."""
        clock, entries = decode_log(message)
        sender = message.sender
        if clock <= self.delivered.get(sender, 0) or message.message_id in self._buffered_ids:
            self.count("duplicates")
            return
        if self.blocker(sender, clock, entries.items()) is None:
            self._deliver(message, clock, entries)
            if self.buffer:
                self._drain()
        else:
            self.buffer.append((message, clock, entries))
            self._buffered_ids.add(message.message_id)
            self.host.trace("buffer", message,
                            waiting_for=self._waits_on(sender, clock, entries))

    # -- the delivery rule -------------------------------------------------------------
    def blocker(self, sender: str, clock: int,
                entries: Iterable[tuple[str, Mapping[int, frozenset[str]]]]) -> str | None:
        """The delivery rule: a member with a send that the log a message carries says
        must be delivered here first and that is not yet, or None: deliverable. The
        senders are read in order up to the first that holds, so any part of a log can be
        tested alone.

        ``clock`` is the message's own clock (its own entry is passed over) and
        ``entries`` its log, sender by sender: ``(s, {t: Dests})``. A send (s, t) holds
        the message while this member is in its Dests and ``delivered[s] < t``."""
        me = self.host.name
        delivered = self.delivered
        for s, sends in entries:
            done = delivered.get(s, 0)
            for t, dests in sends.items():
                if t > done and me in dests and not (s == sender and t == clock):
                    return s
        return None

    def _waits_on(self, sender: str, clock: int, entries: Log) -> list[str]:
        """The members :meth:`blocker` finds holding a message (sorted)."""
        return sorted(blocking(lambda rest: self.blocker(sender, clock, rest), entries.items()))

    def _deliver(self, message: ReceivedMessage, clock: int, entries: Log) -> None:
        self.delivered[message.sender] = clock
        self._merge(entries, self.host.name)
        self.deliver_upstream(without_header_unchecked(message, STAMP))

    def _merge(self, carried: Log, me: str) -> None:
        """Merge a delivered message's log into this member's, ``me`` taken out of every
        carried destination set as it goes (the message is delivered here)."""
        mine = self.log
        drop = frozenset((me,))
        for sender, incoming in carried.items():
            known = mine.get(sender)
            if known is None:
                mine[sender] = known = {t: dests - drop if me in dests else dests
                                        for t, dests in incoming.items()}
                purge_sender(known)  # (taking this member out may have emptied some)
                continue
            if len(known) == 1 and len(incoming) == 1:
                # the usual case: one entry on each side (mostly markers); what the general
                # merge below does with them, without its passes
                ((t, dests),) = incoming.items()
                (t_known,) = known
                if t < t_known:
                    continue  # older than what this member knows: forgotten here
                if me in dests:
                    dests = dests - drop
                if t > t_known:  # the newer send stands for the older one
                    known.clear()
                    known[t] = dests
                else:
                    known[t] = known[t] & dests
                continue
            newest_known, newest_carried = max(known), max(incoming)
            for t in [t for t in known if t not in incoming and t < newest_carried]:
                del known[t]  # the sender of the message had forgotten it: no one waits
            for t, dests in incoming.items():
                if me in dests:
                    dests = dests - drop
                if t in known:
                    known[t] = known[t] & dests
                elif t > newest_known:
                    known[t] = dests
                # else: older than what this member knows and not in its log: forgotten here
            purge_sender(known)

    def _drain(self) -> None:
        rule = self.blocker

        def holder(entry: tuple) -> str | None:
            return rule(entry[0].sender, entry[1], entry[2].items())

        def still_held(entry: tuple, s: str) -> bool:
            return rule(entry[0].sender, entry[1], ((s, entry[2][s]),)) is not None

        while self.buffer and (entry := take_first_deliverable(
                self.buffer, self._held_by, self._buffered_ids, holder, still_held)):
            self.host.trace("unbuffer", entry[0])
            self._deliver(*entry)

    # -- membership ---------------------------------------------------------------------
    def member_removed(self, name: str) -> None:
        for sends in self.log.values():
            for t, dests in sends.items():
                if name in dests:
                    sends[t] = dests - {name}
        purge(self.log)
        warn_held_on(self, name, log)

    def release_waiting_on(self, name: str) -> list[str]:
        """Count the messages ``name`` sent us that never came as delivered."""
        before = {m.message_id for m, _, _ in self.buffer}
        me = self.host.name
        for _ in range(len(self.buffer) + 1):
            self._drain()
            needed = [t for m, clock, entries in self.buffer
                      for t, dests in entries.get(name, {}).items()
                      if me in dests and not (m.sender == name and t == clock)
                      and t > self.delivered.get(name, 0)]
            if not needed:
                break
            self.delivered[name] = min(needed)
        released = sorted(before - {m.message_id for m, _, _ in self.buffer})
        self.count("released", len(released))
        return released

    # -- introspection ------------------------------------------------------------------
    def held(self) -> list[GroupMessage]:
        return [m for m, _, _ in self.buffer]

    def waiting_for(self) -> dict[str, list[str]]:
        return {m.message_id: self._waits_on(m.sender, clock, entries)
                for m, clock, entries in self.buffer}

    def snapshot(self) -> Hashable:
        return (
            self.clock,
            freeze_clock(self.delivered),
            freeze_log(self.log),
            tuple(sorted(((m, clock, freeze_log(entries)) for m, clock, entries in self.buffer),
                         key=lambda held: held[0].message_id)),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        (self.clock, delivered, entries, buffer,
         self.control_count) = snapshot  # type: ignore[misc]
        self.delivered = dict(delivered)
        self.log = thaw_log(entries)
        self.buffer = [(m, clock, thaw_log(e)) for m, clock, e in buffer]
        self._held_by = {}
        self._buffered_ids = {m.message_id for m, _, _ in self.buffer}


def freeze_log(entries: Log) -> tuple:
    """A canonical hashable form of a log."""
    return tuple((s, tuple((t, tuple(sorted(dests))) for t, dests in sorted(sends.items())))
                 for s, sends in sorted(entries.items()) if sends)


def thaw_log(frozen: Iterable[tuple[str, Iterable[tuple[int, Iterable[str]]]]]) -> Log:
    return {s: {t: frozenset(dests) for t, dests in sends} for s, sends in frozen}


class KsModule(CausalityModule):
    name = NAME
    manager_class = KsManager
    description = ("causal unicast/multicast sending only what a destination may still "
                   "wait for (Kshemkalyani-Singhal pruned log)")
    symmetry_headers = {STAMP: "ks-log"}
