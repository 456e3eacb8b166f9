"""``reliable`` (``--filter reliable``, before any fault filter): a layer under any
causality module that makes links reliable and FIFO (docs/sessions.md, "Faults"), after
JGroups' UNICAST3. Per ordered pair of processes it numbers frames (header ``~r``),
acknowledges them cumulatively and selectively (header ``~a``), retransmits with an
adaptive timeout on the host's ticker, and drops duplicates. Its own acknowledgements
are not retransmitted: a lost one is repaired by the retransmission it provokes.

A send to several members leaves as one frame to all of them, numbered for each: ``~r``
is then the mapping {destination: number} (as ``((name, number), ...)``: headers hold no
dicts; a frame to one destination keeps the bare number), and each receiver takes its
own entry. The transport signs and deflates that frame once, the server fans it out,
and the members of one gateway inflate it once (:class:`~groupcomm.wire.streams.SharedStreams`).
Each destination keeps its own entry in flight, and only a destination that lacks a
frame gets it again, alone (its copy is built then, not at send). A destination whose
window is full, or that has frames queued already, gets its own copy in its queue, so
that each destination's numbers leave in order. Acknowledgements go the same way: those
owed to several peers at the same moment (end of batch, tick) leave as one frame to
all, and a frame to several destinations carries those owed to any of them; ``~a`` is
then the mapping {peer: (cumulative, selective, hold)}. A frame numbered without an
entry for its receiver, an acknowledgement frame without one, or a malformed mapping is
a :class:`ProtocolViolation`.

Acknowledgements are grouped and delayed, as TCP's delayed ACK and UNICAST3's ack batching
are: one acknowledgement per peer covers every frame that came from it in one batch of
input (what the host read in one turn, see :meth:`FilterHost.add_batch_listener`), and
is held until the host's next tick (at most :data:`ACK_DELAY` after the frame came when
batches come more often than ticks) in case more come, or a frame of our own to that
peer leaves first and carries it (the header ``~a`` on a numbered frame). It is not
held when the batch brought a frame out of order, filled a gap or repeated one (the
sender may be retransmitting: it hears the selective part at once), nor after
:data:`ACK_EVERY` frames. Each acknowledgement says how long it was held, and the sender
takes that out of its round-trip sample and allows :data:`ACK_DELAY` in its timeout, so
the delay is never taken for network time nor makes a timeout fire early.

Retransmission is paced per peer, as TCP paces it, so that a peer that does not answer
(a server down, a member busy) is not flooded: when the oldest frame's timeout expires,
at most :data:`BURST` overdue frames go again and the peer's timeout doubles (up to
:data:`MAX_RTO`); the rest follow as acknowledgements come back, two for each frame
acknowledged. A copy sent again carries the header ``~rs``, which tells the transport to
start every compressed stream to that destination (alone or with others) afresh: the
copy before may have been lost in a stream the receiver can no longer decode.

A frame from a peer that carries no sequence number says that peer runs without the
layer (``--no-reliable``, or a program that did not ask for it): it would never
acknowledge, and every copy resent would reach its application again, so what is held
for it is let go and frames to it go unnumbered from then on. A peer without the layer
that never sends gets a copy each timeout, each a duplicate there: every member of a
session should run the layer, or none.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.filtering import FilterHost, MessageFilter, MessageFilterCreator
from groupcomm.core.headers import RESENT
from groupcomm.core.messages import ControlMessage, GroupMessage, ReceivedMessage, SentMessage

PROTOCOL = "reliable"
SEQ = "~r"
ACK = "~a"
INITIAL_RTO = 0.2
MAX_RTO = 3.0
#: floor of the adaptive timeout (a local link's round trip is well under a millisecond,
#: but the peer's I/O thread may be busy for a few)
MIN_RTO = 0.03
WINDOW = 4096
MAX_SACK = 64
#: Frames further ahead than this of the next expected one are dropped (and resent).
RECEIVE_WINDOW = 8192
#: departed members remembered (see ReliableManager.departed)
DEPARTED_KEPT = 4096
#: most frames sent again to one peer when its timeout expires
BURST = 32
#: frames sent again for each one newly acknowledged, while overdue ones remain
ACK_CLOCKED = 2
#: longest an acknowledgement is held, in seconds: when a batch ends this long after the
#: first frame it owes came, it goes; the host's tick (every 20 ms in the communicator,
#: TICK_INTERVAL) sends whatever is owed. Senders allow it in their timeout.
ACK_DELAY = 0.02
#: frames from one peer after which its acknowledgement goes at once, within the batch
#: (keeps the sender's window and ack-clocked resends moving)
ACK_EVERY = 64


@dataclass
class _Owed:
    """An acknowledgement owed to one peer (see the module's docstring)."""

    application_name: str
    session_name: str
    #: when the first frame it covers came
    since: float
    #: when the latest frame it covers came (its hold is measured from there)
    latest: float
    frames: int = 1
    #: out of order, a gap filled or a duplicate: goes at the end of the batch
    urgent: bool = False


@dataclass
class _InFlight:
    #: the frame as it left: possibly to several destinations, numbered for each (the
    #: copy to this peer alone is built only if it has to go again, see :meth:`single`)
    message: SentMessage
    seq: int
    due: float
    rto: float
    sent_at: float = 0.0
    attempts: int = 1

    def single(self, peer: str) -> SentMessage:
        """The frame to ``peer`` alone, with its own number."""
        copy = self.message.to((peer,)).with_header(SEQ, self.seq)
        assert isinstance(copy, SentMessage)
        return copy


class ReliableManager:
    """State shared by the two filters of the reliable layer at one communicator."""

    def __init__(self, host: FilterHost) -> None:
        self.host = host
        self.next_seq: dict[str, int] = {}
        self.in_flight: dict[str, OrderedDict[int, _InFlight]] = {}
        self.waiting: dict[str, deque[SentMessage]] = {}
        self.next_expected: dict[str, int] = {}
        self.out_of_order: dict[str, dict[int, ReceivedMessage]] = {}
        self.send_filter: ReliableSendFilter | None = None
        self.receive_filter: ReliableReceiveFilter | None = None
        #: peers seen sending without the layer
        self.without_layer: set[str] = set()
        #: acks_sent counts acknowledgements (one per peer), ack_frames_sent the frames
        #: that carried them alone (one to several peers at once)
        self.stats = {"retransmissions": 0, "duplicates_dropped": 0, "acks_sent": 0,
                      "ack_frames_sent": 0,
                      "acks_piggybacked": 0, "frames_received": 0,
                      "too_far_ahead": 0, "to_departed": 0, "unacknowledged_at_departure": 0,
                      "peers_without_layer": 0}
        #: per peer: the acknowledgement owed to it, not sent yet (insertion order: the
        #: order the peers were heard from)
        self.owed: dict[str, _Owed] = {}
        self._ack_ids = 0
        #: members that left, the latest DEPARTED_KEPT of them: a name never comes back
        #: (a returning member is NAME~2), so a frame still addressed to one (tagged
        #: before the departure reached this member) is undeliverable, not to retransmit
        self.departed: OrderedDict[str, None] = OrderedDict()
        #: per peer: smoothed round trip and its variation (RFC 6298), from frames sent once
        self.srtt: dict[str, float] = {}
        self.rttvar: dict[str, float] = {}
        #: per peer: the multiplier of its timeout after timeouts without an answer
        #: (doubles at each, back to 1 with a round trip measured)
        self.backoff: dict[str, float] = {}
        #: per peer: when its next timeout-driven burst may go
        self.next_burst: dict[str, float] = {}
        host.add_session_listener(self)
        host.add_ticker(self.tick)
        host.add_batch_listener(self.end_of_batch)

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        return None

    def client_left(self, client_name: str, application_name: str) -> None:
        # what it never acknowledged may not have reached it: the application is told
        # (a false suspicion included: the name comes back as a new member, which these
        # were not addressed to)
        unacked = [f.message for f in self.in_flight.get(client_name, {}).values()]
        unacked += list(self.waiting.get(client_name, ()))
        ids = [m.message_id for m in unacked if m.is_user_message()]
        if ids:
            self.stats["unacknowledged_at_departure"] += len(ids)
            self.host.report_undeliverable(
                ids, f"to {client_name} were not acknowledged before it left (they may "
                "not have reached it)")
        for table in (self.next_seq, self.in_flight, self.waiting, self.next_expected,
                      self.out_of_order, self.srtt, self.rttvar, self.backoff,
                      self.next_burst, self.owed):
            table.pop(client_name, None)
        self.without_layer.discard(client_name)
        self.departed[client_name] = None
        if len(self.departed) > DEPARTED_KEPT:
            self.departed.popitem(last=False)

    def send(self, message: SentMessage) -> None:
        """Number ``message`` for each remote destination and send it, once, to all those
        it may go to now (the others queue their own copy, in number order)."""
        assert self.send_filter is not None
        me = self.host.name
        if me in message.destinations:
            self.send_filter.forward(message.to((me,)))  # loops back locally, no link
        now_going: list[tuple[str, int]] = []
        unnumbered: list[str] = []
        for dest in message.destinations:
            if dest == me:
                continue
            if dest in self.departed:
                # addressed before its departure was processed here: nobody will ever
                # acknowledge it, and retransmitting it would go on for ever
                self.stats["to_departed"] += 1
                if message.is_user_message():
                    self.host.report_undeliverable(
                        [message.message_id], f"to {dest} were not sent: it left")
                continue
            if dest in self.without_layer:
                unnumbered.append(dest)
                continue
            seq = self.next_seq.get(dest, 0) + 1
            self.next_seq[dest] = seq
            if len(self.in_flight.get(dest, ())) >= WINDOW or self.waiting.get(dest):
                stamped = message.to((dest,)).with_header(SEQ, seq)  # in number order
                assert isinstance(stamped, SentMessage)
                self.waiting.setdefault(dest, deque()).append(stamped)
                continue
            now_going.append((dest, seq))
        if unnumbered:
            self.send_filter.forward(message.to(tuple(unnumbered)))
        if now_going:
            self._transmit(now_going, message)

    def _transmit(self, going: list[tuple[str, int]], message: SentMessage) -> None:
        """Send ``message`` once to the destinations of ``going``, numbered (``~r``) for
        each, carrying the acknowledgements owed to any of them."""
        assert self.send_filter is not None
        now = self.host.now()
        for dest, seq in going:
            rto = self.rto(dest)
            self.in_flight.setdefault(dest, OrderedDict())[seq] = _InFlight(
                message, seq, now + rto, rto, sent_at=now)
        headers: dict[str, Any]
        if len(going) == 1:
            dest, seq = going[0]
            headers = {SEQ: seq}
            owed = self.owed.pop(dest, None) if self.owed else None
            if owed is not None:
                # the acknowledgement owed to dest rides on this frame (only this copy: one
                # sent again later would carry a stale one, and a wrong hold)
                self.stats["acks_piggybacked"] += 1
                headers[ACK] = self._ack_value(dest, owed, now)
        else:
            headers = {SEQ: tuple(going)}
            acks = []
            if self.owed:
                for dest, _ in going:
                    owed = self.owed.pop(dest, None)
                    if owed is not None:
                        acks.append((dest, self._ack_value(dest, owed, now)))
            if acks:
                self.stats["acks_piggybacked"] += len(acks)
                headers[ACK] = tuple(acks)
        dests = tuple(dest for dest, _ in going)
        frame = message if message.destinations == dests else message.to(dests)
        self.send_filter.forward(frame.with_headers(**headers))

    def rto(self, peer: str) -> float:
        """The retransmission timeout for ``peer``: SRTT + 4 RTTVAR, within bounds,
        times its backoff."""
        srtt = self.srtt.get(peer)
        base = INITIAL_RTO if srtt is None else srtt + 4 * self.rttvar[peer]
        # the peer may hold its acknowledgement ACK_DELAY: not network time, but waited for
        return min(MAX_RTO, (max(MIN_RTO, base) + ACK_DELAY) * self.backoff.get(peer, 1.0))

    def _sample_rtt(self, peer: str, sample: float) -> None:
        srtt = self.srtt.get(peer)
        if srtt is None:
            self.srtt[peer], self.rttvar[peer] = sample, sample / 2
            return
        self.rttvar[peer] = 0.75 * self.rttvar[peer] + 0.25 * abs(srtt - sample)
        self.srtt[peer] = 0.875 * srtt + 0.125 * sample

    def acknowledged(self, peer: str, cumulative: int, selective: Sequence[int],
                     held: float = 0.0) -> None:
        """``peer`` has everything up to ``cumulative`` and the ``selective`` numbers; it
        held this acknowledgement ``held`` seconds after the latest frame it covers."""
        flight = self.in_flight.get(peer)
        if not flight:
            return
        # the frames in flight are in the order of their numbers: the cumulative part is
        # a prefix, taken without walking the rest (up to WINDOW frames) at every ack
        acked = []
        while flight:
            first = next(iter(flight))
            if first > cumulative:
                break
            acked.append(flight.pop(first))
        acked += [e for e in (flight.pop(s, None) for s in selective) if e is not None]
        if acked:  # the application may let go of what it kept in case the process died
            self.host.report_acknowledged(
                peer, [e.message.message_id for e in acked if e.message.is_user_message()])
        now = self.host.now()
        # Karn's rule: only frames sent once give an unambiguous round trip
        once = [e for e in acked if e.attempts == 1]
        if once:
            self._sample_rtt(peer, max(0.0, now - max(e.sent_at for e in once) - held))
            self.backoff.pop(peer, None)
        if acked and flight:
            # the peer answers again: what is overdue follows, clocked by its answers
            self._resend(peer, flight, now, ACK_CLOCKED * len(acked))
        queue = self.waiting.get(peer)
        while queue and len(flight) < WINDOW:
            stamped = queue.popleft()
            self._transmit([(peer, int(stamped.headers[SEQ]))], stamped)  # type: ignore[arg-type]

    def tick(self, now: float) -> None:
        """Send the acknowledgements owed. For each peer whose oldest frame is overdue:
        send again at most :data:`BURST` overdue frames and double the peer's timeout (up
        to :data:`MAX_RTO`)."""
        if self.owed:
            self._send_owed(now, everything=True)
        for peer, flight in self.in_flight.items():
            if not flight or now < self.next_burst.get(peer, 0.0):
                continue
            if next(iter(flight.values())).due > now:
                continue
            if self._resend(peer, flight, now, BURST):
                self.backoff[peer] = min(self.backoff.get(peer, 1.0) * 2,
                                         MAX_RTO / MIN_RTO)
                self.next_burst[peer] = now + self.rto(peer)

    def _resend(self, peer: str, flight: OrderedDict[int, _InFlight], now: float,
                most: int) -> int:
        """Send again up to ``most`` of ``peer``'s overdue frames, oldest first; how many."""
        assert self.send_filter is not None
        sent = 0
        for entry in flight.values():
            if sent >= most:
                break
            if entry.due > now:
                continue
            entry.attempts += 1
            entry.rto = min(max(entry.rto, MIN_RTO) * 2, MAX_RTO)
            entry.due = now + entry.rto
            sent += 1
            self.stats["retransmissions"] += 1
            # to this peer alone: the others may have had it
            self.send_filter.forward(entry.single(peer).with_header(RESENT, True))
        return sent

    def receive(self, message: ReceivedMessage) -> None:
        """Deduplicate and reorder a numbered frame, pass on what is in order, ack."""
        assert self.receive_filter is not None
        peer = message.sender
        seq = message.headers.get(SEQ)
        if type(seq) is tuple:  # a frame to several: {destination: number}
            seq = own_entry(seq, self.host.name, f"sequence numbers from {peer}")
            if seq is None:
                raise ProtocolViolation(
                    f"reliable: frame from {peer} numbered for "
                    f"{', '.join(d for d, _ in message.headers[SEQ])} but not for "  # type: ignore[union-attr]
                    f"{self.host.name}")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise ProtocolViolation(f"reliable: bad sequence number {seq!r} from {peer}")
        self.stats["frames_received"] += 1
        expected = self.next_expected.get(peer, 1)
        pending = self.out_of_order.setdefault(peer, {})
        # TCP's rule: what is not the next frame in a clean stream is acknowledged at once
        urgent = bool(pending)
        if seq < expected or seq in pending:
            self.stats["duplicates_dropped"] += 1
            urgent = True
        elif seq >= expected + RECEIVE_WINDOW:
            self.stats["too_far_ahead"] += 1
            urgent = True
        else:
            pending[seq] = message
            while expected in pending:
                ready = pending.pop(expected)
                expected += 1
                self.next_expected[peer] = expected
                self.receive_filter.forward(
                    ready.without_headers(SEQ, RESENT, ACK))  # type: ignore[arg-type]
            urgent = urgent or bool(pending)
        self._owe(message, urgent)

    def _owe(self, about: ReceivedMessage, urgent: bool) -> None:
        """Note that ``about``'s sender is owed an acknowledgement."""
        peer = about.sender
        if peer not in self.next_expected and peer not in self.out_of_order:
            return  # the peer left meanwhile
        now = self.host.now()
        owed = self.owed.get(peer)
        if owed is None:
            self.owed[peer] = _Owed(about.application_name, about.session_name, now, now,
                                    urgent=urgent)
            return
        owed.frames += 1
        owed.latest = now
        owed.urgent = owed.urgent or urgent
        if owed.frames >= ACK_EVERY:
            # a long batch (thousands of frames in one read) must not starve the
            # sender's window and its ack-clocked resends until the batch ends
            self._send_ack(peer, self.owed.pop(peer), now)

    def end_of_batch(self) -> None:
        """A batch of input is done: send what is owed and should not wait (urgent, or
        held :data:`ACK_DELAY` already); the rest waits for the next tick or a frame of
        ours to that peer."""
        if self.owed:
            self._send_owed(self.host.now(), everything=False)

    def _send_owed(self, now: float, everything: bool) -> None:
        """Send the acknowledgements due: one frame to all the peers of one session owed
        one (``~a`` {peer: acknowledgement}), rather than one frame each."""
        groups: dict[tuple[str, str], list[tuple[str, _Owed]]] = {}
        for peer, owed in self.owed.items():
            if everything or owed.urgent or now - owed.since >= ACK_DELAY:
                groups.setdefault((owed.application_name, owed.session_name), []).append(
                    (peer, owed))
        for (application, session), due in groups.items():
            for peer, _ in due:
                del self.owed[peer]
            if len(due) == 1:
                self._send_ack(due[0][0], due[0][1], now)
                continue
            self.stats["acks_sent"] += len(due)
            self.stats["ack_frames_sent"] += 1
            self.send_filter.forward(self._ack_frame(  # type: ignore[union-attr]
                application, session, tuple(peer for peer, _ in due),
                tuple((peer, self._ack_value(peer, owed, now)) for peer, owed in due)))

    def _ack_value(self, peer: str, owed: _Owed, now: float) -> tuple[int, tuple[int, ...], int]:
        """The ``~a`` header: cumulative, selective, and the hold in microseconds."""
        cumulative = self.next_expected.get(peer, 1) - 1
        selective = tuple(sorted(self.out_of_order.get(peer, {}))[:MAX_SACK])
        return cumulative, selective, max(0, round((now - owed.latest) * 1e6))

    def _ack_frame(self, application: str, session: str, peers: tuple[str, ...],
                   value: Any) -> SentMessage:
        self._ack_ids += 1
        return SentMessage(
            application_name=application, session_name=session,
            user_message=ControlMessage(PROTOCOL, "rack"),
            message_id=f"{self.host.name}~rack{self._ack_ids}", sender=self.host.name,
            headers={ACK: value}, destinations=peers,
        )

    def _send_ack(self, peer: str, owed: _Owed, now: float) -> None:
        assert self.send_filter is not None
        self.stats["acks_sent"] += 1
        self.stats["ack_frames_sent"] += 1
        self.send_filter.forward(self._ack_frame(
            owed.application_name, owed.session_name, (peer,),
            self._ack_value(peer, owed, now)))

    def peer_without_layer(self, peer: str) -> None:
        """``peer`` sent a frame without a sequence number: it runs without the layer."""
        if peer == self.host.name or peer in self.without_layer:
            return
        self.without_layer.add(peer)
        self.stats["peers_without_layer"] += 1
        # what it got once it keeps; nothing would ever be acknowledged
        self.in_flight.pop(peer, None)
        self.waiting.pop(peer, None)

    def held(self) -> list[GroupMessage]:
        """Frames not yet acknowledged or waiting for the window, and out-of-order ones."""
        return [*(entry.single(peer) for peer, flight in self.in_flight.items()
                  for entry in flight.values()),
                *(m for queue in self.waiting.values() for m in queue),
                *(m for pending in self.out_of_order.values() for m in pending.values())]


class _ReliableFilter(MessageFilter[Any]):
    def __init__(self, manager: ReliableManager) -> None:
        super().__init__()
        self.manager = manager


class ReliableSendFilter(_ReliableFilter):
    """Numbers and keeps every frame until it is acknowledged."""

    def filter_message(self, message: SentMessage) -> None:
        if message.is_control_for(PROTOCOL):
            self.forward(message)
        else:
            self.manager.send(message)


class ReliableReceiveFilter(_ReliableFilter):
    """Consumes acknowledgements; deduplicates and orders numbered frames."""

    def filter_message(self, message: ReceivedMessage) -> None:
        headers = message.headers
        if message.is_control_for(PROTOCOL):
            self._acknowledgement(message.sender, headers.get(ACK), required=True)
            return
        if SEQ in headers:
            if ACK in headers:  # acknowledgements riding on a frame
                self._acknowledgement(message.sender, headers[ACK], required=False)
            self.manager.receive(message)
        else:  # looped back locally, or a peer without the layer
            self.manager.peer_without_layer(message.sender)
            self.forward(message)


    def _acknowledgement(self, peer: str, value: Any, required: bool) -> None:
        """Check the ``~a`` header ``value`` and take in this member's acknowledgement (a
        hold is optional). In the mapping form (to several), this member's entry; it
        must have one when ``required`` (an acknowledgement frame, sent only to those
        with one), and may not on a data frame (acknowledging some of its destinations)."""
        if type(value) is tuple and value and type(value[0]) is tuple:
            me = self.manager.host.name
            own = own_entry(value, me, f"acknowledgements from {peer}")
            if own is None:
                if required:
                    raise ProtocolViolation(
                        f"reliable: acknowledgement from {peer} for "
                        f"{', '.join(p for p, _ in value)} but not for {me}")
                return
            value = own
        if (isinstance(value, tuple) and len(value) in (2, 3) and _is_int(value[0])
                and isinstance(value[1], tuple) and all(_is_int(s) for s in value[1])
                and (len(value) == 2 or (_is_int(value[2]) and value[2] >= 0))):
            held = value[2] / 1e6 if len(value) == 3 else 0.0
            self.manager.acknowledged(peer, value[0], value[1], held)
            return
        raise ProtocolViolation(f"reliable: malformed acknowledgement {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def own_entry(mapping: tuple[Any, ...], me: str, what: str) -> Any:
    """The value for ``me`` in ``mapping``, a header's ``((name, value), ...)`` form of
    {name: value} (headers hold no dicts), or None; ProtocolViolation naming ``what``
    if it is not that form."""
    own = None
    for pair in mapping:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str:
            raise ProtocolViolation(
                f"reliable: malformed {what}: {pair!r} is not a (member, value) pair")
        if pair[0] == me:
            own = pair[1]
    if not mapping:
        raise ProtocolViolation(f"reliable: malformed {what}: empty")
    return own


class _ReliableCreator(MessageFilterCreator[Any]):
    """One side (``send`` or ``receive``) of ``--filter reliable``, which takes no options;
    both sides of a member share its :class:`ReliableManager`."""

    description = "retransmission, acknowledgements, duplicate suppression, per-pair FIFO"

    def __init__(self, side: str, **options: Any) -> None:
        if options:
            raise ValueError(f"reliable takes no options, got {sorted(options)}")
        self.side = side

    def get_message_filter(self, host: FilterHost) -> MessageFilter[Any]:
        manager = host.shared.get("reliable")
        if manager is None:
            manager = host.shared["reliable"] = ReliableManager(host)
        if self.side == "send":
            manager.send_filter = manager.send_filter or ReliableSendFilter(manager)
            return manager.send_filter
        manager.receive_filter = manager.receive_filter or ReliableReceiveFilter(manager)
        return manager.receive_filter


RELIABLE_FILTER = {
    "name": "reliable",
    "send": functools.partial(_ReliableCreator, "send"),
    "receive": functools.partial(_ReliableCreator, "receive"),
    "description": "reliable FIFO links under any causality module: seqnos, acks, "
                   "retransmission with backoff, duplicate suppression",
}
