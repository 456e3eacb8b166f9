"""``vector``: causal broadcast with vector timestamps (seed 003; Birman, Schiper and
Stephenson 1991). The rule, broadcast only, the late joiners' ``base`` and ``skip``
controls and void processes: docs/protocols.md.

The stamp (header ``v``) is the sparse site vector, names sent once. Where the sources
are silent: a member that leaves before its base arrived never saw the join (the server
relays a member's frames before its departure notice), so it becomes void too (found by
``groupcomm check --join``); what depends on a departed member's message that never
came stays held (logged at WARNING) until :meth:`VectorManager.release_waiting_on`. The
slides' traceable steps are logged at DEBUG under their names
(``VectorTimeStampedMessageBuffered`` ...).

``VectorForgetsJoinsModule`` is the known-bad ``vector-forgets-joins`` (docs/protocols.md,
"Known-bad modules"), which ``groupcomm check --join`` and the trace analysis catch.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from operator import itemgetter

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
    control_message,
    decode_clock,
    encode_clock,
    freeze_clock,
    int_header,
    take_first_deliverable,
    warn_held_on,
    with_header_unchecked,
    without_header_unchecked,
)

log = logging.getLogger(__name__)

#: the counts of a decoded stamp, whose entries carry their counts: each reads as itself
#: (``_ITSELF[n] == n`` for every count, all >= 0), indexed in C like a plan's tuple
_ITSELF = range(sys.maxsize)

NAME = "vector"
STAMP = "v"
BASE = "b"
KNOWN = "k"
SKIP = "s"


class VectorManager(CausalityManager):
    """The site vector, the buffer, and the bases a late joiner waits for."""

    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.clock: dict[str, int] = {}
        #: held application messages, with their decoded stamps
        self.buffer: list[tuple[ReceivedMessage, dict[str, int]]] = []
        #: message id -> the member that held it at the last look (see take_first_deliverable)
        self._held_by: dict[str, str] = {}
        #: the ids of the buffered messages (a duplicate is found without a scan)
        self._buffered_ids: set[str] = set()
        #: sender -> numbers of its broadcasts not addressed to us (``skip`` controls)
        self.skips: dict[str, set[int]] = {}
        #: senders whose count at our join we do not know yet (we joined late)
        self.awaiting_base: set[str] = set()
        #: processes none of whose messages is addressed to us (gone before our join, or
        #: before they saw it): a dependency on one of their messages is void
        self.void: set[str] = set()
        #: the members when we joined (late): a process a base names beyond them is void
        self.joined_with: frozenset[str] = frozenset()
        self._forget_stamp_names()
        #: sender -> how to read its stamps while they name the same members (see
        #: _StampPlan); made at a delivery through the general path
        self._plans: dict[str, _StampPlan] = {}

    def _forget_stamp_names(self) -> None:
        # the stamp's names, kept from one send to the next (see _encoded_clock)
        self._stamp_names: tuple[str, ...] | None = None
        self._stamp_zero_names: tuple[str, ...] = ()
        self._stamp_clock_size = 0
        #: reads the counts of _stamp_names from the clock in one C-level call
        self._stamp_counts: Callable[[dict[str, int]], tuple[int, ...]] | None = None

    # -- membership ---------------------------------------------------------------------
    def client_joined(
        self, client_name: str, application_name: str, session_name: str,
        is_new_session: bool, is_new_application: bool, all_users: Sequence[str],
    ) -> None:
        me = self.host.name
        if client_name == me and me not in self.members:
            # we are the newcomer: everyone already here tells us their count
            self.awaiting_base |= {u for u in all_users if u != me and u not in self.clock}
            self.joined_with = frozenset(all_users)
        is_new = client_name != me and client_name not in self.members
        super().client_joined(client_name, application_name, session_name, is_new_session,
                              is_new_application, all_users)
        if is_new:
            base = self.clock.get(me, 0)
            self.send_downstream(control_message(self, NAME, "base", client_name,
                                              headers={BASE: base,
                                                       KNOWN: encode_clock(self.clock)}))

    def member_removed(self, name: str) -> None:
        if name in self.awaiting_base:
            # it left without having seen our join: the server relays a member's frames
            # before its departure notice, so no base (and no message addressed to us) is
            # on its way; a dependency on its messages is void
            self.awaiting_base.discard(name)
            self.void.add(name)
            self._drain()
        warn_held_on(self, name, log)

    # -- send side ----------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Stamp the broadcast with a copy of the site vector, then send a ``skip`` to
        each member that joined after it was tagged (filling that number in)."""
        me = self.host.name
        seq = self.clock[me] = self.clock.get(me, 0) + 1
        log.debug("%s: LocalCountIncrementedInSiteVectorTimeStamp %d", me, seq)
        self.send_downstream(with_header_unchecked(message, STAMP, self._encoded_clock()))
        missing = set(self.members).difference(message.destinations)
        missing.discard(me)
        if missing:
            for member in self.members:
                if member in missing:
                    self.send_downstream(control_message(
                        self, NAME, "skip", member, about=message.message_id,
                        headers={SKIP: seq}))

    def _encoded_clock(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """``encode_clock(self.clock)``, its sorted names kept between sends.

        Entries are only added or raised, never removed or lowered (a restore replaces
        the whole clock and forgets the names), so the non-zero names are the same as at
        the last encoding while the clock has as many entries and the entries that were
        zero still are; then only the counts are read again."""
        clock = self.clock
        counts = self._stamp_counts
        if (counts is not None and len(clock) == self._stamp_clock_size
                and not (self._stamp_zero_names
                         and any(map(clock.__getitem__, self._stamp_zero_names)))):
            return self._stamp_names, counts(clock)  # type: ignore[return-value]
        encoded = encode_clock(clock)
        names = self._stamp_names = encoded[0]
        self._stamp_zero_names = tuple(k for k, v in clock.items() if not v)
        self._stamp_clock_size = len(clock)
        # itemgetter of one key returns the value itself, not a 1-tuple
        self._stamp_counts = (itemgetter(*names) if len(names) > 1 else
                              (lambda c, name=names[0]: (c[name],)) if names else
                              (lambda c: ()))
        return encoded

    # -- receive side -------------------------------------------------------------------
    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver in causal order, buffering what arrives before its causes."""
        me = self.host.name
        sender = message.sender
        if sender == me:
            self.deliver_upstream(without_header_unchecked(message, STAMP))
            return
        plan = self._plans.get(sender)
        if plan is not None and not (self.buffer or self.skips or self.awaiting_base):
            # a stamp naming the plan's members, its counts checked in C-level passes,
            # goes to the rule as it is; any other (a bad one too: the general path says
            # what is wrong), or a held one, takes the general path
            value = message.headers.get(STAMP)
            if (type(value) is tuple and len(value) == 2 and value[0] == plan.names
                    and type(counts := value[1]) is tuple and len(counts) == len(plan.names)
                    and INT_ONLY.issuperset(map(type, counts)) and min(counts) >= 0):
                own = counts[plan.own]
                if self.blocker(sender, own, counts, plan.others) is None:
                    self.clock[sender] = own
                    log.debug("%s: VectorTimeStampedMessageDelivered %s", me,
                              message.message_id)
                    self.deliver_upstream(without_header_unchecked(message, STAMP))
                    return
        stamp = decode_clock(message, STAMP, NAME)
        if stamp.get(sender, 0) < 1:
            raise ProtocolViolation(
                f"{NAME}: stamp of {message.message_id} has no entry >= 1 for its sender "
                f"{sender}: {stamp}"
            )
        if ((stamp[sender] <= self.clock.get(sender, 0) and sender not in self.awaiting_base)
                or message.message_id in self._buffered_ids):
            self.count("duplicates")
            return
        if self.blocker(sender, stamp[sender], _ITSELF, stamp.items()) is None:
            log.debug("%s: VectorTimeStampedMessageDelivered %s", me, message.message_id)
            self._deliver(message, stamp)
            if self.buffer or self.skips:
                self._drain()
            else:
                names = message.headers[STAMP][0]
                plan = self._plans.get(sender)
                # names given twice decode to the last count: only the general path
                # reads such a stamp as it always did
                if (plan is None or plan.names != names) and len(set(names)) == len(names):
                    self._plans[sender] = _StampPlan(names, sender, self)
        else:
            log.debug("%s: VectorTimeStampedMessageBuffered %s", me, message.message_id)
            self.buffer.append((message, stamp))
            self._buffered_ids.add(message.message_id)
            self.host.trace("buffer", message, waiting_for=self._waits_on(sender, stamp))

    def on_control(self, message: ReceivedMessage) -> None:
        kind = message.user_message.kind
        sender = message.sender
        if kind == "base":
            base = int_header(message, BASE, NAME)
            if sender in self.awaiting_base:
                self.awaiting_base.discard(sender)
                self.clock[sender] = max(self.clock.get(sender, 0), base)
                if KNOWN in message.headers:
                    known = decode_clock(message, KNOWN, NAME)
                    self.void |= {k for k in known if k not in self.joined_with}
                self._drain()
            return
        if kind == "skip":
            seq = int_header(message, SKIP, NAME, minimum=1)
            if seq <= self.clock.get(sender, 0) and sender not in self.awaiting_base:
                self.count("duplicates")
                return
            self.skips.setdefault(sender, set()).add(seq)
            self._drain()
            return
        super().on_control(message)

    # -- the delivery rule -------------------------------------------------------------
    def blocker(self, sender: str, own: int | None, counts: Sequence[int],
                entries: Iterable[tuple[str, int]]) -> str | None:
        """The delivery rule (docs/protocols.md): the member whose messages keep a message
        from ``sender`` from delivery here now, or None: deliverable. The entries are read
        in order up to the first that holds, so any part of a stamp can be tested alone.

        ``own`` is the message's count of its sender's broadcasts (None: leave that
        clause out); ``entries`` are ``(k, at)``, k's count being ``counts[at]`` (a plan
        passes the stamp's tuple; a decoded stamp its items with :data:`_ITSELF`). The
        sender holds the message until it is the next from the sender and the sender's
        base has come; any other k while its count is of a message of k not delivered
        here or k's base has not come. Entries of the sender, of ours (the sender only
        depends on broadcasts of ours it delivered) and of void processes are passed
        over."""
        clock = self.clock
        awaiting = self.awaiting_base
        if own is not None and (own != clock.get(sender, 0) + 1 or sender in awaiting):
            return sender
        for k, at in entries:
            if ((counts[at] > clock.get(k, 0) or k in awaiting) and k != sender
                    and k != self.host.name and k not in self.void):
                return k
        return None

    def _waits_on(self, sender: str, stamp: dict[str, int]) -> list[str]:
        """The members :meth:`blocker` finds holding a message, its sender first."""
        first = [] if self.blocker(sender, stamp[sender], _ITSELF, ()) is None else [sender]
        return first + sorted(blocking(lambda rest: self.blocker(sender, None, _ITSELF, rest),
                                       stamp.items()))

    def _deliver(self, message: ReceivedMessage, stamp: dict[str, int]) -> None:
        sender = message.sender
        self.clock[sender] = stamp[sender]
        self.deliver_upstream(without_header_unchecked(message, STAMP))

    def _drain(self) -> None:
        rule = self.blocker

        def holder(entry: tuple) -> str | None:
            sender, stamp = entry[0].sender, entry[1]
            return rule(sender, stamp[sender], _ITSELF, stamp.items())

        def still_held(entry: tuple, k: str) -> bool:
            sender, stamp = entry[0].sender, entry[1]
            return rule(sender, stamp[sender], _ITSELF, ((k, stamp[k]),)) is not None

        progress = True
        while progress:
            progress = False
            for sender, seqs in list(self.skips.items()):
                if sender in self.awaiting_base:
                    continue
                while (nxt := self.clock.get(sender, 0) + 1) in seqs:
                    seqs.discard(nxt)
                    self.clock[sender] = nxt
                    progress = True
                for stale in [s for s in seqs if s <= self.clock.get(sender, 0)]:
                    seqs.discard(stale)
                if not seqs:
                    del self.skips[sender]
            entry = take_first_deliverable(self.buffer, self._held_by, self._buffered_ids,
                                           holder, still_held)
            if entry is not None:
                message, stamp = entry
                log.debug("%s: VectorTimeStampedMessageRemovedFromBuffer %s",
                          self.host.name, message.message_id)
                self.host.trace("unbuffer", message)
                self._deliver(message, stamp)
                progress = True

    # -- introspection ------------------------------------------------------------------
    def held(self) -> list[GroupMessage]:
        return [m for m, _ in self.buffer]

    def waiting_for(self) -> dict[str, list[str]]:
        return {m.message_id: self._waits_on(m.sender, s) for m, s in self.buffer}

    def release_waiting_on(self, name: str) -> list[str]:
        """Treat every message ``name`` sent as delivered, then deliver what can go."""
        before = {m.message_id for m, _ in self.buffer}
        self.awaiting_base.discard(name)
        self.skips.pop(name, None)
        for _ in range(len(self.buffer) + 1):
            self._drain()
            waiting = [(m, s) for m, s in self.buffer if name in self._waits_on(m.sender, s)]
            if not waiting:
                break
            current = self.clock.get(name, 0)
            # jump over the gap, but never past a held message of name itself
            own = [s[name] for m, s in self.buffer if m.sender == name]
            needed = [s.get(name, 0) for m, s in waiting if m.sender != name]
            options = [x for x in (min(own) - 1 if own else 0, max(needed, default=0))
                       if x > current]
            if not options:
                break
            self.clock[name] = min(options)
        released = sorted(before - {m.message_id for m, _ in self.buffer})
        self.count("released", len(released))
        return released

    def snapshot(self) -> Hashable:
        return (
            freeze_clock(self.clock),
            tuple(sorted(((m, freeze_clock(s)) for m, s in self.buffer),
                         key=lambda entry: entry[0].message_id)),
            tuple(sorted((k, tuple(sorted(v))) for k, v in self.skips.items() if v)),
            tuple(sorted(self.awaiting_base)),
            tuple(sorted(self.void)),
            tuple(sorted(self.joined_with)),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        (clock, buffer, skips, awaiting, void, joined_with,
         self.control_count) = snapshot  # type: ignore[misc]
        self.clock = dict(clock)
        self._forget_stamp_names()
        self._plans = {}
        self.buffer = [(m, dict(s)) for m, s in buffer]
        self._held_by = {}
        self._buffered_ids = {m.message_id for m, _ in self.buffer}
        self.skips = {k: set(v) for k, v in skips}
        self.awaiting_base = set(awaiting)
        self.void = set(void)
        self.joined_with = frozenset(joined_with)


class _StampPlan:
    """Where the counts sit in a sender's stamps that name the same members as one
    already decoded and delivered (the names change only at joins), so that they reach
    :meth:`VectorManager.blocker` without being decoded into a clock."""

    __slots__ = ("names", "own", "others")

    def __init__(self, names: tuple[str, ...], sender: str, manager: VectorManager) -> None:
        self.names = names
        #: where the sender's count is
        self.own = names.index(sender)
        #: (k, where) of the other entries, but those the rule passes over however much
        #: they count (ours, a void process's: a process stays void), asked of the rule
        self.others = tuple(
            (k, i) for i, k in enumerate(names)
            if i != self.own
            and manager.blocker(sender, None, _UNBOUNDED, ((k, 0),)) is not None)


#: a count larger than any: an entry the rule passes over with it is one it never reads
_UNBOUNDED = (sys.maxsize,)


class VectorModule(CausalityModule):
    name = NAME
    manager_class = VectorManager
    description = "causal broadcast with vector timestamps (broadcast only)"
    broadcast_only = True
    symmetry_headers = {STAMP: "clock", BASE: "int", KNOWN: "clock", SKIP: "int"}


class ForgetfulVectorManager(VectorManager):
    """Joins late as if the session had just started."""

    def client_joined(
        self, client_name: str, application_name: str, session_name: str,
        is_new_session: bool, is_new_application: bool, all_users: Sequence[str],
    ) -> None:
        super().client_joined(client_name, application_name, session_name, is_new_session,
                              is_new_application, all_users)
        self.awaiting_base.clear()  # the defect: nothing is learnt from the members

    def on_control(self, message: ReceivedMessage) -> None:
        if message.user_message.kind == "base":
            return  # the defect: the members' counts are thrown away
        super().on_control(message)


class VectorForgetsJoinsModule(VectorModule):
    name = "vector-forgets-joins"
    manager_class = ForgetfulVectorManager
    description = "KNOWN BAD: vector whose late joiner waits for messages sent before it joined"
    known_bad = True
