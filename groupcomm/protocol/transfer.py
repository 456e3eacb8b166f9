"""Both sides of state transfer for one member: :class:`StateTransfer`.

The rules are :mod:`groupcomm.core.state_transfer`'s (the newcomer's gate, the members'
cuts, what a snapshot reflects); this is what one member does with them: as a newcomer,
ask one member after another and hold deliveries until a snapshot is in; as a member,
mark the join of a newcomer that asks after everything sent before it, and answer once
the cut is complete and the application has applied everything it was handed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.state_transfer import (
    Ask,
    Cuts,
    Install,
    JoinMarker,
    NewcomerState,
    Snapshot,
    StateReply,
    StateRequest,
)
from groupcomm.protocol.actions import Out
from groupcomm.protocol.port import ApplicationPort
from groupcomm.protocol.session_events import (
    SessionEvent,
    StateInstalled,
    StateRequested,
    StateUnavailable,
)

__all__ = ["StateTransfer"]

log = logging.getLogger(__name__)


class Member(Protocol):
    """What state transfer uses of its member (a
    :class:`~groupcomm.protocol.client.ClientProtocol`)."""

    name: str
    application: str
    session: str
    node: ProtocolNode
    port: ApplicationPort
    out: Out
    stats: Counter[str]
    lock: AbstractContextManager[Any]
    now: float

    def emit(self, event: SessionEvent) -> None: ...

    def drain(self) -> None: ...

    def take_inputs(self, markers: int = 0) -> None: ...


class StateTransfer:
    """State transfer at one member (see the module docstring). ``provider`` gives a
    snapshot of the application state (or a :class:`Snapshot`), ``consumer`` installs
    one; a member without a consumer asks for nothing, one without a provider answers
    that it has nothing to give."""

    def __init__(self, member: Member, *, provider: Callable[[], Any] | None,
                 consumer: Callable[[Any], None] | None, timeout: float) -> None:
        self._member = member
        self._provider = provider
        self._consumer = consumer
        #: the newcomer's side, when the application installs snapshots
        self.gate = NewcomerState(timeout) if consumer is not None else None
        self._cuts = Cuts()
        #: newcomers whose snapshot waits until the application has caught up
        self.deferred: list[str] = []
        self._system_sent = 0

    @property
    def waiting(self) -> bool:
        """True while this newcomer waits for a snapshot (time matters then)."""
        return self.gate is not None and self.gate.waiting

    # -- as a newcomer -------------------------------------------------------------------------
    def joined(self, members: Sequence[str], now: float) -> None:
        """This client joined, or came back as a new member: ask for the state again."""
        if self.gate is not None:
            self._member.out.state_pending()
            self._carry_out(self.gate.joined(self._member.node.name, members, now), now)

    def member_left(self, member: str, now: float) -> None:
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.member_left(member, now), now)
        self.answer(self._cuts.member_left(member))

    def server_restarted(self, now: float) -> None:
        """This newcomer is back after a server restart while it waits: ask again."""
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.server_restarted(now), now)

    def tick(self, now: float) -> None:
        if self.gate is not None and self.gate.waiting:
            self._carry_out(self.gate.tick(now), now)

    def deliver(self, message: ReceivedMessage) -> bool:
        """Whether the gate takes ``message`` (held until the snapshot is in, or seen
        through it) instead of its going to the application now."""
        gate = self.gate
        if gate is None:
            return False
        verdict = gate.deliver(message)
        if verdict == "deliver":
            return False
        if verdict == "skip":
            self._member.stats["delivered_through_state"] += 1
            self._member.node.application_delivered(message)
        return True

    def _carry_out(self, actions: list[Ask | Install], now: float) -> None:
        member = self._member
        for action in actions:
            if isinstance(action, Ask):
                member.stats["state_requests"] += 1
                member.emit(StateRequested(member=member.node.name, asked=action.member))
                self._send_system(StateRequest(), action.member)
                continue
            if action.reply is not None and self._consumer is not None:
                # what the snapshot holds happened before this member's next sends
                member.node.merge_application_clock(action.reply.clock)
                try:
                    self._consumer(action.reply.state)
                    member.stats["state_installed"] += 1
                except Exception:
                    log.exception("%s: the state consumer raised; going on without the "
                                  "snapshot", member.name)
            for message in action.skipped:  # seen through the snapshot: clock and trace
                member.stats["delivered_through_state"] += 1
                member.node.application_delivered(message)
            for message in action.release:
                member.stats["delivered"] += 1
                member.port.hand_over(message)
            member.out.state_settled()
            source = action.source
            member.emit(StateInstalled(member=member.node.name, source=source)
                        if source is not None else StateUnavailable(member=member.node.name))

    # -- as a member ---------------------------------------------------------------------------
    def newcomer(self, newcomer: str, members: Sequence[str]) -> None:
        """``newcomer`` joined and asks for state: mark the end of what this member sent
        before its join, to every member. The markers are tagged into the member's input
        queue like the application's sends, so they go after every send tagged before
        them."""
        self._cuts.newcomer(newcomer, members)
        member = self._member
        node = member.node
        try:
            markers = node.tag_sends(JoinMarker(newcomer), list(node.members))
        except Exception as error:  # the module cannot carry it: the cut is not exact
            log.warning("%s: cannot mark the join of %s (%s); a snapshot may miss messages "
                        "sent before it", member.name, newcomer, error)
            return
        member.stats["join_markers"] += 1
        member.take_inputs(markers=len(markers))

    def marker(self, marker: JoinMarker, sender: str) -> None:
        """``sender``'s join marker for a newcomer was delivered here."""
        self.answer(self._cuts.marker(marker.newcomer, sender))

    def answer(self, newcomers: list[str]) -> None:
        for newcomer in newcomers:
            if newcomer in self._member.node.member_set:
                self._give_snapshot(newcomer)

    def _give_snapshot(self, newcomer: str) -> None:
        if self._member.port.caught_up:
            self._send_system(self._snapshot(newcomer), newcomer)
        elif newcomer not in self.deferred:
            self._member.stats["state_answers_deferred"] += 1
            self.deferred.append(newcomer)

    def answer_deferred(self) -> None:
        """Give the snapshots that waited for the application to catch up, if it has."""
        if self.deferred and self._member.port.caught_up:
            waiting, self.deferred = self.deferred, []
            for newcomer in waiting:
                if newcomer in self._member.node.member_set:
                    self._send_system(self._snapshot(newcomer), newcomer)

    def on_system(self, message: ReceivedMessage) -> bool:
        """The node's system listener: state requests and replies are ours."""
        user = message.user_message
        if isinstance(user, StateRequest):
            if self._cuts.request(message.sender):
                self._give_snapshot(message.sender)
            return True
        if isinstance(user, StateReply):
            if self.gate is not None:
                now = self._member.now
                self._carry_out(self.gate.reply(message.sender, user, now), now)
            return True
        return False

    def _snapshot(self, newcomer: str) -> StateReply:
        member = self._member
        recent = member.port.recent
        if self._provider is None or recent is None:
            return StateReply(available=False)
        try:
            value = self._provider()
        except Exception:
            log.exception("%s: the state provider raised; %s gets no snapshot from here",
                          member.name, newcomer)
            return StateReply(available=False)
        state, own = ((value.state, tuple(value.reflects)) if isinstance(value, Snapshot)
                      else (value, ()))
        member.stats["state_given"] += 1
        # read after the provider: an own send racing it is covered rather than missed
        with member.lock:
            clock = tuple(member.node.application_clock_locked().items())
            reflected = (*recent, *own)
        return StateReply(available=True, state=state, reflected=reflected, clock=clock)

    def _send_system(self, obj: Any, dest: str) -> None:
        self._system_sent += 1
        member = self._member
        node = member.node
        node.submit(SentMessage(
            application_name=member.application, session_name=member.session,
            user_message=obj, message_id=f"{node.name}~state{self._system_sent}",
            sender=node.name, destinations=(dest,),
        ))
        member.drain()
