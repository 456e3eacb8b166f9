"""The communicator's side of state transfer (:mod:`groupcomm.core.state_transfer`):
it answers other members' requests with its application's snapshot, and as a newcomer
asks for one, installs it and delivers only what it does not reflect. Runs on the I/O
thread; the provider and the consumer are called there, between two deliveries.

What a snapshot reflects: every message the application was handed (in the pull model,
once ``receive()`` returned it; a send that includes the sender, once delivered to it).
Only the application knows which of its own sends to others its state holds (the IM app
keeps its messages to everyone, not its private ones): its provider returns a
:class:`~groupcomm.core.state_transfer.Snapshot` naming them. An application that sends
from another thread than the one its provider runs on makes the send and its own state
change one step under a lock the provider takes too, so no snapshot falls between them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from groupcomm.core.messages import ReceivedMessage, SentMessage, Withdrawn
from groupcomm.core.state_transfer import (
    REFLECTED_IDS,
    Ask,
    Cuts,
    Install,
    JoinMarker,
    NewcomerState,
    Snapshot,
    StateReply,
    StateRequest,
)

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")


class StateLink:
    """State transfer, a part of :class:`~groupcomm.transport.communicator.Communicator`."""

    def _init_state_link(self, provider: Callable[[], Any] | None,
                         consumer: Callable[[Any], None] | None, timeout: float) -> None:
        self._state_provider = provider
        self._state_consumer = consumer
        #: the newcomer's side, when the application installs snapshots
        self._state_gate = NewcomerState(timeout) if consumer is not None else None
        #: set once the newcomer's state transfer is over (see wait_for_state)
        self._state_settled = threading.Event()
        if consumer is None:
            self._state_settled.set()
        #: ids of the latest messages handed to the application (what a snapshot reflects)
        self._recent_ids: deque[str] | None = (
            deque(maxlen=REFLECTED_IDS) if provider is not None else None)
        self._system_sent = 0
        #: the newcomer asks for state: the server tells members, who mark their cut
        self.membership.wants_state = consumer is not None
        self._cuts = Cuts()
        #: ids of the current node taken by sends this layer made itself (join markers)
        self._session_ids = 0

    # -- as a newcomer ------------------------------------------------------------------------
    def wait_for_state(self, timeout: float | None = None) -> bool:
        """Wait until the state transfer of this newcomer is over: the snapshot is
        installed, or no member could give one (a warning says so). True when it is
        over, False on ``timeout``; at once for a client without a state consumer. An
        application that edits shared state waits for it before its first edit, which
        the snapshot would otherwise replace."""
        return self._state_settled.wait(timeout)

    def _state_joined(self, members: Sequence[str]) -> None:
        if self._state_gate is not None:
            self._state_settled.clear()  # a new incarnation asks again
            self._state_actions(self._state_gate.joined(self.node.name, members,
                                                        time.monotonic()))

    def _state_member_left(self, member: str) -> None:
        if self._state_gate is not None and self._state_gate.waiting:
            self._state_actions(self._state_gate.member_left(member, time.monotonic()))

    def _state_tick(self, now: float) -> None:
        if self._state_gate is not None and self._state_gate.waiting:
            self._state_actions(self._state_gate.tick(now))

    def _state_actions(self, actions: list[Ask | Install]) -> None:
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
                self._hand_over(message)
            self._state_settled.set()

    # -- as a member ---------------------------------------------------------------------------
    def _state_newcomer(self, newcomer: str, members: Sequence[str]) -> None:
        """``newcomer`` joined and asks for state: mark the end of what this member sent
        before its join, to every member (see groupcomm.core.state_transfer, the cut)."""
        self._cuts.newcomer(newcomer, members)
        node = self.node
        try:
            markers = node.tag_sends(JoinMarker(newcomer), list(node.members))
        except Exception as error:  # the module cannot carry it: the cut is not exact
            log.warning("%s: cannot mark the join of %s (%s); a snapshot may miss messages "
                        "sent before it", self.name, newcomer, error)
            return
        self.stats["join_markers"] += 1
        # the markers go after every send the application made before them. A sending
        # thread tags a message, then queues it: wait (a few microseconds) for one that
        # has done the first and not yet the second, known by the ids it took
        first = int(markers[0].message_id.rpartition("#")[2])
        application_before = first - 1 - self._session_ids
        self._session_ids += len(markers)
        deadline = time.monotonic() + 1.0
        while (self._taken + len(self._outgoing) < application_before
               and time.monotonic() < deadline):
            time.sleep(0)
        self._take_outgoing()
        node.queue_sends(markers)
        self._drain_node()

    def _on_marker(self, message: ReceivedMessage) -> None:
        """A member's :class:`JoinMarker`, delivered in causal order: consumed here (the
        application never sees it, so its clock does not count it)."""
        self._answer(self._cuts.marker(message.user_message.newcomer, message.sender))

    def _state_cut_member_left(self, member: str) -> None:
        self._answer(self._cuts.member_left(member))

    def _answer(self, newcomers: list[str]) -> None:
        for newcomer in newcomers:
            if newcomer in self.node.member_set:
                self._send_system(self._snapshot(newcomer), newcomer)

    def _on_system(self, message: ReceivedMessage) -> bool:
        """The node's system listener: state requests and replies are ours."""
        user = message.user_message
        if isinstance(user, StateRequest):
            if self._cuts.request(message.sender):
                self._send_system(self._snapshot(message.sender), message.sender)
            return True
        if isinstance(user, StateReply):
            if self._state_gate is not None:
                self._state_actions(self._state_gate.reply(message.sender, user,
                                                           time.monotonic()))
            return True
        return False

    def _snapshot(self, newcomer: str) -> StateReply:
        if self._state_provider is None or self._recent_ids is None:
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
                          reflected=(*self._recent_ids, *own), clock=clock)

    def _send_system(self, obj: Any, dest: str) -> None:
        self._system_sent += 1
        node = self.node
        node.submit(SentMessage(
            application_name=self.application, session_name=self.session, user_message=obj,
            message_id=f"{node.name}~state{self._system_sent}", sender=node.name,
            destinations=(dest,),
        ))
        self._drain_node()

    # -- the node's deliver callback (I/O thread) -----------------------------------------------
    def _deliverable(self, message: ReceivedMessage) -> None:
        if type(message.user_message) is JoinMarker:  # the session's, not the application's
            self._on_marker(message)
            return
        if type(message.user_message) is Withdrawn:  # its payload could not travel
            self.stats["withdrawn"] += 1
            log.warning("%s: message %s from %s never reaches the application: its sender "
                        "could not send it (%s)", self.name, message.message_id,
                        message.sender, message.user_message.reason)
            return
        gate = self._state_gate
        if gate is not None:  # a newcomer installing a snapshot (see StateLink)
            verdict = gate.deliver(message)
            if verdict != "deliver":
                if verdict == "skip":
                    self.stats["delivered_through_state"] += 1
                    self.node.application_delivered(message)
                return
        self._hand_over(message)
