"""A deterministic in-process network for tests.

It runs the real pipelines (real filters and managers) of N :class:`ProtocolNode` s
and passes every frame through the real codec, so a filter that aliases state into a
message it sent shows up as a bug. The test chooses the order in which in-flight
frames arrive: oldest first, a seeded random choice, or any index it likes; links can
be made FIFO per ordered pair.

Applications are modelled in the callback style: ``on_deliver`` reactions may send
from inside a delivery, and those sends are tagged at the call.

Joins and leaves go through the session protocol's own objects
(:class:`~groupcomm.protocol.client_actions.InProcessSession`): a
:class:`~groupcomm.protocol.registry.SessionRegistry` decides who is told, in which
order, with which member list and incarnation (a name that comes back is ``name~2``),
and each process's :class:`~groupcomm.core.membership.Membership` processes its notices
as a networked client does. Nodes are known by their member ids.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.membership import display_name
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.tracing import MemoryTracer, NullTracer, Tracer
from groupcomm.protocol.client_actions import (
    APPLICATION,
    SESSION,
    InProcessSession,
    Notice,
    carry_out,
)
from groupcomm.wire.envelopes import decode_received, encode_message

Reaction = Callable[["LocalNetwork", str, ReceivedMessage], None]


@dataclass(frozen=True)
class InFlight:
    """A frame on its way from ``source`` to ``dest``."""

    seq: int
    source: str
    dest: str
    frame: bytes
    message_id: str
    control: bool


class LocalNetwork:
    """N nodes joined to one session, with a controllable in-flight set."""

    def __init__(
        self,
        names: Sequence[str],
        module: CausalityModule | str | None = None,
        *,
        extra_send: Sequence[MessageFilterCreator[SentMessage]] = (),
        extra_receive: Sequence[MessageFilterCreator[ReceivedMessage]] = (),
        fifo_links: bool = False,
        trace: bool = True,
    ) -> None:
        if isinstance(module, str) or module is None:
            from groupcomm.core.registry import get_module

            module = get_module(module or "none")
        self.module = module
        self.fifo_links = fifo_links
        self.step_count = 0
        self.tracer: Tracer = MemoryTracer() if trace else NullTracer()
        self.in_flight: list[InFlight] = []
        self._seq = 0
        self.deliveries: dict[str, list[ReceivedMessage]] = {n: [] for n in names}
        self.reactions: dict[str, list[Reaction]] = {n: [] for n in names}
        self.nodes: dict[str, ProtocolNode] = {}
        self._extra = (list(extra_send), list(extra_receive))
        self.session = InProcessSession(now=0.0)
        #: process name -> notices it has not processed yet, oldest first (see join)
        self._pending: dict[str, deque[Notice]] = {}
        for name in names:
            self.nodes[name] = self._make_node(name)
        # the processes join one by one, each told of every later join
        for name in names:
            member, notices = self.session.join(name, self._now())
            assert member == name  # a new registry: every first join is incarnation 1
            for process, notice in notices:
                self._notify(process, notice, process_now=True)

    # -- wiring -----------------------------------------------------------------------------
    def _make_node(self, name: str) -> ProtocolNode:
        extra_send, extra_receive = self._extra
        node = ProtocolNode(
            name,
            application=APPLICATION,
            session=SESSION,
            transmit=self._make_transmit(name),
            clock=lambda: float(self.step_count),
            send_creators=[self.module.send_creator(), *extra_send],
            receive_creators=[*extra_receive, self.module.receive_creator()],
            tracer=self.tracer,
        )
        node.message_listeners.append(self._make_listener(name))
        return node

    def _make_transmit(self, source: str) -> Callable[[SentMessage, tuple[str, ...]], None]:
        def transmit(message: SentMessage, dests: tuple[str, ...]) -> None:
            frame = encode_message(message)
            for dest in dests:
                self._seq += 1
                self.in_flight.append(
                    InFlight(self._seq, source, dest, frame, message.message_id,
                             not message.is_user_message())
                )

        return transmit

    def _make_listener(self, name: str) -> Callable[[ReceivedMessage], None]:
        def listener(message: ReceivedMessage) -> None:
            self.deliveries[name].append(message)
            for reaction in self.reactions[name]:
                reaction(self, name, message)

        return listener

    # -- driving ----------------------------------------------------------------------------
    def send(self, sender: str, payload: Any, dests: Iterable[str]) -> SentMessage:
        """Application ``sender`` sends ``payload`` to ``dests``."""
        node = self.nodes[sender]
        messages = node.tag_sends(payload, dests)
        node.submit_many(messages)
        return messages[0]

    def to_others(self, sender: str, payload: Any) -> SentMessage:
        """Broadcast to every other member."""
        return self.send(sender, payload, [n for n in self.nodes if n != sender])

    def _now(self) -> float:
        return float(self.step_count)

    def _notify(self, process: str, notice: Notice, *, process_now: bool) -> None:
        """Queue ``notice`` for ``process``; with ``process_now``, it processes every
        notice it has queued (in order, as a connection to the server delivers them)."""
        queue = self._pending.setdefault(process, deque())
        queue.append(notice)
        if process_now:
            self._process_notices(process, len(queue))

    def _process_notices(self, process: str, count: int) -> None:
        queue = self._pending[process]
        for _ in range(count):
            notice = queue.popleft()
            node = self.nodes[self.session.member_of(process)]
            carry_out(node, self.session.on_notice(process, notice, self._now()))

    def join(self, name: str, told: Iterable[str] | None = None) -> str:
        """``name`` joins while traffic flows; returns its member id (``name~2`` for a
        name that was a member before). The newcomer and the members in ``told`` (all
        by default) process its join now; tell the others later with
        :meth:`tell_join`, as a server's notices reach members at different times."""
        members = list(self.nodes)
        member, notices = self.session.join(name, self._now())
        self.nodes[member] = self._make_node(member)
        self.deliveries[member], self.reactions[member] = [], []
        by_process = dict(notices)  # one joined notice per member, the newcomer's last
        self._notify(name, by_process.pop(name), process_now=True)
        told = members if told is None else list(told)
        for other in told:
            notice = by_process.pop(display_name(other), None)
            if notice is not None:  # not a member, or named twice
                self._notify(display_name(other), notice, process_now=True)
        for process, notice in by_process.items():
            self._notify(process, notice, process_now=False)
        return member

    def tell_join(self, member: str, name: str) -> None:
        """``member`` processes the join of ``name`` (see :meth:`join`), and every notice
        it had queued before it. Nothing happens when it has processed it already."""
        queue = self._pending.get(display_name(member), deque())
        for index, notice in enumerate(queue):
            if notice["op"] == "joined" and name in (notice["client"],
                                                    display_name(notice["client"])):
                self._process_notices(display_name(member), index + 1)
                return

    def leave(self, name: str) -> None:
        """``name`` leaves: every other node is told (after the notices it had queued);
        frames to and from it are dropped."""
        self.in_flight = [f for f in self.in_flight if name not in (f.source, f.dest)]
        node = self.nodes.pop(name)
        node.tracer = NullTracer()
        process = display_name(name)
        self._pending.pop(process, None)
        for other, notice in self.session.leave(process, self._now()):
            self._notify(other, notice, process_now=True)

    def arrivable(self) -> list[int]:
        """Indices into :attr:`in_flight` that may arrive next (FIFO links: heads only)."""
        if not self.fifo_links:
            return list(range(len(self.in_flight)))
        seen: set[tuple[str, str]] = set()
        heads = []
        for index, frame in enumerate(self.in_flight):
            pair = (frame.source, frame.dest)
            if pair not in seen:
                seen.add(pair)
                heads.append(index)
        return heads

    def deliver(self, index: int = 0) -> InFlight:
        """Let in-flight frame ``index`` arrive at its destination."""
        frame = self.in_flight.pop(index)
        self.step_count += 1
        node = self.nodes.get(frame.dest)
        if node is not None:
            node.receive(decode_received(frame.frame, frame.dest))
        return frame

    def run(
        self,
        rng: random.Random | None = None,
        *,
        max_steps: int = 1_000_000,
        choose: Callable[[list[int], list[InFlight]], int] | None = None,
    ) -> int:
        """Deliver until nothing is in flight; returns the number of arrivals.

        Order: ``choose(candidates, in_flight)`` if given, else a random candidate from
        ``rng``, else the oldest. Raises ``RuntimeError`` past ``max_steps``.
        """
        steps = 0
        while self.in_flight:
            if steps >= max_steps:
                raise RuntimeError(f"network still busy after {max_steps} arrivals")
            candidates = self.arrivable()
            if choose is not None:
                index = choose(candidates, self.in_flight)
            elif rng is not None:
                index = rng.choice(candidates)
            else:
                index = candidates[0]
            self.deliver(index)
            steps += 1
        return steps

    # -- inspection ---------------------------------------------------------------------------
    def delivered_ids(self, name: str) -> list[str]:
        """Message ids delivered to ``name`` in order."""
        return [m.message_id for m in self.deliveries[name]]

    def delivered_payloads(self, name: str) -> list[Any]:
        """Payloads delivered to ``name`` in order."""
        return [m.user_message for m in self.deliveries[name]]

    def manager(self, name: str) -> Any:
        """The causality manager of ``name``."""
        return self.nodes[name].shared[f"causality:{self.module.name}"]

    @property
    def records(self) -> list[dict[str, Any]]:
        """All trace records so far (empty when tracing is off)."""
        return self.tracer.records if isinstance(self.tracer, MemoryTracer) else []
