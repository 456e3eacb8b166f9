"""One member of a session, as a protocol object without I/O: :class:`ClientProtocol`.

It holds everything a member decides: its :class:`~groupcomm.core.node.ProtocolNode`
(pipelines, application clock), its :class:`~groupcomm.core.membership.Membership`
(member ids, incarnations, early and departing senders, the server's liveness) and both
sides of state transfer (:mod:`groupcomm.core.state_transfer`: the newcomer's gate, the
members' cuts, what a snapshot reflects). Inputs are calls with the time in them (a
session frame, a message frame, the application's sends, a timer, the application
having applied a message, the leave; :mod:`groupcomm.protocol.events` has them as
data); what it decides goes into an :class:`~groupcomm.protocol.actions.Out` (send a
command or a frame, hand a message to the application, forget a peer, ...). No threads,
sockets or clocks: the ZeroMQ host (:mod:`groupcomm.transport.link`) reads sockets and
the clock and carries the actions out; bytes are verified and decoded here
(:mod:`groupcomm.wire`), so every host gets the same checks.

What the application callbacks given to it (message and session listeners, the state
provider and consumer) do is theirs; they are called on the thread that feeds the
inputs.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.filtering import MessageFilterCreator, SessionMessageListener
from groupcomm.core.membership import (
    Action,
    Arrive,
    DropReturned,
    Incarnated,
    JoinDone,
    MemberJoined,
    MemberLeft,
    Membership,
    Reject,
    ResendReturned,
    SendCommand,
)
from groupcomm.core.membership import LeftSession as SessionLeft
from groupcomm.core.messages import MessageError, ReceivedMessage, SentMessage, Withdrawn
from groupcomm.core.node import ProtocolNode
from groupcomm.core.state_transfer import (
    REFLECTED_IDS,
    STATE_TIMEOUT,
    Ask,
    Cuts,
    Install,
    JoinMarker,
    NewcomerState,
    Snapshot,
    StateReply,
    StateRequest,
)
from groupcomm.core.tracing import Tracer
from groupcomm.protocol.actions import Out
from groupcomm.protocol.client_actions import apply_to_node
from groupcomm.protocol.rejects import RejectLog
from groupcomm.wire.envelopes import decode_batch, decode_received, unpack_envelopes
from groupcomm.wire.frames import (
    BATCH,
    MESSAGE,
    PACKED,
    ROUTED,
    SESSION,
    FrameCodec,
    FrameRejected,
    kind_of,
)
from groupcomm.wire.session import open_session, seal_session
from groupcomm.wire.streams import StreamDecoder

__all__ = ["MAX_UNDELIVERABLE_IDS", "TICK_INTERVAL", "ClientProtocol"]

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")

#: How often filters with timers (the reliable layer) are ticked, in seconds.
TICK_INTERVAL = 0.02
#: ids of messages reported undeliverable, kept for :meth:`ClientProtocol.undeliverable`
MAX_UNDELIVERABLE_IDS = 10_000

#: the send and receive filter factories (None: the selectors' current ones)
FilterStacks = tuple[Sequence[MessageFilterCreator[SentMessage]] | None,
                     Sequence[MessageFilterCreator[ReceivedMessage]] | None]


class ClientProtocol:
    """The protocol of one member (see the module docstring).

    ``filter_stacks`` are the send and receive filter factories of each node;
    ``tracer_for(member)`` gives the tracer of each incarnation (the host opens files);
    ``clock`` stamps trace lines (wall time, read only for traces).
    """

    def __init__(
        self,
        name: str,
        session: str,
        *,
        application: str,
        codec: FrameCodec,
        out: Out,
        filter_stacks: FilterStacks,
        tracer_for: Callable[[str], Tracer],
        clock: Callable[[], float],
        now: float,
        heartbeat_interval: float = 0.5,
        state_provider: Callable[[], Any] | None = None,
        state_consumer: Callable[[Any], None] | None = None,
        state_timeout: float = STATE_TIMEOUT,
        release_after: float | None = None,
        send_queue: deque[SentMessage] | None = None,
    ) -> None:
        if release_after is not None and release_after < 0:
            raise ValueError("release_after must be >= 0 seconds (or None: hold)")
        self.name = name
        self.session = session
        self.application = application
        self.codec = codec
        #: the decompressors of the routed frames' streams (see groupcomm.wire.streams)
        self.streams = StreamDecoder(max_body=codec.max_frame)
        self.out = out
        self.stats: Counter[str] = Counter()
        self.rejects = RejectLog(f"communicator {name}")
        self.heartbeat_interval = heartbeat_interval
        self.membership = Membership(name, heartbeat_interval=heartbeat_interval, now=now,
                                     wants_state=state_consumer is not None)
        self._filter_stacks = filter_stacks
        #: the host's queue of tagged sends (see ProtocolNode's send_queue), or None: the
        #: host then hands the tagged sends in itself (application_sends)
        self._send_queue = send_queue
        self._tracer_for = tracer_for
        self._clock = clock
        self.tracer = tracer_for(name)
        #: the application's session listeners (they move to a new node, see _new_node)
        self.session_listeners: list[SessionMessageListener] = []
        self.node = self._make_node(name)
        #: the node's member id (read per batch of sends; kept with the node)
        self.member = name
        #: what to do with messages held on a member that left: None holds them; a
        #: number of seconds releases them that long after the departure
        self.release_after = release_after
        #: departed member -> when to release what still waits on it (release_after)
        self._release_due: dict[str, float] = {}
        #: ids of application messages this client accepted but could not send; newest last
        self._undeliverable: deque[str] = deque(maxlen=MAX_UNDELIVERABLE_IDS)
        #: the members listed when this client's current incarnation joined
        self.members_at_join: tuple[str, ...] = ()
        # state transfer
        self._state_provider = state_provider
        self._state_consumer = state_consumer
        #: the newcomer's side, when the application installs snapshots
        self._state_gate = NewcomerState(state_timeout) if state_consumer is not None else None
        #: ids of the latest messages the application applied (what a snapshot reflects;
        #: None without a provider): :meth:`applied` appends, or a host inlining it
        self.recent_ids: deque[str] | None = (
            deque(maxlen=REFLECTED_IDS) if state_provider is not None else None)
        self._system_sent = 0
        self._cuts = Cuts()
        #: whether the application has applied everything it was handed; a host whose
        #: application acknowledges what it applied later than it is handed (acknowledged
        #: delivery) sets this, and a snapshot is given only when it says so, since one
        #: taken earlier would miss messages handed before the newcomer's join
        self.caught_up: Callable[[], bool] = lambda: True
        #: newcomers whose snapshot waits until :attr:`caught_up` (see answer_deferred)
        self.deferred_answers: list[str] = []
        #: the time of the input being handled (inputs bring it; nothing here reads a clock)
        self._now = now
        # timers
        self._next_heartbeat = now + heartbeat_interval
        self._next_tick = now + TICK_INTERVAL
        #: when :meth:`timer` next has something to do without input (the host's poll
        #: timeout; an attribute, read on every turn)
        self.deadline = now
        #: True while something waits on time that :attr:`deadline` does not say (early
        #: or departing senders, a state transfer, the release policy): the host then
        #: calls :meth:`timer` on every turn
        self.watching = False
        self._update_deadline()

    def _make_node(self, member: str) -> ProtocolNode:
        send_filters, receive_filters = self._filter_stacks
        node = ProtocolNode(
            member, application=self.application, session=self.session,
            transmit=self.out.transmit, clock=self._clock, send_creators=send_filters,
            receive_creators=receive_filters, tracer=self.tracer, deliver=self._deliverable,
            send_queue=self._send_queue,
        )
        node.system_listener = self._on_system
        return node

    # -- what the host reads ----------------------------------------------------------------
    def _update_deadline(self) -> None:
        if self.node.tickers and self._next_tick < self._next_heartbeat:
            self.deadline = self._next_tick
        else:
            self.deadline = self._next_heartbeat
        self._update_watching()

    def _update_watching(self) -> None:
        membership = self.membership
        gate = self._state_gate
        self.watching = bool(membership.early or membership.departing or self._release_due
                             or (gate is not None and gate.waiting))

    def undeliverable(self) -> list[str]:
        """Ids of messages accepted for sending that were not sent (newest last)."""
        return [*self._undeliverable, *self.node.undeliverable]

    def counters(self) -> dict[str, int]:
        result = dict(self.stats)
        result.update(self.membership.stats)
        for reason, count in self.rejects.counts.items():
            result[f"rejected_{reason}"] = count
        return result

    # -- inputs -------------------------------------------------------------------------------
    def start(self, address: str) -> None:
        """Ask to join; ``address`` is where peers push frames (direct routing)."""
        self._apply(self.membership.start(address))

    def leave(self, direct_frames: dict[str, int]) -> None:
        """Leave gracefully; ``direct_frames`` counts the frames pushed to each peer."""
        self._apply(self.membership.leave(direct_frames))

    def timer(self, now: float) -> None:
        """Time passed: heartbeats, early and departing senders, state-transfer
        timeouts, the release policy and the filters' timers, whichever are due."""
        self._now = now
        membership = self.membership
        if membership.early or membership.departing:
            self._apply(membership.tick(now))
        gate = self._state_gate
        if gate is not None and gate.waiting:
            self._state_actions(gate.tick(now), now)
        if self._release_due:
            self._release_departed(now)
        node = self.node
        if node.tickers and now >= self._next_tick:
            node.tick()
            self._next_tick = now + TICK_INTERVAL
        if now >= self._next_heartbeat:
            self._apply(membership.heartbeat(now))
            self._next_heartbeat = now + self.heartbeat_interval
            # an acknowledgement that raced the deferral did not call answer_deferred
            self.answer_deferred()
        self._update_deadline()

    def application_sends(self, messages: Sequence[SentMessage], drain: bool = True) -> None:
        """The application's tagged sends, in the order they were tagged. One tagged by
        an incarnation that is gone (the node changed meanwhile) is reported
        undeliverable."""
        name = self.member
        if messages[0].sender != name or messages[-1].sender != name:
            self._report_undeliverable([m.message_id for m in messages if m.sender != name],
                                       f"came back as {name} before they left")
            messages = [m for m in messages if m.sender == name]
        self.node.queue_sends(messages)
        if drain:
            self.drain()

    def applied(self, message: ReceivedMessage,
                listeners: Sequence[Callable[[ReceivedMessage], Any]] = ()) -> None:
        """The application has ``message`` now (then ``listeners`` are called with it):
        the clock advances, and a snapshot taken from here on reflects it. Any thread
        (the node's clock takes its lock)."""
        if self.recent_ids is not None:
            self.recent_ids.append(message.app_message_id)
        self.node.application_delivered(message, listeners)

    def on_session_frame(self, frame: bytes, returned: bytes | None, now: float) -> None:
        """A frame from the server that is not a message: a notice, or an error with
        the relayed frame it returned."""
        self._now = now
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "expected a session frame from the server")
            notice = open_session(body)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, "server")
            if error.reason == "bad_signature":
                self._apply(self.membership.on_unverifiable_server_frame(now))
            return
        if returned is not None and notice["op"] == "error":
            dests = notice.get("returned")
            if isinstance(dests, list) and all(isinstance(d, str) for d in dests):
                self._apply(self.membership.on_returned(tuple(dests), returned, now))
        self._apply(self.membership.on_notice(notice, now))
        self._update_watching()

    def on_message_frame(self, frame: bytes, attested: bytes | None, direct: bool,
                         now: float) -> None:
        """A message frame (relayed: ``attested`` is the sender the server vouches for
        with per-client keys; ``direct``: pushed by a peer). Verified before anything in
        it is decoded; bad input is counted by reason and dropped."""
        self._now = now
        try:
            body, nonce, _ = self.codec.open(frame)
            head = kind_of(body)
            if head == ROUTED:
                body = self.streams.unwrap(nonce, body)
                head = PACKED
            if head == PACKED:
                self.stats["frames_received"] += 1
                origin = self._handle_packed(body, attested, now)
                envelopes: list[bytes] = []
            elif head == MESSAGE:
                envelopes = [body[1:]]
            elif head == BATCH:
                try:
                    envelopes = decode_batch(body)
                except MessageError as error:
                    raise FrameRejected("malformed", str(error)) from None
            else:
                raise FrameRejected("malformed", "expected a message frame")
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return
        if envelopes:
            self.stats["frames_received"] += 1
            sender = attested.decode("utf-8", "replace") if attested is not None else None
            origin = None
            for envelope in envelopes:
                origin = self._handle_envelope(envelope, sender, now) or origin
        self.drain()
        if direct and origin is not None:
            self._apply(self.membership.on_direct_frame(origin))
        membership = self.membership
        if membership.early or membership.departing:
            self.watching = True

    def on_messages(self, messages: Sequence[ReceivedMessage], now: float) -> None:
        """Messages of one sender handed over decoded by a host in the same process,
        which has no bytes to verify (the simulator). They go where a verified frame's
        messages go: to the node, or, from a sender that is not a member, to the
        session protocol."""
        self._now = now
        if messages[0].sender in self.node.member_set:
            self.stats["messages_received"] += len(messages)
            self.node.arrived_many(list(messages))
        else:
            self._admit(messages, now)
        self.drain()

    def report_undeliverable(self, ids: list[str], why: str) -> None:
        """Messages this client accepted for sending that are not sent (``why`` says
        what this client did: ``could not send them: ...``)."""
        self._report_undeliverable(ids, why)

    def drain(self) -> None:
        """Run the node's queued work; a peer's bad message is counted and skipped, and
        the work queued behind it still runs."""
        for _ in range(100_000):
            try:
                self.node.drain()
                return
            except ProtocolViolation as error:
                self.stats["protocol_errors"] += 1
                log.error("%s: dropped a message that breaks the protocol: %s", self.name,
                          error)

    def release_waiting_on(self, name: str) -> list[str]:
        return self.node.release_waiting_on(name)

    def add_session_listener(self, listener: SessionMessageListener) -> None:
        self.session_listeners.append(listener)
        self.node.add_session_listener(listener)

    # -- frames in ------------------------------------------------------------------------------
    def _handle_packed(self, body: bytes, attested: bytes | None, now: float) -> str | None:
        """Hand on the messages of a verified ``P`` body (the checks every message of
        one sender shares are made once); returns the sender's name once it decoded.
        Raises :class:`FrameRejected` when the body as a whole is malformed."""
        try:
            app, session, sender, messages, errors = unpack_envelopes(body, self.node.name)
        except MessageError as error:
            raise FrameRejected("malformed", str(error)) from None
        reject = self.rejects.reject
        for detail in errors:  # one count per bad message, as for separate envelopes
            reject("malformed", detail)
        if attested is not None and sender != attested.decode("utf-8", "replace"):
            for _ in messages:
                reject("impersonation",
                       f"{attested.decode('utf-8', 'replace')!r} sent a message signed as "
                       f"from {sender!r}")
            return None
        if session != self.session or app != self.application:
            for _ in messages:
                reject("wrong_session", f"message for {app}/{session}")
            return sender
        if not messages:
            return sender
        if sender not in self.node.member_set:
            self._admit(messages, now)
            return sender
        self.stats["messages_received"] += len(messages)
        self.node.arrived_many(messages)
        return sender

    def _handle_envelope(self, envelope: bytes, attested: str | None,
                         now: float) -> str | None:
        """Hand one verified envelope on; returns its sender's name once it decoded."""
        try:
            try:
                message = decode_received(envelope, self.node.name)
            except MessageError as error:
                raise FrameRejected("malformed", str(error)) from None
            if attested is not None and message.sender != attested:
                raise FrameRejected(
                    "impersonation",
                    f"{attested!r} sent a message signed as from {message.sender!r}",
                )
            if message.session_name != self.session or (
                message.application_name != self.application
            ):
                raise FrameRejected(
                    "wrong_session",
                    f"message for {message.application_name}/{message.session_name}",
                )
            if message.sender not in self.node.member_set:
                self._admit([message], now)
                return message.sender
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail)
            return None
        self.stats["messages_received"] += 1
        self.node.arrived(message)
        return message.sender

    def _admit(self, messages: Iterable[ReceivedMessage], now: float) -> None:
        """Messages whose sender is not a current member: early, departing or stale."""
        for message in messages:
            self._apply(self.membership.admit(message, now))

    # -- the session protocol's actions ---------------------------------------------------------
    def _apply(self, actions: list[Action]) -> None:
        # what an action does to the node is apply_to_node's (shared with the in-process
        # hosts); around it, statistics, state transfer and what the host carries out
        out = self.out
        for action in actions:
            if isinstance(action, Arrive):
                self.stats["messages_received"] += len(action.messages)
                apply_to_node(self.node, action)
                self.drain()
            elif isinstance(action, Reject):
                self.rejects.reject(action.reason, action.detail)
            elif isinstance(action, SendCommand):
                out.to_server(seal_session(self.codec, action.op, client=self.name,
                                           application=self.application,
                                           session=self.session, **action.fields))
            elif isinstance(action, MemberJoined):
                apply_to_node(self.node, action)
                if action.wants_state and action.member != self.node.name:
                    self._state_newcomer(action.member, action.all_users)
            elif isinstance(action, MemberLeft):
                out.drop_peer(action.member)
                apply_to_node(self.node, action)
                self._state_member_left(action.member)
                self._answer(self._cuts.member_left(action.member))
                if self.release_after is not None:
                    self._release_due[action.member] = self._now + self.release_after
            elif isinstance(action, Incarnated):
                if action.previous is not None:
                    # back after the server lost us: what was sent meanwhile may be
                    # lost, so new frames start their streams afresh (the frames the
                    # server returned, resent just after this, continue the old ones)
                    out.restart_streams()
                self.members_at_join = tuple(action.joined.all_users)
                if action.member != self.node.name:
                    self._new_node(action.member, action.previous, action.joined)
                else:
                    self._apply([action.joined])
                if action.previous is None or action.previous != action.member:
                    self._state_joined(action.joined.all_users)
                elif self._state_gate is not None and self._state_gate.waiting:
                    # back after a server restart: the request, or its answer, may
                    # have been inside the server
                    self._state_actions(self._state_gate.server_restarted(self._now),
                                        self._now)
            elif isinstance(action, JoinDone):
                out.join_settled(action.error)
            elif isinstance(action, ResendReturned):
                self.stats["frames_resent"] += len(action.frames)
                for dests, frame in action.frames:
                    out.relay(frame, list(dests))
            elif isinstance(action, DropReturned):
                self.stats["undeliverable_frames"] += action.count
                log.warning("%s: %d frame(s) of the previous incarnation, returned by the "
                            "server, are not sent", self.name, action.count)
            elif isinstance(action, SessionLeft):
                out.left_session()

    def _new_node(self, member: str, previous: str | None, joined: MemberJoined) -> None:
        """Start this client's protocol node afresh as ``member``.

        On the first join the node made at construction only takes its member id. After
        the session declared this client gone (``previous``), it is a new process for
        every member: what the old node held back unsent is reported undeliverable, what
        it held for delivery is lost (its senders count it as addressed to a member that
        left), and the application's listeners move to the new node.
        """
        old = self.node
        if previous is not None:
            unsent = [m.message_id for m in old.held() if isinstance(m, SentMessage)]
            lost = [m.message_id for m in old.held() if not isinstance(m, SentMessage)]
            self._report_undeliverable(unsent, "was declared gone and came back as "
                                       f"{member}")
            if lost:
                self.stats["lost_on_reincarnation"] += len(lost)
                log.warning("%s: %d message(s) held for delivery are dropped with the old "
                            "incarnation: %s", member, len(lost), ", ".join(lost[:10]))
            self.out.discard_queued()
        old_tracer = self.tracer
        self.tracer = self._tracer_for(member)
        node = self._make_node(member)
        node.message_listeners = old.message_listeners
        node.sent_listener = old.sent_listener
        apply_to_node(node, joined)
        # the new node is in place before the application hears of the join: a send it
        # makes in reply is tagged by the new incarnation (one the old node tagged
        # meanwhile is reported undeliverable by application_sends)
        self.node = node
        self.member = member
        self._update_deadline()  # the new node's filters may have timers
        for listener in self.session_listeners:
            node.add_session_listener(listener)
            listener.client_joined(joined.member, self.application, self.session,
                                   joined.is_new_session, joined.is_new_application,
                                   tuple(joined.all_users))
        if old_tracer is not self.tracer:
            # the old incarnation's trace ends without its own departure: it was
            # declared gone, which an analysis reports as an abrupt ending
            old_tracer.close()

    def _report_undeliverable(self, ids: list[str], why: str) -> None:
        if not ids:
            return
        self.stats["undeliverable"] += len(ids)
        self._undeliverable.extend(ids)
        log.warning("%s: %d message(s) accepted for sending are not sent (this client %s): "
                    "%s", self.name, len(ids), why, ", ".join(ids[:10]))

    def _release_departed(self, now: float) -> None:
        """The ``release_after`` policy: deliver, past the gap, what still waits on a
        member that left that long ago (its missing messages are taken as lost)."""
        for member, due in list(self._release_due.items()):
            if now < due:
                continue
            del self._release_due[member]
            waiting = [mid for mid, on in self.node.waiting_for().items() if member in on]
            if not waiting:
                continue
            released = self.node.release_waiting_on(member)
            self.stats["released_after_departure"] += len(released)
            log.warning("%s: %s left %gs ago; released %d held message(s) that waited on "
                        "it: %s", self.name, member, self.release_after, len(released),
                        ", ".join(released[:10]))
            self.drain()

    # -- state transfer: as a newcomer -------------------------------------------------------
    def _state_joined(self, members: Sequence[str]) -> None:
        if self._state_gate is not None:
            self.out.state_pending()  # a new incarnation asks again
            self._state_actions(self._state_gate.joined(self.node.name, members,
                                                        self._now),
                                self._now)

    def _state_member_left(self, member: str) -> None:
        if self._state_gate is not None and self._state_gate.waiting:
            now = self._now
            self._state_actions(self._state_gate.member_left(member, now), now)

    def _state_actions(self, actions: list[Ask | Install], now: float) -> None:
        for action in actions:
            if isinstance(action, Ask):
                self.stats["state_requests"] += 1
                self._send_system(StateRequest(), action.member)
                continue
            if action.reply is not None and self._state_consumer is not None:
                # what the snapshot holds happened before this member's next sends
                self.node.merge_application_clock(action.reply.clock)
                try:
                    self._state_consumer(action.reply.state)
                    self.stats["state_installed"] += 1
                except Exception:
                    log.exception("%s: the state consumer raised; going on without the "
                                  "snapshot", self.name)
            for message in action.skipped:  # seen through the snapshot: clock and trace
                self.stats["delivered_through_state"] += 1
                self.node.application_delivered(message)
            for message in action.release:
                self.stats["delivered"] += 1
                self.out.hand_over(message)
            self.out.state_settled()

    # -- state transfer: as a member ---------------------------------------------------------
    def _state_newcomer(self, newcomer: str, members: Sequence[str]) -> None:
        """``newcomer`` joined and asks for state: mark the end of what this member sent
        before its join, to every member (see groupcomm.core.state_transfer, the cut).
        With a send queue the markers are tagged into it like the application's sends,
        so they go after every send tagged before them (:meth:`Out.take_sends`)."""
        self._cuts.newcomer(newcomer, members)
        node = self.node
        try:
            markers = node.tag_sends(JoinMarker(newcomer), list(node.members))
        except Exception as error:  # the module cannot carry it: the cut is not exact
            log.warning("%s: cannot mark the join of %s (%s); a snapshot may miss messages "
                        "sent before it", self.name, newcomer, error)
            return
        self.stats["join_markers"] += 1
        if self._send_queue is not None:
            self.out.take_sends()
        else:
            node.queue_sends(markers)
        self.drain()

    def _answer(self, newcomers: list[str]) -> None:
        for newcomer in newcomers:
            if newcomer in self.node.member_set:
                self._give_snapshot(newcomer)

    def _give_snapshot(self, newcomer: str) -> None:
        if self.caught_up():
            self._send_system(self._snapshot(newcomer), newcomer)
        elif newcomer not in self.deferred_answers:
            self.stats["state_answers_deferred"] += 1
            self.deferred_answers.append(newcomer)

    def answer_deferred(self) -> None:
        """Give the snapshots that waited for the application to catch up (the host
        calls this after the application acknowledged what it applied), if it has."""
        if self.deferred_answers and self.caught_up():
            waiting, self.deferred_answers = self.deferred_answers, []
            for newcomer in waiting:
                if newcomer in self.node.member_set:
                    self._send_system(self._snapshot(newcomer), newcomer)

    def _on_system(self, message: ReceivedMessage) -> bool:
        """The node's system listener: state requests and replies are ours."""
        user = message.user_message
        if isinstance(user, StateRequest):
            if self._cuts.request(message.sender):
                self._give_snapshot(message.sender)
            return True
        if isinstance(user, StateReply):
            if self._state_gate is not None:
                now = self._now
                self._state_actions(self._state_gate.reply(message.sender, user, now), now)
            return True
        return False

    def _snapshot(self, newcomer: str) -> StateReply:
        if self._state_provider is None or self.recent_ids is None:
            return StateReply(available=False)
        try:
            value = self._state_provider()
        except Exception:
            log.exception("%s: the state provider raised; %s gets no snapshot from here",
                          self.name, newcomer)
            return StateReply(available=False)
        state, own = ((value.state, tuple(value.reflects)) if isinstance(value, Snapshot)
                      else (value, ()))
        self.stats["state_given"] += 1
        # read after the provider: an own send racing it is covered rather than missed
        clock = tuple(self.node.application_clock.items())
        return StateReply(available=True, state=state,
                          reflected=(*self.recent_ids, *own), clock=clock)

    def _send_system(self, obj: Any, dest: str) -> None:
        self._system_sent += 1
        node = self.node
        node.submit(SentMessage(
            application_name=self.application, session_name=self.session, user_message=obj,
            message_id=f"{node.name}~state{self._system_sent}", sender=node.name,
            destinations=(dest,),
        ))
        self.drain()

    # -- the node's deliver callback ----------------------------------------------------------
    def _deliverable(self, message: ReceivedMessage) -> None:
        user = message.user_message
        if type(user) is JoinMarker:  # the session's, not the application's
            self._answer(self._cuts.marker(user.newcomer, message.sender))
            return
        if type(user) is Withdrawn:  # its payload could not travel
            self.stats["withdrawn"] += 1
            log.warning("%s: message %s from %s never reaches the application: its sender "
                        "could not send it (%s)", self.name, message.message_id,
                        message.sender, user.reason)
            return
        gate = self._state_gate
        if gate is not None:  # a newcomer installing a snapshot
            verdict = gate.deliver(message)
            if verdict != "deliver":
                if verdict == "skip":
                    self.stats["delivered_through_state"] += 1
                    self.node.application_delivered(message)
                return
        self.stats["delivered"] += 1
        self.out.hand_over(message)
