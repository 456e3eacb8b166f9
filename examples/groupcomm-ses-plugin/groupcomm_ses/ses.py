"""``ses``: causal unicast and multicast after Schiper, Eggli and Sandoz (1989); the
groupcomm guide, docs/writing-a-module.md, walks through this file.

Every message carries the sender's **vector time** at the send (header ``st``, an
encoded clock) and its **pairs** (header ``sp``): ``(destination, vector time)`` for
each member a message was sent to in the sender's causal past, the newest such time per
destination. A receiver delivers a message that carries no pair for it at once, and one
that does once its own knowledge (the merged vector times of what it delivered) covers
that pair's time; on delivery it takes on the time and the pairs (but its own). A
multicast is one send event: the copy to each destination also carries a pair
``(other destination, this send's time)`` for every other destination.

**Its own entry.** A member's knowledge of its own sends is the last of them whose
copies to itself have all been delivered: a pair can name a multicast that included
the receiver itself, and its own copy (looped back by the node) must come first.

**Departures and joins.** Pairs for a departed member are dropped (a member that comes
back is a new name, ``NAME~2``); what waits on a departed member's message stays held
until ``release_waiting_on``. A newcomer needs nothing sent to it, and pairs for a
member not heard of yet are passed on all the same.

**Not handled:** duplicated frames (stack the ``reliable`` filter on a network that
duplicates).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, ClassVar

from groupcomm.module_kit import (
    CausalityManager,
    CausalityModule,
    Clock,
    FilterHost,
    GroupMessage,
    ProtocolViolation,
    ReceivedMessage,
    Rename,
    SentMessage,
    blocking,
    decode_clock,
    encode_clock,
    freeze_clock,
    header,
    rename_clock,
    take_first_deliverable,
    warn_held_on,
    with_header_unchecked,
    without_header_unchecked,
)

log = logging.getLogger(__name__)

NAME = "ses"
TIME = "st"
PAIRS = "sp"

#: a buffered message: (message, its vector time, the time of its pair for this member)
Entry = tuple[ReceivedMessage, Clock, Clock]


def encode_pairs(pairs: Mapping[str, Clock]) -> tuple[tuple[str, Any], ...]:
    """``((destination, encoded time), ...)``, destinations sorted (canonical)."""
    return tuple((dest, encode_clock(pairs[dest])) for dest in sorted(pairs))


def decode_pairs(message: GroupMessage, protocol: str) -> dict[str, Clock]:
    """Inverse of :func:`encode_pairs`, validating the shape (a peer's wrong-shape
    header is a :class:`ProtocolViolation` naming the message and the entry)."""
    value = header(message, PAIRS, protocol)
    if not isinstance(value, tuple):
        raise ProtocolViolation(f"{protocol}: header {PAIRS!r} of {message.message_id} from "
                                f"{message.sender} must be a tuple of (destination, time) "
                                f"pairs, got {value!r:.80}")
    pairs: dict[str, Clock] = {}
    for entry in value:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                and entry[0] and entry[0] not in pairs):
            raise ProtocolViolation(f"{protocol}: header {PAIRS!r} of {message.message_id} "
                                    f"from {message.sender}: bad pair {entry!r:.80}")
        # the time is an encoded clock: read it with the clock reader, which checks it
        pairs[entry[0]] = decode_clock(_Carrier(message, entry[1]), PAIRS, protocol)
    return pairs


class _Carrier:
    """One encoded clock of a pairs header, shaped like a message for ``decode_clock``
    (so its error names the message, the sender and the header)."""

    def __init__(self, message: GroupMessage, value: Any) -> None:
        self.message_id = message.message_id
        self.sender = message.sender
        self.headers = {PAIRS: value}


def rename_pairs(value: Any, rename: Rename) -> Any:
    """The pairs header with every process name renamed (``groupcomm check --symmetry``)."""
    return tuple(sorted((rename(dest), rename_clock(time, rename)) for dest, time in value))


def _canonical(entry: Entry) -> tuple[str, int]:
    """Where a buffered message sits: by sender, then by its send number."""
    return entry[0].sender, entry[1].get(entry[0].sender, 0)


def _merge(into: Clock, other: Mapping[str, int]) -> None:
    for name, count in other.items():
        if count > into.get(name, 0):
            into[name] = count


class SesManager(CausalityManager):
    """Vector time, pairs and the buffer of one member."""

    protocol: ClassVar[str] = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self._me = host.name
        #: this member's send events so far
        self.sends = 0
        #: for every other member, the last of its sends this member's deliveries reflect
        self.known: Clock = {}
        #: numbers of this member's sends to itself whose own copy is not delivered yet
        self.self_pending: list[int] = []
        #: destination -> the newest time of a message sent to it in this causal past
        self.pairs: dict[str, Clock] = {}
        #: members that left: no pair for them is kept again (a name never comes back: a
        #: member that returns is ``NAME~2``), though a peer that has not heard of the
        #: departure yet still sends theirs
        self.departed: set[str] = set()
        #: messages waiting, in a canonical order (sender, its send number)
        self.buffer: list[Entry] = []
        self._held_by: dict[str, Hashable] = {}
        self._buffered_ids: set[str] = set()

    # -- what this member knows ---------------------------------------------------------
    def own_known(self) -> int:
        """The last of its own sends this member has delivered every copy to itself of."""
        return self.self_pending[0] - 1 if self.self_pending else self.sends

    def _known(self, name: str) -> int:
        return self.own_known() if name == self._me else self.known.get(name, 0)

    def time(self) -> Clock:
        """The vector time a send made now carries."""
        return {**self.known, self._me: self.sends}

    # -- send side ------------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Pass on one copy per destination, stamped."""
        for copy in self.stamp(message):
            self.send_downstream(copy)

    def stamp(self, message: SentMessage) -> list[SentMessage]:
        """One copy per destination, each with this send's time and the pairs for it."""
        self.sends += 1
        time = self.time()
        destinations = message.destinations
        if self._me in destinations:
            self.self_pending.append(self.sends)
        encoded_time = encode_clock(time)
        copies = []
        for dest in destinations:
            pairs = dict(self.pairs)
            for other in destinations:  # one send event: the others' copies precede
                if other != dest:
                    pairs[other] = time
            copy = message.to((dest,)) if len(destinations) > 1 else message
            copy = with_header_unchecked(copy, TIME, encoded_time)
            copies.append(with_header_unchecked(copy, PAIRS, encode_pairs(pairs)))
        for dest in destinations:
            if dest != self._me and dest not in self.departed:
                self.pairs[dest] = time
        return copies

    # -- receive side ---------------------------------------------------------------------
    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver ``message`` now if nothing it follows is missing, else buffer it."""
        time = decode_clock(message, TIME, self.protocol)
        pairs = decode_pairs(message, self.protocol)
        entry = self._entry(message, time, pairs)
        if message.message_id in self._buffered_ids:
            self.count("duplicates")
            return
        if self._holder(entry) is None:
            self._deliver(entry, pairs)
            self._drain()
            return
        self.buffer.append(entry)
        self.buffer.sort(key=_canonical)
        self._buffered_ids.add(message.message_id)
        self.host.trace("buffer", message, waiting_for=self._waits_on(entry))

    def _entry(self, message: ReceivedMessage, time: Clock, pairs: dict[str, Clock]) -> Entry:
        """The buffer entry of ``message``: with its time and what it waits for here."""
        if message.sender == self._me:
            # its own copy: after the copies to itself of its earlier sends
            return message, time, {self._me: time.get(self._me, 0) - 1}
        return message, time, pairs.get(self._me, {})

    def _holder(self, entry: Entry) -> str | None:
        """The first member whose sends this message waits for, or None (deliverable)."""
        found = self._blocker(iter(entry[2].items()))
        return None if found is None else found[0]

    def _blocker(self, items: Iterator[tuple[str, int]]) -> tuple[str, int] | None:
        """The first (member, count) of a pair's time this member has not reached
        (the delivery rule, read entry by entry, as ``blocking`` asks)."""
        for item in items:
            if item[1] > self._known(item[0]):
                return item
        return None

    def _still_held(self, entry: Entry, name: Hashable) -> bool:
        return entry[2].get(str(name), 0) > self._known(str(name))

    def _waits_on(self, entry: Entry) -> list[str]:
        return [name for name, _ in blocking(self._blocker, entry[2].items())]

    def _deliver(self, entry: Entry, pairs: dict[str, Clock] | None = None) -> None:
        message, time, _ = entry
        sender = message.sender
        if sender == self._me:
            self.self_pending.remove(time[self._me])
        _merge(self.known, {k: v for k, v in time.items() if k != self._me})
        if pairs is None:
            pairs = decode_pairs(message, self.protocol)
        self.merge_pairs(pairs)
        self.deliver_upstream(without_header_unchecked(
            without_header_unchecked(message, TIME), PAIRS))

    def merge_pairs(self, pairs: Mapping[str, Clock]) -> None:
        """Take on the pairs of a delivered message (its sender's causal past of sends),
        but this member's own: that one is satisfied now."""
        for dest, time in pairs.items():
            # not only members: a pair for a member whose join this member has not heard
            # of yet must be passed on all the same (it names a message sent to it)
            if dest != self._me and dest not in self.departed:
                # a new dict: one send's time is shared by the pairs of its destinations
                merged = dict(self.pairs.get(dest, ()))
                _merge(merged, time)
                self.pairs[dest] = merged

    def _drain(self, traced: bool = True) -> list[str]:
        delivered = []
        while (entry := take_first_deliverable(self.buffer, self._held_by,
                                               self._buffered_ids, self._holder,
                                               self._still_held)) is not None:
            if traced:
                self.host.trace("unbuffer", entry[0])
            delivered.append(entry[0].message_id)
            self._deliver(entry)
        return delivered

    # -- membership -----------------------------------------------------------------------
    def member_removed(self, name: str) -> None:
        self.pairs.pop(name, None)  # nothing will be sent to it again
        self.departed.add(name)
        warn_held_on(self, name, log)

    # -- introspection --------------------------------------------------------------------
    def held(self) -> list[GroupMessage]:
        return [entry[0] for entry in self.buffer]

    def waiting_for(self) -> dict[str, list[str]]:
        return {entry[0].message_id: self._waits_on(entry) for entry in self.buffer}

    def release_waiting_on(self, name: str) -> list[str]:
        needed = [entry[2].get(name, 0) for entry in self.buffer if name in self._waits_on(entry)]
        if not needed or name == self._me:
            return []
        self.known[name] = max(needed)  # give up on the sends of name still missing
        self._held_by.clear()
        for entry in self.buffer:
            if name in self._waits_on(entry):
                self.host.trace("unbuffer", entry[0], forced=True)
        released = self._drain(traced=False)
        self.count("released", len(released))
        return released

    # -- state for the model checker ------------------------------------------------------
    def snapshot(self) -> Hashable:
        return (
            self.sends,
            freeze_clock(self.known),
            tuple(self.self_pending),
            tuple((dest, freeze_clock(time)) for dest, time in sorted(self.pairs.items())),
            # messages hash and compare by what travels; their headers hold the rest
            tuple(entry[0] for entry in self.buffer),
            tuple(sorted(self.departed)),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        sends, known, pending, pairs, buffered, departed, self.control_count = snapshot  # type: ignore[misc]
        self.departed = set(departed)
        self.sends = sends
        self.known = dict(known)
        self.self_pending = list(pending)
        self.pairs = {dest: dict(time) for dest, time in pairs}
        self.buffer = []
        self._held_by.clear()
        self._buffered_ids.clear()
        for message in buffered:
            self.buffer.append(self._entry(message, decode_clock(message, TIME, self.protocol),
                                           decode_pairs(message, self.protocol)))
            self._buffered_ids.add(message.message_id)
        self.buffer.sort(key=_canonical)


class SesForgetsPairsManager(SesManager):
    """KNOWN BAD: does not take on the pairs of what it delivers, so what it sends next
    does not carry the messages its causes sent to others."""

    def merge_pairs(self, pairs: Mapping[str, Clock]) -> None:
        return None


class SesModule(CausalityModule):
    """Schiper-Eggli-Sandoz causal unicast and multicast."""

    name = "ses"
    manager_class = SesManager
    description = ("causal unicast/multicast with vector times and (destination, time) "
                   "pairs (Schiper-Eggli-Sandoz; example plugin)")
    symmetry_headers = {TIME: "clock", PAIRS: rename_pairs}


class SesForgetsPairsModule(SesModule):
    """SES whose receivers forget the pairs of what they deliver (known-bad)."""

    name = "ses-forgets-pairs"
    manager_class = SesForgetsPairsManager
    description = ("KNOWN BAD (example plugin): ses whose receivers do not take on the pairs "
                   "of what they deliver; a reaction overtakes its cause through a third party")
    known_bad = True
    # (flags are read from the class itself: a variant restates what it shares)
    symmetry_headers = {TIME: "clock", PAIRS: rename_pairs}
