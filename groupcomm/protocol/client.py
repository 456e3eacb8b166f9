"""One member of a session, as a protocol object without I/O: :class:`ClientProtocol`
(its node, :class:`~groupcomm.protocol.membership.Membership`, state transfer and
:class:`~groupcomm.protocol.port.ApplicationPort`). Its one owner feeds it frames and the
time through :meth:`step` and carries out what it writes into its
:class:`~groupcomm.protocol.actions.Out`; bytes are verified here, so every host gets the
same checks.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.filtering import MessageFilterCreator, SessionMessageListener
from groupcomm.core.messages import MessageError, ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.session_messages import REFLECTED_IDS
from groupcomm.core.tracing import EVENT_EXTRA, Tracer
from groupcomm.protocol import session_events as events
from groupcomm.protocol.actions import Out
from groupcomm.protocol.client_actions import apply_to_node
from groupcomm.protocol.clock_acks import ClockAcks
from groupcomm.protocol.departure import Departures
from groupcomm.protocol.incarnation import StoreJoins, left_behind, welcome
from groupcomm.protocol.membership import (
    Action,
    Arrive,
    DropReturned,
    Incarnated,
    JoinDone,
    MemberJoined,
    MemberLeft,
    Membership,
    Phase,
    Reject,
    ResendReturned,
    SendCommand,
    ServerBack,
    ServerSilence,
    SnapshotAsked,
    StoredState,
    StoreJoin,
    known_incarnations,
)
from groupcomm.protocol.membership import LeftSession as SessionLeft
from groupcomm.protocol.port import ApplicationPort
from groupcomm.protocol.rejects import RejectLog
from groupcomm.protocol.session_traffic import SESSION_KINDS, take_session_message
from groupcomm.protocol.state_transfer import STATE_TIMEOUT, StateTransfer
from groupcomm.wire.envelopes import unpack_envelopes
from groupcomm.wire.frames import FORWARDED, ROUTED, SESSION, FrameCodec, FrameRejected, kind_of
from groupcomm.wire.parts import Reassembler
from groupcomm.wire.session import open_session, seal_session_parts, whole_session
from groupcomm.wire.shared_batches import SharedBatches
from groupcomm.wire.streams import StreamDecoder

__all__ = ["MAX_UNDELIVERABLE_IDS", "TICK_INTERVAL", "ClientProtocol", "Frames"]

log = logging.getLogger(__name__)

#: How often filters with timers (the reliable layer) are ticked, in seconds: on a grid
#: of that step every member of a process shares, so one wake-up of its loop ticks all.
TICK_INTERVAL = 0.02
#: ids of messages reported undeliverable, kept for :meth:`ClientProtocol.undeliverable`
MAX_UNDELIVERABLE_IDS = 10_000

#: the send and receive filter factories (None: the selectors' current ones)
FilterStacks = tuple[Sequence[MessageFilterCreator[SentMessage]] | None,
                     Sequence[MessageFilterCreator[ReceivedMessage]] | None]
#: what came in during a turn: each frame's ZeroMQ parts, whether it came from the server
#: (not a peer), and for a relayed frame the server returned, the ids of its messages
Frames = Iterable[tuple[list[bytes], bool, tuple[str, ...]]]
EventListener = Callable[[events.SessionEvent], Any]


class ClientProtocol:
    """The protocol of one member. ``tracer_for(member)`` gives each incarnation's tracer;
    ``clock`` stamps trace lines only; ``acknowledged_delivery``, ``post`` and
    ``inbox_changed`` are the port's (:class:`~groupcomm.protocol.port.ApplicationPort`);
    ``sent_listener`` is called with each application message as it leaves; ``attested``:
    relayed frames come with the sender the server vouches for (per-client keys);
    ``clock_acks``: acknowledge the application clock on the heartbeat when it moved and
    nothing was sent for a heartbeat period (:mod:`groupcomm.protocol.clock_acks`)."""

    def __init__(self, name: str, session: str, *, application: str, codec: FrameCodec,
                 out: Out, filter_stacks: FilterStacks, tracer_for: Callable[[str], Tracer],
                 clock: Callable[[], float], now: float, heartbeat_interval: float = 0.5,
                 state_provider: Callable[[], Any] | None = None,
                 state_consumer: Callable[[Any], None] | None = None,
                 state_timeout: float = STATE_TIMEOUT, release_after: float | None = None,
                 acknowledged_delivery: bool = False,
                 post: Callable[[Callable[[], None]], None] | None = None,
                 inbox_changed: Callable[[], None] | None = None,
                 sent_listener: Callable[[SentMessage], None] | None = None,
                 attested: bool = False, clock_acks: bool = False) -> None:
        #: the release_after policy: when what waits on a departed member is released
        self.departures = Departures(release_after)
        self.name = name
        self.session = session
        self.application = application
        self.codec = codec
        self.out = out
        self.attested = attested
        self.stats: Counter[str] = Counter()
        self.rejects = RejectLog(f"communicator {name}")
        self.streams = StreamDecoder(max_body=codec.max_frame)
        #: the batches unpacked once with the other members on this thread (a Host's)
        self.batches: SharedBatches | None = None
        #: notices larger than a frame (a stored state) arriving in parts
        self.notice_parts = Reassembler()
        self.heartbeat_interval = heartbeat_interval
        self.membership = Membership(name, heartbeat_interval=heartbeat_interval, now=now,
                                     wants_state=state_consumer is not None)
        self._filter_stacks = filter_stacks
        #: the application's tagged sends, in the order of their tags (see port.py)
        self.inputs: deque[SentMessage] = deque()
        self._tracer_for = tracer_for
        self._clock = clock
        self._sent_listener = sent_listener
        self.tracer = tracer_for(name)
        self.session_listeners: list[SessionMessageListener] = []
        self.event_listeners: list[EventListener] = []
        self.transfer = StateTransfer(self, provider=state_provider, consumer=state_consumer,
                                      timeout=state_timeout)
        self.clock_acks: ClockAcks | None = ClockAcks() if clock_acks else None
        # the first node makes the clock lock, and every incarnation's node shares it
        self.lock: AbstractContextManager[Any] | None = None
        self.node = self._make_node(name)
        self.lock = self.node.clock_lock
        self.port = ApplicationPort(
            self.node, lock=self.lock, inputs=self.inputs, acknowledged=acknowledged_delivery,
            keep_recent=REFLECTED_IDS if state_provider is not None else None,
            post=post or (lambda function: function()),
            inbox_changed=inbox_changed or (lambda: None))
        self.port.on_caught_up = self.transfer.answer_deferred
        self.port.caught_up_wanted = self.transfer.awaits_catching_up
        self.transfer.on_holds = self._state_held
        #: ids of application messages this client accepted but could not send; newest last
        self._undeliverable: deque[str] = deque(maxlen=MAX_UNDELIVERABLE_IDS)
        #: the members listed when this client's current incarnation joined
        self.members_at_join: tuple[str, ...] = ()
        #: the time of the input being handled (nothing here reads a clock)
        self.now = now
        self._next_heartbeat = now + heartbeat_interval
        self._next_tick = now + TICK_INTERVAL
        #: when :meth:`step` next has something to do without input
        self.deadline = now
        self._may_relay = False
        self._addresses: dict[str, str] = {}
        #: the store's word on the join under way (see docs/storage.md)
        self.store_joins = StoreJoins()
        self._update_deadline()

    def _make_node(self, member: str) -> ProtocolNode:
        send_filters, receive_filters = self._filter_stacks
        node = ProtocolNode(
            member, application=self.application, session=self.session,
            transmit=self.out.transmit, clock=self._clock, send_creators=send_filters,
            receive_creators=receive_filters, tracer=self.tracer, deliver=self._deliverable,
            send_queue=self.inputs, clock_lock=self.lock)
        node.system_listener = self.transfer.on_system
        node.sent_listener = self._sent_listener
        events.told_by(node, self.emit)
        return node

    def _update_deadline(self) -> None:
        deadline = self._next_heartbeat
        if self.node.tickers and self._next_tick < deadline:
            deadline = self._next_tick
        membership = self.membership
        if membership.early or membership.departing or self.departures or self.transfer.waiting:
            deadline = self.now  # something waits on time the timers do not say
        self.deadline = deadline

    @property
    def busy(self) -> bool:
        """Sends not taken, work queued, or sends the causality module holds back."""
        node = self.node
        return bool(self.inputs or not node.idle or node.holds_sends())

    def undeliverable(self) -> list[str]:
        """Ids of messages accepted for sending that were not sent (newest last)."""
        return [*self._undeliverable, *self.node.undeliverable]

    def counters(self) -> dict[str, int]:
        return {**self.stats, **self.membership.stats,
                **{f"rejected_{reason}": count for reason, count in self.rejects.counts.items()}}

    def held(self) -> list[Any]:
        return list(self.node.held())

    def waiting_for(self) -> dict[str, list[str]]:
        return self.node.waiting_for()

    def start(self, address: str) -> None:
        """Ask to join; ``address`` is where peers push frames (direct routing)."""
        self._apply(self.membership.start(address))

    def step(self, now: float, frames: Frames = (), *, take_sends: bool = True) -> float:
        """One turn of the owner: the ``frames`` that came in, the application's sends
        (unless ``take_sends`` is False: the host's sockets are backed up), the timers
        due. Returns when the next turn is due without input."""
        self.now = now
        for parts, from_server, returned_ids in frames:
            self._on_parts(parts, from_server, now, returned_ids)
        if take_sends and self.inputs:
            self.take_inputs()
        if frames:
            self.end_batch()
        self._update_deadline()  # arrivals may have started something that waits on time
        if now >= self.deadline:
            self.timer(now)
        return self.deadline

    def take_inputs(self, markers: int = 0) -> None:
        """Take the tagged sends (``markers`` of them join markers) into the send pipeline;
        one tagged by an incarnation that is gone is reported undeliverable."""
        inputs = self.inputs
        batch = [inputs.popleft() for _ in range(len(inputs))]
        if not batch:
            return
        self.stats["app_sends"] += len(batch) - markers
        if self.clock_acks is not None:
            self.clock_acks.sent(batch, len(batch) > markers)
        name = self.node.name
        if batch[0].sender != name or batch[-1].sender != name:
            self.report_undeliverable([m.message_id for m in batch if m.sender != name],
                                       f"came back as {name} before they left",
                                       incarnation_gone=True)
            batch = [m for m in batch if m.sender == name]
        self.node.queue_sends(batch)
        self.drain()

    def server_changed(self, now: float) -> None:
        """The host moved to another session server (:meth:`Membership.server_changed`)."""
        self.now = now
        self._apply(self.membership.server_changed(now))

    def leave(self, direct_frames: dict[str, int]) -> None:
        """Leave gracefully, with the frames pushed to each peer."""
        self._apply(self.membership.leave(direct_frames))

    def timer(self, now: float) -> None:
        """Time passed: whichever timers are due."""
        self.now = now
        membership = self.membership
        if membership.early or membership.departing:
            self._apply(membership.tick(now))
        self.transfer.tick(now)
        if self.departures:
            self._release_departed(now)
        node = self.node
        if node.tickers and now >= self._next_tick:
            node.tick()
            self._next_tick = (now // TICK_INTERVAL + 1) * TICK_INTERVAL  # see TICK_INTERVAL
        if now >= self._next_heartbeat:
            self._apply(membership.heartbeat(now))
            self._next_heartbeat = now + self.heartbeat_interval
            if self.clock_acks is not None:
                self._acknowledge_clock()
            # an acknowledgement that raced the deferral did not answer
            self.transfer.answer_deferred()
            # a process killed outright leaves its trace up to the last heartbeat
            self.tracer.flush()
        self._update_deadline()

    def _on_parts(self, parts: list[bytes], from_server: bool, now: float,
                  returned_ids: tuple[str, ...] = ()) -> None:
        """One frame as ZeroMQ handed it over: from the server a notice, an error with
        the frame it returned, or ``FORWARDED``, a frame (and its attested sender); from a
        peer a frame pushed directly."""
        if from_server and len(parts) <= 2 and parts[0] != FORWARDED:
            self.on_session_frame(parts[0], parts[1] if len(parts) == 2 else None, now,
                                  returned_ids)
        elif self.attested:
            if from_server and len(parts) == 3 and parts[0] == FORWARDED:
                self.on_message_frame(parts[1], parts[2], False, now)
            else:
                self.rejects.reject("malformed", "relayed frame without its attested sender")
        elif from_server and len(parts) == 2 and parts[0] == FORWARDED:
            self.on_message_frame(parts[-1], None, False, now)
        elif not from_server and len(parts) == 1:
            self.on_message_frame(parts[0], None, True, now)
        else:
            self.rejects.reject("malformed", f"unexpected {len(parts)}-part message")

    def on_session_frame(self, frame: bytes, returned: bytes | None, now: float,
                         returned_ids: tuple[str, ...] = ()) -> None:
        """A notice from the server, or an error with the frame it ``returned``."""
        self.now = now
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "expected a session frame from the server")
            notice = whole_session(self.notice_parts, "server", open_session(body))
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, "server")
            if error.reason == "bad_signature":
                self._apply(self.membership.on_unverifiable_server_frame(now))
            return
        if notice is None:  # a part: the notice is handled once its last part came
            return
        if returned is not None and notice["op"] == "error":
            dests = notice.get("returned")
            if isinstance(dests, list) and all(isinstance(d, str) for d in dests):
                self._apply(self.membership.on_returned(tuple(dests), returned, now,
                                                        returned_ids))
        self._apply(self.membership.on_notice(notice, now))
        self._publish_status()
        self._update_deadline()

    def on_message_frame(self, frame: bytes, attested: bytes | None, direct: bool,
                         now: float) -> None:
        """A routed frame (``direct``: pushed by a peer), verified before it is decoded;
        bad input is counted by reason and dropped."""
        origin, messages = self._open(frame, attested)
        self.on_messages(messages, now)
        if direct and origin is not None:
            self._apply(self.membership.on_direct_frame(origin))

    def _open(self, frame: bytes,
              attested: bytes | None) -> tuple[str | None, list[ReceivedMessage]]:
        """The sender (None when undecodable or an impersonation) and messages (empty when
        refused) of a routed frame, verified before anything in it is decoded."""
        reject = self.rejects.reject
        try:
            body, nonce, _ = self.codec.open(frame)
            if kind_of(body) != ROUTED:
                raise FrameRejected("malformed", "a session frame where a message frame "
                                    "was expected")
            body = self.streams.unwrap(nonce, body)
            self.stats["frames_received"] += 1
            try:
                unpack = unpack_envelopes if self.batches is None else self.batches.unpack
                app, session, sender, messages, errors = unpack(body, self.node.name)
            except MessageError as error:
                raise FrameRejected("malformed", str(error)) from None
        except FrameRejected as error:
            reject(error.reason, error.detail)
            return None, []
        for detail in errors:  # one count per bad message
            reject("malformed", detail)
        if attested is not None and sender != attested.decode("utf-8", "replace"):
            for _ in messages:
                reject("impersonation",
                       f"{attested.decode('utf-8', 'replace')!r} sent a message signed as "
                       f"from {sender!r}")
            return None, []
        if session != self.session or app != self.application:
            for _ in messages:
                reject("wrong_session", f"message for {app}/{session}")
            return sender, []
        return sender, messages

    def on_messages(self, messages: list[ReceivedMessage], now: float) -> None:
        """Messages of one sender, decoded by a host without bytes (the simulator)."""
        self.now = now
        if messages and messages[0].sender in self.node.member_set:
            self.stats["messages_received"] += len(messages)
            self.node.arrived_many(messages)
        else:
            for message in messages:
                self._apply(self.membership.admit(message, now))
        self.drain()

    def end_batch(self) -> None:
        """A turn's frames and sends are through: batch listeners run (reliable acks)."""
        if self.node.batch_listeners:
            for listener in self.node.batch_listeners:
                listener()
            self.drain()

    def drain(self) -> None:
        """Run the node's queued work; a peer's bad message is counted and skipped."""
        for _ in range(100_000):
            try:
                self.node.drain()
                return
            except ProtocolViolation as error:
                self.stats["protocol_errors"] += 1
                log.error("%s: dropped a message that breaks the protocol: %s", self.name,
                          error)

    def release_waiting_on(self, name: str) -> list[str]:
        released = self.node.release_waiting_on(name)
        if released:
            self.emit(events.HeldReleased(member=self.node.name, departed=name,
                                          ids=tuple(released)))
        return released

    def command(self, op: str, fields: dict[str, Any]) -> None:
        """Send the session command ``op`` to the server."""
        self._apply([SendCommand(op, fields)])

    def add_session_listener(self, listener: SessionMessageListener) -> None:
        self.session_listeners.append(listener)
        self.node.add_session_listener(listener)

    def add_event_listener(self, listener: EventListener) -> None:
        self.event_listeners.append(listener)

    def emit(self, event: events.SessionEvent) -> None:
        for listener in list(self.event_listeners):
            try:
                listener(event)
            except Exception:
                log.exception("%s: event listener raised on %r", self.name, event)

    def end_trace(self) -> None:
        """The member closed: the trace's last line says so (see docs/sessions.md)."""
        self.node.trace("leave", client=self.node.name)
        self.tracer.close()

    def _publish_status(self) -> None:
        """Tell the host and the port what changed: relaying, addresses, member ids."""
        membership = self.membership
        if membership.may_relay != self._may_relay:
            self._may_relay = membership.may_relay
            self.out.relay_allowed(self._may_relay)
        if membership.addresses != self._addresses:
            self._addresses = dict(membership.addresses)
            self.out.peer_addresses(self._addresses)
        departing = membership.departing
        ids = {name: member for name, member in membership.current.items()
               if name not in departing}
        if ids != self.port.member_ids:
            self.port.member_ids = ids

    def _apply(self, actions: list[Action]) -> None:
        out = self.out
        # the status shows before the actions: a send a listener makes names the new
        # members, a frame waits while it may not go
        self._publish_status()
        for action in actions:
            if isinstance(action, Arrive):
                self.stats["messages_received"] += len(action.messages)
                apply_to_node(self.node, action)
                self.drain()
            elif isinstance(action, Reject):
                self.rejects.reject(action.reason, action.detail)
            elif isinstance(action, SendCommand):
                fields = action.fields
                if "known" in fields:  # back after a restart: the senders it applied too
                    fields = {**fields, "known": known_incarnations(
                        fields["known"], self.node.application_clock)}
                for frame in seal_session_parts(self.codec, action.op, client=self.name,
                                                application=self.application,
                                                session=self.session, **fields):
                    out.to_server(frame)  # one larger than a frame goes in parts
            elif isinstance(action, MemberJoined):
                apply_to_node(self.node, action)
                if self.clock_acks is not None:
                    self.clock_acks.peer_joined()
                if action.member != self.node.name:
                    self.emit(events.PeerJoined(member=self.node.name, peer=action.member,
                                                members=tuple(self.node.members)))
                    if action.wants_state:
                        self.transfer.newcomer(action.member, action.all_users)
            elif isinstance(action, MemberLeft):
                out.drop_peer(action.member)
                apply_to_node(self.node, action)
                self.transfer.member_left(action.member, self.now)
                self.departures.left(action.member, self.now)
                waiting = tuple(mid for mid, on in self.node.waiting_for().items()
                                if action.member in on)
                self.emit(events.PeerLeft(member=self.node.name, peer=action.member,
                                          waiting=waiting))
            elif isinstance(action, Incarnated):
                self._incarnated(action)
            elif isinstance(action, JoinDone):
                out.join_settled(action.error)
            elif isinstance(action, ResendReturned):
                self.stats["frames_resent"] += len(action.frames)
                for dests, frame in action.frames:
                    out.relay(frame, list(dests))
            elif isinstance(action, DropReturned):
                self.stats["undeliverable_frames"] += action.count
                log.warning("%s: %d frame(s) of the previous incarnation, returned by the "
                            "server, are not sent", self.name, action.count,
                            extra=EVENT_EXTRA)
                if action.ids:
                    self.report_undeliverable(list(action.ids), "was declared gone before "
                                               "the server relayed them",
                                               incarnation_gone=True)
            elif isinstance(action, StoreJoin):
                self.store_joins.heard(action)
                out.frames_uncompressed()
            elif isinstance(action, StoredState):
                self.transfer.stored(action.notice)
            elif isinstance(action, SnapshotAsked):
                self.transfer.store_request(action.request)
            elif isinstance(action, ServerSilence):
                self.emit(events.ServerSilent(member=self.node.name, silent_for=action.silent_for))
            elif isinstance(action, ServerBack):
                self.emit(events.ServerAnswers(member=self.node.name))
            elif isinstance(action, SessionLeft):
                out.left_session()
                self.emit(events.Removed(member=self.node.name, reason=action.reason))
        self._publish_status()

    def _state_held(self, holds: bool) -> None:
        self.membership.has_state = holds

    def _incarnated(self, action: Incarnated) -> None:
        if action.previous is not None:
            # back after the server lost us: what was sent meanwhile may be lost, so
            # frames start their streams afresh (the frames it returned go in them too)
            self.out.restart_streams()
        self.members_at_join = tuple(action.joined.all_users)
        if action.member != self.node.name:
            self._new_node(action.member, action.previous, action.joined)
        else:
            self._apply([action.joined])
        if action.previous is not None:
            self.emit(events.Rejoined(member=action.member, previous=action.previous))
        start = self.store_joins.start(action)
        if start.changed_from is not None:
            self.stats["store_generation_changes"] += 1
            self.emit(events.StoreGenerationChanged(
                member=action.member, previous=start.changed_from,
                generation=start.generation or ""))
        start.begin(self.transfer, action.joined.all_users, self.now)

    def _new_node(self, member: str, previous: str | None, joined: MemberJoined) -> None:
        """Start the node afresh as ``member``. After the session declared this client
        gone (``previous``), what the old node held unsent is reported undeliverable and
        what it held for delivery is lost; the listeners move to the new node."""
        old = self.node
        if previous is not None:
            unsent, lost = left_behind(old)
            self.report_undeliverable(unsent, "was declared gone and came back as "
                                       f"{member}", incarnation_gone=True)
            if lost:
                self.stats["lost_on_reincarnation"] += len(lost)
                log.warning("%s: %d message(s) held for delivery are dropped with the old "
                            "incarnation: %s", member, len(lost), ", ".join(lost[:10]))
            self.out.discard_queued()
        old_tracer = self.tracer
        self.tracer = self._tracer_for(member)
        node = self._make_node(member)
        apply_to_node(node, joined)
        # in place before the application hears of the join: a send in reply is the new
        # incarnation's
        self.node = node
        self.port.node = node
        self._update_deadline()  # the new node's filters may have timers
        welcome(node, self.session_listeners, joined, self.application, self.session)
        if old_tracer is not self.tracer:
            # ends without its own departure: it was declared gone
            old_tracer.close()

    def report_undeliverable(self, ids: list[str], why: str, *,
                             incarnation_gone: bool = False) -> None:
        """Messages accepted for sending that are not sent; ``why`` says what happened
        (``incarnation_gone``: this client was declared gone before they left)."""
        if not ids:
            return
        self.stats["undeliverable"] += len(ids)
        self._undeliverable.extend(ids)
        log.warning("%s: %d message(s) accepted for sending are not sent (this client %s): "
                    "%s", self.name, len(ids), why, ", ".join(ids[:10]), extra=EVENT_EXTRA)
        self.emit(events.MessagesLost(member=self.node.name, ids=tuple(ids), reason=why,
                                      incarnation_gone=incarnation_gone))

    def _acknowledge_clock(self) -> None:
        """The heartbeat's acknowledgement of the application clock, if one is due (none
        while sends are queued: they will say the clock)."""
        acks = self.clock_acks
        if acks is None or self.membership.phase != Phase.JOINED or self.inputs:
            return
        sent = acks.heartbeat(self.node)
        if sent:
            self.stats["clock_acks_sent"] += 1
            self.take_inputs(markers=len(sent))

    def _release_departed(self, now: float) -> None:
        """Deliver what still waits on a member that left ``release_after`` ago."""
        for member in self.departures.ready(now):
            if not any(member in on for on in self.node.waiting_for().values()):
                continue
            released = self.release_waiting_on(member)
            self.stats["released_after_departure"] += len(released)
            log.warning("%s: %s left %gs ago; released %d held message(s) that waited on "
                        "it: %s", self.name, member, self.departures.release_after,
                        len(released), ", ".join(released[:10]))
            self.drain()

    def _deliverable(self, message: ReceivedMessage) -> None:
        if type(message.user_message) in SESSION_KINDS and take_session_message(
                message, me=self.node.name, transfer=self.transfer, stats=self.stats,
                emit=self.emit):
            return
        if self.transfer.gate is not None and self.transfer.deliver(message):
            return  # a newcomer installing a snapshot: held, or seen through it
        self.stats["delivered"] += 1
        self.port.hand_over(message)
