"""One member's ZeroMQ side: :class:`MemberLink`, its sockets and frames, and the
:class:`~groupcomm.protocol.actions.Out` of its protocol object. It runs on the loop
thread; what it does in a message's path is docs/architecture.md's steps 3 to 7.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from groupcomm.core.headers import RESENT
from groupcomm.core.messages import SentMessage, Withdrawn
from groupcomm.protocol.client import ClientProtocol
from groupcomm.protocol.placement import DEFAULT_PROBE_EVERY, Failover
from groupcomm.protocol.session_events import ServerSilent, SessionEvent
from groupcomm.transport.curve import ClientKeys
from groupcomm.transport.delays import DelayPlan
from groupcomm.wire.envelopes import (
    PackedEnvelope,
    PayloadTooLarge,
    pack_envelope,
    pack_envelopes,
)
from groupcomm.wire.frames import FORWARDED, FrameCodec, FrameRejected
from groupcomm.wire.session import seal_session
from groupcomm.wire.streams import StreamEncoder

log = logging.getLogger(__name__)

#: bytes of messages in a frame (and at most half the maximum frame, so that receivers
#: never refuse a batch that single messages would pass)
MAX_BATCH_BYTES = 512 * 1024
#: queued messages are sent once this many wait (otherwise once per turn)
MAX_OUTBOX_MESSAGES = 4096
#: bytes of a frame that are not the message envelope (the body's head, the signature)
FRAME_HEADROOM = 4096
#: frames waiting for slow sockets before the member stops taking new sends
MAX_BACKLOG_FRAMES = 10_000
#: the most room a sender waits for (Communicator.wait_for_room): the loop wakes senders
#: once the queue was within this of its limit
MAX_ROOM_ASKED = 256
#: seconds before a full socket or a paused inbox is looked at again
BACKLOG_RETRY = 0.01
#: longest stretch (s) a socket is read before heartbeats, timers and sends: a flood of
#: arrivals on a loaded machine must not make the member look dead
READ_BUDGET = 0.05
#: relayed frames remembered (batch and message ids; at most REMEMBERED_BYTES of
#: batches), so that a frame the server returns can go again in a fresh stream, or be
#: reported by the ids it held
REMEMBERED_FRAMES = 4096
REMEMBERED_BYTES = 8 * 1024 * 1024
#: plain ints: the flag enums' ``&`` runs in Python, three enum calls per frame read
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


class MemberLink:
    """One member's sockets and frames, and the ``Out`` of its protocol object (given
    by :meth:`drive`); the loop opens it on its thread (:meth:`open`)."""

    def __init__(self, *, name: str, server_address: str, routing: str, codec: FrameCodec,
                 curve: ClientKeys | None, bind_host: str, advertise_host: str,
                 max_pending: int, max_inbox: int, compress: bool = True,
                 servers: tuple[str, ...] = (),
                 probe_every: float = DEFAULT_PROBE_EVERY) -> None:
        self.name = name
        self.server_address = server_address
        #: the session's servers in rendezvous order, when more than one (docs/deploy.md):
        #: a silent server makes the member move along it, and come back to the first
        #: that answers
        self.failover = (Failover(servers, probe_every=probe_every, now=time.monotonic())
                         if len(servers) > 1 else None)
        if self.failover is not None:
            self.failover.index = servers.index(server_address)
        self._move_to: str | None = None
        #: a DEALER per server asked whether it answers (see Failover.probes_due)
        self._probes: dict[str, zmq.Socket] = {}
        self.routing = routing
        self.codec = codec
        self._curve = curve
        self._bind_host = bind_host
        self._advertise_host = advertise_host
        self.direct_address = ""
        self.max_pending = max_pending
        self.max_inbox = max_inbox
        self.protocol: ClientProtocol  # set by drive()
        self.stats: Counter[str] = Counter()
        #: when a list, ``("in", ns)`` as each message frame is taken up and ``("send",
        #: ns)``, ``("sent", ns)`` around each frame sent (``time.perf_counter_ns``): the
        #: timeline ``groupcomm bench --critical-path`` reads
        self.frame_timeline: list[tuple[str, int]] | None = None
        #: a sending thread waits here while the member's input queue is full
        self.room = threading.Condition()
        # -- what the application waits for
        self.joined = threading.Event()
        self.join_error: str | None = None
        self.left = threading.Event()
        self.state_done = threading.Event()
        #: set when the loop has closed the sockets (or never opened them)
        self.closed = threading.Event()
        # -- the protocol's status
        self._may_relay = False
        self._addresses: dict[str, str] = {}
        self._deadline = 0.0
        #: set by the loop: asks it for a turn of this member (see :meth:`owe_turn`)
        self.turn_owed: Callable[[MemberLink], None] = lambda link: None
        #: this member's turn is running (loop thread)
        self.in_turn = False
        #: the application queued sends that the loop has not looked at (any thread;
        #: see PollLoop.signal)
        self.signalled = False
        #: messages that could not be encoded, reported at the end of the turn
        #: (message id, why, lost with an incarnation declared gone) to report
        self._unsent: list[tuple[str, str, bool]] = []
        #: relayed frame's hash -> its batch (before the stream) and its messages' ids
        self._remembered: dict[int, tuple[bytes, tuple[str, ...]]] = {}
        self._remembered_bytes = 0
        # -- frames out
        self.delays = DelayPlan()
        self.streams = StreamEncoder(compress=compress)
        #: messages waiting to leave, by destination tuple, until flush_outbox
        self.outbox: dict[tuple[str, ...], list[SentMessage | PackedEnvelope]] = {}
        self.outbox_count = 0
        self._batch_budget = min(MAX_BATCH_BYTES, codec.max_frame // 2)
        #: the largest message envelope a frame carries
        self.frame_limit = codec.max_frame - min(FRAME_HEADROOM, codec.max_frame // 8)
        #: frames a socket could not take yet, per socket, in order
        self._backlogs: dict[zmq.Socket, deque[list[bytes]]] = {}
        self.backlog_frames = 0
        #: PUSH socket per peer (direct routing), connected on the first frame
        self._pushes: dict[str, zmq.Socket] = {}
        #: frames pushed to each peer; a graceful leave carries these counts, so receivers
        #: know when a leaver's last direct frame has arrived
        self.direct_sent: Counter[str] = Counter()
        #: linger (ms) of peer sockets at close: more than 0 when leaving gracefully
        self.push_linger_ms = 0
        self._dealer: zmq.Socket | None = None
        self._pull: zmq.Socket | None = None
        #: whether the loop polls this link's sockets, and whether it should (prepare())
        self.reading = False
        self.want_read = True

    def drive(self, protocol: ClientProtocol) -> None:
        """Drive ``protocol`` (made with this link as its ``Out``)."""
        self.protocol = protocol
        self._inputs = protocol.inputs
        self._inbox = protocol.port.inbox
        if self.failover is not None:
            protocol.add_event_listener(self._on_event)

    # -- failover between the session's servers (docs/deploy.md) ----------------------------
    def _on_event(self, event: SessionEvent) -> None:
        # on the loop thread, inside the protocol's turn: the move waits for its end
        if isinstance(event, ServerSilent) and self.failover is not None:
            self._move_to = self.failover.silent(time.monotonic())

    def move_to(self, address: str) -> None:
        """Talk to the session server at ``address`` from now on, and join it as a
        restarted server is joined (loop thread)."""
        dealer = self._dealer
        if dealer is None or address == self.server_address:
            return
        log.warning("%s: moving from session server %s to %s", self.name,
                    self.server_address, address)
        try:
            dealer.disconnect(self.server_address)
        except zmq.ZMQError:  # never connected (the join moved before it could)
            pass
        dealer.connect(address)
        self.server_address = address
        if self.failover is not None and address in self.failover.order:
            self.failover.index = self.failover.order.index(address)
        self.stats["server_moves"] += 1
        self.protocol.server_changed(time.monotonic())

    def _probe(self, now: float) -> None:
        """Ask the servers ranked before the one in use whether they answer, and move
        to one that does."""
        failover = self.failover
        assert failover is not None
        for address, socket in list(self._probes.items()):
            answered = False
            while True:
                try:
                    parts = socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:  # a frame signed with the session key: that server is alive
                    self.codec.open(parts[0])
                    answered = True
                except FrameRejected:
                    self.stats["probe_answers_rejected"] += 1
            if answered and failover.answered(address) is not None:
                self._close_probes()
                self.move_to(address)
                return
        for address in failover.probes_due(now):
            socket = self._probes.get(address)
            if socket is None:
                socket = self._context.socket(zmq.DEALER)
                socket.setsockopt(zmq.LINGER, 0)
                if self._curve is not None:
                    self._curve.apply(socket)
                socket.connect(address)
                self._probes[address] = socket
            # the server answers a heartbeat of a client it does not know (not_a_member)
            self._send_parts(socket, [seal_session(
                self.codec, "heartbeat", client=self.name,
                application=self.protocol.application, session=self.protocol.session)])
        if failover.index == 0 and self._probes:
            self._close_probes()

    def _close_probes(self) -> None:
        for socket in self._probes.values():
            self._backlogs.pop(socket, None)
            socket.close(linger=0)
        self._probes.clear()
        self.backlog_frames = sum(len(b) for b in self._backlogs.values())

    # -- opened and closed on the loop thread ------------------------------------------------
    def open(self, context: zmq.Context, now: float) -> None:
        """Make the sockets and ask to join (loop thread). Raises what ZeroMQ raises."""
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        # libzmq reconnects by itself, backing off from 100 ms to 2 s
        dealer.setsockopt(zmq.RECONNECT_IVL, 100)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self._dealer = dealer
        if self._curve is not None:
            self._curve.apply(dealer)
        dealer.connect(self.server_address)
        if self.routing == "direct":
            self._pull = context.socket(zmq.PULL)
            self._pull.setsockopt(zmq.LINGER, 0)
            self._pull.setsockopt(zmq.MAXMSGSIZE, self.codec.max_frame + 64)
            port = self._pull.bind_to_random_port(f"tcp://{self._bind_host}")
            self.direct_address = f"tcp://{self._advertise_host}:{port}"
        self._context = context
        self.protocol.start(self.direct_address)
        self._deadline = now

    @property
    def sockets(self) -> list[zmq.Socket]:
        """The sockets the loop polls for this link."""
        if self._dealer is None:
            return []
        return [self._dealer] if self._pull is None else [self._dealer, self._pull]

    def close_sockets(self) -> None:
        """Close every socket (loop thread); peer sockets linger push_linger_ms."""
        for socket in self.sockets:
            socket.close(linger=0)
        for push in self._pushes.values():
            push.close(linger=self.push_linger_ms)
        self._pushes.clear()
        self._close_probes()
        self._backlogs.clear()
        self.backlog_frames = 0
        self.closed.set()

    # -- a turn of the loop (loop thread) -------------------------------------------------
    def prepare(self) -> float:
        """After a turn (or a call for it): whether to read (:attr:`want_read`: not while
        the inbox is full) and when this link next needs a turn without input (its
        protocol's timers, the first delayed frame)."""
        self.want_read = len(self._inbox) < self.max_inbox
        deadline = self._deadline
        waiting = self.delays.waiting
        if waiting and waiting[0].due < deadline:
            deadline = waiting[0].due
        return deadline

    def has_work(self) -> bool:
        """Whether work waits that no timer or socket will announce: frames a socket
        could not take, sends not taken yet (back-pressure), messages queued (the server
        does not know this member yet), failures to report. The loop gives such a link a
        turn at every wake-up."""
        return bool(self.backlog_frames or self._inputs or self.outbox or self._unsent)

    def owe_turn(self) -> None:
        """Work was queued for this member outside its turn (loop thread: a listener of
        another member sending through it, a call run for it): the loop, which looks only
        at members with something to do, must give it one."""
        if not self.in_turn:
            self.turn_owed(self)

    def step(self, ready: Any) -> None:
        """One turn: read the sockets ``ready`` holds (the poller's answer), hand what
        came in to the protocol (which also takes the application's sends and runs its
        timers), then flush frames and run due delays."""
        if self.backlog_frames:
            self.flush_backlogs()
        frames: list[tuple[list[bytes], bool, tuple[str, ...]]] = []
        if self.reading:
            dealer = self._dealer
            if dealer in ready:
                self._read(dealer, True, frames)
            pull = self._pull
            if pull is not None and pull in ready:
                self._read(pull, False, frames)
        inputs = self._inputs
        # a sender may be waiting for room
        len_before = len(inputs)
        waking = len_before >= self.max_pending - MAX_ROOM_ASKED
        # backpressure: take no new sends while a slow peer's frames pile up
        take = (self.backlog_frames < MAX_BACKLOG_FRAMES
                and self.outbox_count < MAX_BACKLOG_FRAMES)
        now = time.monotonic()
        self._deadline = self.protocol.step(now, frames, take_sends=take)
        if waking and len(inputs) < len_before:
            with self.room:
                self.room.notify_all()
        if self.outbox:
            self.flush_outbox()
        waiting = self.delays.waiting
        if waiting and now >= waiting[0].due:
            outbox = self.outbox
            for peer, envelope in self.delays.pop_due(now):
                outbox.setdefault((peer,), []).append(envelope)
            self.flush_outbox()
        if self.failover is not None:
            if self._move_to is not None:
                address, self._move_to = self._move_to, None
                self.move_to(address)
            if self.failover.index or self._probes:
                self._probe(now)
        if self._unsent:  # what could not be encoded is the protocol's to report
            unsent, self._unsent = self._unsent, []
            for message_id, why, gone in unsent:
                self.protocol.report_undeliverable([message_id], why, incarnation_gone=gone)

    def _read(self, socket: zmq.Socket, from_server: bool,
              frames: list[tuple[list[bytes], bool, tuple[str, ...]]]) -> None:
        """Read what ``socket`` holds (within the read budget) into ``frames``."""
        stop_at = time.monotonic() + READ_BUDGET
        timeline = self.frame_timeline
        for _ in range(500):
            try:
                parts = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if from_server and len(parts) <= 2 and parts[0] != FORWARDED:
                # a notice, or an error with a relayed frame the server returned: say
                # which messages that frame held
                kept = self._remembered.get(hash(parts[1])) if len(parts) == 2 else None
                frames.append((parts, True, kept[1] if kept is not None else ()))
            else:
                if timeline is not None:
                    timeline.append(("in", time.perf_counter_ns()))
                frames.append((parts, from_server, ()))
            # asking whether more waits is cheaper than the exception of a recv that
            # finds nothing, which every frame of a request/response exchange would pay
            if not socket.get(_EVENTS) & _POLLIN or time.monotonic() > stop_at:
                return

    # -- Out: what the protocol asks for --------------------------------------------------------
    def transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        # queued as is: flush_outbox encodes the whole batch in one call (this runs for
        # every message sent)
        self.stats["messages_sent"] += len(dests)
        if not self.in_turn:
            self.turn_owed(self)  # owe_turn() inlined: the end of the turn sends it
        if self.delays.active:
            self._transmit_delayed(message, dests)
            return
        outbox = self.outbox
        if len(dests) == 1 or self.routing == "relayed":  # one frame carries it
            queued = outbox.get(dests)
            if queued is None:
                outbox[dests] = [message]
            else:
                queued.append(message)
        else:  # direct multicast: one frame per peer, the message serialized once
            envelope = self._pack_one(message)
            for dest in dests:
                outbox.setdefault((dest,), []).append(envelope)
        self.outbox_count += 1
        if self.outbox_count >= MAX_OUTBOX_MESSAGES:
            self.flush_outbox()

    def _transmit_delayed(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        """Injected delays (testing): the message is serialized now and waits per peer."""
        envelope = self._pack_one(message)
        now = time.monotonic()
        ready = tuple(d for d in dests if not self.delays.schedule(now, d, envelope))
        if not ready:
            return
        for key in [ready] if self.routing == "relayed" else [(dest,) for dest in ready]:
            self.outbox.setdefault(key, []).append(envelope)
        self.outbox_count += 1
        if self.outbox_count >= MAX_OUTBOX_MESSAGES:
            self.flush_outbox()

    def to_server(self, command: bytes) -> None:
        assert self._dealer is not None
        self.owe_turn()  # a backlog, if the socket cannot take it, needs turns
        self._send_parts(self._dealer, [command])

    def relay(self, frame: bytes, dests: Sequence[str]) -> None:
        """Send again a relayed frame the server returned. Its stream may have lost a
        chunk inside a server that died, and the streams start afresh once the server
        knows this client again (``restart_streams``): the frame's batch goes in the
        fresh stream of its destinations, as a new frame, when it is remembered."""
        self.owe_turn()
        kept = self._remembered.pop(hash(frame), None)
        if kept is not None:
            # the returned frame never reached its destinations, so any later chunk of
            # its stream is a gap there: the batch starts the stream afresh
            self.streams.restart_for(dests)
            frame = self.codec.seal(self.streams.wrap(tuple(dests), kept[0]))
            self._remember(frame, kept[0], kept[1])
        self._send_relayed(frame)

    def _send_relayed(self, frame: bytes) -> None:
        stats = self.stats
        stats["frames_sent"] += 1
        stats["frame_bytes_sent"] += len(frame)
        assert self._dealer is not None
        self._send_parts(self._dealer, [frame])

    def drop_peer(self, member: str) -> None:
        """Forget ``member``'s link (it left): its frame count, its socket and its backlog."""
        self.direct_sent.pop(member, None)  # a later member of that name counts anew
        push = self._pushes.pop(member, None)
        if push is not None:
            dropped = self._backlogs.pop(push, None)
            if dropped:
                self.backlog_frames -= len(dropped)
            push.close(linger=0)

    def discard_queued(self) -> None:
        self.owe_turn()  # the turn reports what is discarded
        # what the previous incarnation queued cannot leave as the new one's: said lost
        self._unsent += [(item.message_id, "was declared gone before they left", True)
                         for items in self.outbox.values() for item in items
                         if type(item) is not tuple and item.is_user_message()]
        self.outbox.clear()
        self.outbox_count = 0
        # frames compressed for the previous member may never have been sent: the
        # receivers' streams would miss them
        self.streams.restart()

    def restart_streams(self) -> None:
        self.streams.restart()

    def frames_uncompressed(self) -> None:
        self.streams.compress = False

    def join_settled(self, error: str | None) -> None:
        self.join_error = error
        self.joined.set()

    def left_session(self) -> None:
        self.left.set()

    def state_pending(self) -> None:
        self.state_done.clear()

    def state_settled(self) -> None:
        self.state_done.set()

    def relay_allowed(self, allowed: bool) -> None:
        self._may_relay = allowed

    def peer_addresses(self, addresses: dict[str, str]) -> None:
        self._addresses = addresses

    # -- frames out ------------------------------------------------------------------------------
    def _unencodable(self, message: SentMessage, error: Exception) -> SentMessage:
        """A message whose payload cannot travel (not serializable, or too large): reported
        undeliverable, and a stand-in with the same id and headers goes instead, so that
        the receivers' modules do not wait for it for ever."""
        self.stats["unencodable"] += 1
        log.error("%s: message %s cannot be sent (%s); its receivers get a stand-in that "
                  "keeps the causal order", self.name, message.message_id, error)
        self._unsent.append((message.message_id, f"could not send them: {error}", False))
        return message.replace(user_message=Withdrawn(f"{type(error).__name__}: {error}"))

    def _pack_one(self, message: SentMessage) -> PackedEnvelope:
        """:func:`pack_envelope`, with a stand-in for a payload that cannot travel."""
        try:
            envelope = pack_envelope(message)
            if len(envelope[1]) > self.frame_limit:
                raise PayloadTooLarge(len(envelope[1]), self.frame_limit)
        except Exception as error:
            envelope = pack_envelope(self._unencodable(message, error))
        return envelope

    def flush_outbox(self) -> None:
        """Encode, sign and send what is queued, one frame per batch per destination set.
        Relayed frames wait while the server does not know this client (it would return
        them)."""
        relayed = self.routing == "relayed"
        if relayed and not self._may_relay:
            return
        outbox, self.outbox, self.outbox_count = self.outbox, {}, 0
        seal = self.codec.seal
        wrap = self.streams.wrap
        for dests, items in outbox.items():
            if any(type(m) is not tuple and RESENT in m.headers for m in items):
                # a copy sent again: the receiver may have lost a chunk of its stream, or
                # of one to it and others (a frame to several, sent again to it alone)
                self.streams.restart_with(dests)
            bodies = list(pack_envelopes(items, self._batch_budget, self._unencodable,
                                         self.frame_limit))
            for body in bodies:
                frame = seal(wrap(dests, body))
                if relayed:
                    self._remember(frame, body, tuple(
                        m.message_id for m in items if type(m) is not tuple)
                        if len(bodies) == 1 else ())
                    self._send_relayed(frame)
                else:
                    for dest in dests:
                        self._push(dest, frame)

    def _remember(self, frame: bytes, body: bytes, ids: tuple[str, ...]) -> None:
        remembered = self._remembered
        remembered[hash(frame)] = (body, ids)
        self._remembered_bytes += len(body)
        while (len(remembered) > REMEMBERED_FRAMES
               or self._remembered_bytes > REMEMBERED_BYTES) and remembered:
            self._remembered_bytes -= len(remembered.pop(next(iter(remembered)))[0])

    def _push(self, peer: str, frame: bytes) -> None:
        socket = self._pushes.get(peer)
        if socket is None:
            address = self._addresses.get(peer)
            if not address:
                self.stats["undeliverable"] += 1
                log.error("%s: no direct address for %r; frame dropped", self.name, peer)
                self.streams.restart()  # the peer's stream would miss this frame
                return
            socket = self._context.socket(zmq.PUSH)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(address)
            self._pushes[peer] = socket
        self.direct_sent[peer] += 1
        stats = self.stats
        stats["frames_sent"] += 1
        stats["frame_bytes_sent"] += len(frame)
        self._send_parts(socket, [frame])

    def _send_parts(self, socket: zmq.Socket, parts: list[bytes]) -> None:
        """Send without blocking; what the socket cannot take now waits, in order."""
        backlog = self._backlogs.get(socket)
        if not backlog:
            timeline = self.frame_timeline
            if timeline is not None:
                timeline.append(("send", time.perf_counter_ns()))
            try:
                if len(parts) == 1:  # the common frame: one layer of pyzmq less
                    socket.send(parts[0], zmq.NOBLOCK)
                else:
                    socket.send_multipart(parts, zmq.NOBLOCK)
                if timeline is not None:
                    timeline.append(("sent", time.perf_counter_ns()))
                return
            except zmq.Again:
                backlog = self._backlogs.setdefault(socket, deque())
        backlog.append(parts)
        self.backlog_frames += 1

    def flush_backlogs(self) -> None:
        for socket, backlog in list(self._backlogs.items()):
            while backlog:
                try:
                    socket.send_multipart(backlog[0], zmq.NOBLOCK)
                except zmq.Again:
                    break
                except zmq.ZMQError:  # the socket was closed (the peer left)
                    self.backlog_frames -= len(backlog)
                    backlog.clear()
                    break
                backlog.popleft()
                self.backlog_frames -= 1
            if not backlog:
                del self._backlogs[socket]

    def busy(self) -> bool:
        """Frames of this member's have not left yet (loop thread)."""
        return bool(self.backlog_frames or self.outbox or len(self.delays))
