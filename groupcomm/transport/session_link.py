"""The communicator's side of the session protocol, as I/O: it feeds the server's notices,
arrivals from non-members and the passing of time to the I/O-free
:class:`~groupcomm.core.membership.Membership` and carries out the actions it answers
with (commands to the server, messages to the node, joins and leaves, a fresh node for
a new incarnation). Runs on the I/O thread.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable

from groupcomm.core.membership import (
    DEPART_WAIT,
    EARLY_WAIT,
    MAX_EARLY_MESSAGES,
    SERVER_SILENCE_HEARTBEATS,
    Action,
    Arrive,
    DropReturned,
    Incarnated,
    JoinDone,
    LeftSession,
    MemberJoined,
    MemberLeft,
    Membership,
    Reject,
    ResendReturned,
    SendCommand,
)
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.tracing import tracer_for
from groupcomm.protocol.client_actions import apply_to_node
from groupcomm.transport.address import nobody_listens
from groupcomm.transport.errors import JoinError
from groupcomm.wire.frames import SESSION, FrameRejected, kind_of
from groupcomm.wire.session import open_session, seal_session

__all__ = ["DEPART_WAIT", "EARLY_WAIT", "MAX_EARLY_MESSAGES", "SERVER_SILENCE_HEARTBEATS",
           "SessionLink"]

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")

#: seconds to wait for the join before asking whether anything listens at the address
LISTENER_PROBE_AFTER = 0.5

#: ids of messages reported undeliverable, kept for :meth:`Communicator.undeliverable`
MAX_UNDELIVERABLE_IDS = 10_000


class SessionLink:
    """Carries out :class:`Membership`'s actions, a part of
    :class:`~groupcomm.transport.communicator.Communicator` (I/O thread)."""

    def _await_join(self, join_timeout: float) -> None:
        """Wait (on the application's thread) until the server accepted the join; raise
        :class:`JoinError` saying why not, and close, if it did not."""
        name, session, server = self.name, self.session, self.server_address
        if not self._joined.wait(min(join_timeout, LISTENER_PROBE_AFTER)):
            # not joined yet: if nothing listens there, say so now rather than at the
            # timeout; if something does, the likely cause is a key the server cannot
            # verify (it drops such frames without reading them, so it cannot answer)
            nobody = nobody_listens(server)
            if nobody is not None:
                self.close()
                raise JoinError(f"{name!r} could not join session {session!r}: {nobody}; "
                                "is the session server running at that address?")
            if not self._joined.wait(max(0.0, join_timeout - LISTENER_PROBE_AFTER)):
                self.close()
                raise JoinError(
                    f"{name!r} could not join session {session!r}: the server at {server} "
                    f"accepts connections but did not answer within {join_timeout:g}s; "
                    "is the session key the server's? (it drops frames signed with "
                    "another key without reading them)"
                )
        if self._join_error is not None:
            error = self._join_error
            self.close()
            raise JoinError(error)

    def _init_session_link(self) -> None:
        self.membership = Membership(self.name, heartbeat_interval=self.heartbeat_interval,
                                     now=time.monotonic())
        #: ids of application messages this client accepted but could not send (it was
        #: declared gone, and they belonged to its old incarnation); newest last
        self._undeliverable: deque[str] = deque(maxlen=MAX_UNDELIVERABLE_IDS)
        #: the members listed when this client's current incarnation joined
        self._members_at_join: tuple[str, ...] = ()
        #: departed member -> when to release what still waits on it (release_after)
        self._release_due: dict[str, float] = {}

    @property
    def server_unreachable(self) -> bool:
        """True while the session server has not answered for a few heartbeats."""
        return self.membership.server_unreachable

    def _send_session(self, op: str, **fields: object) -> None:
        self._send_parts(self._dealer, [
            seal_session(self.codec, op, client=self.name, application=self.application,
                         session=self.session, **fields)
        ])

    def _send_leave(self) -> None:
        self._flush_outbox()
        self._apply(self.membership.leave(self._direct_sent))

    def _heartbeat(self, now: float) -> None:
        self._apply(self.membership.heartbeat(now))

    def _handle_session_frame(self, frame: bytes, returned: bytes | None = None) -> None:
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "expected a session frame from the server")
            notice = open_session(body)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, "server")
            if error.reason == "bad_signature":
                self._apply(self.membership.on_unverifiable_server_frame(time.monotonic()))
            return
        now = time.monotonic()
        if returned is not None and notice["op"] == "error":
            dests = notice.get("returned")
            if isinstance(dests, list) and all(isinstance(d, str) for d in dests):
                self._apply(self.membership.on_returned(tuple(dests), returned, now))
        self._apply(self.membership.on_notice(notice, now))

    def _admit(self, messages: Iterable[ReceivedMessage]) -> None:
        """Messages whose sender is not a current member: early, departing or stale."""
        now = time.monotonic()
        for message in messages:
            self._apply(self.membership.admit(message, now))

    def _session_tick(self, now: float) -> None:
        if self.membership.early or self.membership.departing:
            self._apply(self.membership.tick(now))
        self._state_tick(now)
        if self._release_due:
            self._release_departed(now)

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
            self._drain_node()

    # -- carrying out actions ----------------------------------------------------------------
    def _apply(self, actions: list[Action]) -> None:
        # what an action does to the node is apply_to_node's (shared with the in-process
        # hosts); around it, this side's I/O, statistics and state transfer
        for action in actions:
            if isinstance(action, Arrive):
                self.stats["messages_received"] += len(action.messages)
                apply_to_node(self.node, action)
                self._drain_node()
            elif isinstance(action, Reject):
                self.rejects.reject(action.reason, action.detail)
            elif isinstance(action, SendCommand):
                self._send_session(action.op, **action.fields)
            elif isinstance(action, MemberJoined):
                apply_to_node(self.node, action)
                if action.wants_state and action.member != self.node.name:
                    self._state_newcomer(action.member, action.all_users)
            elif isinstance(action, MemberLeft):
                self._drop_peer(action.member)
                apply_to_node(self.node, action)
                self._state_member_left(action.member)
                self._state_cut_member_left(action.member)
                if self.release_after is not None:
                    self._release_due[action.member] = time.monotonic() + self.release_after
            elif isinstance(action, Incarnated):
                self._members_at_join = tuple(action.joined.all_users)
                if action.member != self.node.name:
                    self._new_node(action.member, action.previous, action.joined)
                else:
                    self._apply([action.joined])
                if action.previous is None or action.previous != action.member:
                    self._state_joined(action.joined.all_users)
            elif isinstance(action, JoinDone):
                self._join_error = action.error
                self._joined.set()
            elif isinstance(action, ResendReturned):
                self.stats["frames_resent"] += len(action.frames)
                for dests, frame in action.frames:
                    self._relay(frame, list(dests))
            elif isinstance(action, DropReturned):
                self.stats["undeliverable_frames"] += action.count
                log.warning("%s: %d frame(s) of the previous incarnation, returned by the "
                            "server, are not sent", self.name, action.count)
            elif isinstance(action, LeftSession):
                self._left.set()

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
            unsent += [m.message_id for m in self._outgoing]
            self._outgoing.clear()
            lost = [m.message_id for m in old.held() if not isinstance(m, SentMessage)]
            self._report_undeliverable(unsent, "was declared gone and came back as "
                                       f"{member}")
            if lost:
                self.stats["lost_on_reincarnation"] += len(lost)
                log.warning("%s: %d message(s) held for delivery are dropped with the old "
                            "incarnation: %s", member, len(lost), ", ".join(lost[:10]))
            self._outbox.clear()
            self._outbox_count = 0
        old_tracer = self.tracer
        if self._given_tracer is None:
            self.tracer = tracer_for(member, self._trace_dir)
        node = self._make_node(member)
        node.message_listeners = old.message_listeners
        node.sent_listener = old.sent_listener
        apply_to_node(node, joined)
        # the new node is in place before the application hears of the join: a send it
        # makes in reply is tagged by the new incarnation (one the old node tagged
        # meanwhile is reported undeliverable by _take_outgoing)
        self.node = node
        self._taken = self._session_ids = 0  # the new node's ids start again
        for listener in self._session_listeners:
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
