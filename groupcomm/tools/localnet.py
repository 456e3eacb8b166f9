"""A deterministic in-process network for tests: real clients
(:class:`~groupcomm.protocol.inprocess.InProcessMember`) and the real registry behind the
server's checks (:class:`~groupcomm.protocol.inprocess.InProcessServer`).

Every message travels as a signed frame pushed straight to its destination (direct
routing), so a filter that aliases state into a message it sent shows up as a bug, and
every frame passes the receiver's checks. The test chooses which in-flight frame arrives
next (oldest first, seeded random, or any index); links can be FIFO per ordered pair.
Applications are callbacks (``reactions`` may send from inside a delivery). Joins and
leaves go through the server, which decides who is told, in which order, with which
member list and incarnation (a name that comes back is ``name~2``); a join's notices are
processed at once or when the test says (:meth:`LocalNetwork.tell_join`). Nodes are
known by their member ids.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.tracing import MemoryTracer, NullTracer, Tracer
from groupcomm.protocol.inprocess import (
    Delivery,
    InProcessMember,
    InProcessServer,
    seeded_codec,
)
from groupcomm.wire.envelopes import decode_received, encode_message, pack_envelopes
from groupcomm.wire.frames import sealed_body
from groupcomm.wire.session import open_session
from groupcomm.wire.streams import StreamEncoder

Reaction = Callable[["LocalNetwork", str, ReceivedMessage], None]


@dataclass(frozen=True)
class InFlight:
    """A frame on its way from ``source`` to ``dest``: ``sealed`` is what arrives;
    :attr:`frame` is the message's envelope (to look at what it carries)."""

    source: str
    dest: str
    message: SentMessage
    sealed: bytes

    @property
    def message_id(self) -> str:
        return self.message.message_id

    @property
    def control(self) -> bool:
        return not self.message.is_user_message()

    @functools.cached_property
    def frame(self) -> bytes:
        return encode_message(self.message)


class LocalNetwork:
    """N members joined to one session, with a controllable in-flight set."""

    def __init__(self, names: Sequence[str], module: CausalityModule | str | None = None, *,
                 extra_send: Sequence[MessageFilterCreator[SentMessage]] = (),
                 extra_receive: Sequence[MessageFilterCreator[ReceivedMessage]] = (),
                 fifo_links: bool = False, trace: bool = True) -> None:
        if isinstance(module, str) or module is None:
            from groupcomm.core.registry import get_module

            module = get_module(module or "none")
        self.module = module
        self.fifo_links = fifo_links
        self.step_count = 0
        self.tracer: Tracer = MemoryTracer() if trace else NullTracer()
        self.in_flight: list[InFlight] = []
        self.deliveries: dict[str, list[ReceivedMessage]] = {n: [] for n in names}
        self.reactions: dict[str, list[Reaction]] = {n: [] for n in names}
        #: member id -> its protocol node (a test may put a node of its own here)
        self.nodes: dict[str, ProtocolNode] = {}
        #: member id -> the member (client protocol and its host side)
        self.members: dict[str, InProcessMember] = {}
        self._extra = (list(extra_send), list(extra_receive))
        self.server = InProcessServer(now=0.0, codec=seeded_codec("server"))
        #: process name -> the member it runs (the server's connection is the name)
        self._processes: dict[str, InProcessMember] = {}
        #: frames on their way to the server, and what each process has not taken yet
        self._to_server: deque[tuple[str, bytes]] = deque()
        self._pending: dict[str, deque[Delivery]] = {}
        self._pumping = False
        self._starts = 0
        #: codecs of nodes a test made itself (see _make_transmit)
        self._codecs: dict[str, Any] = {}
        # the processes join one by one, each told of every later join
        for name in names:
            self.join(name)

    # -- wiring -----------------------------------------------------------------------------
    def _make_member(self, name: str) -> InProcessMember:
        extra_send, extra_receive = self._extra
        self._starts += 1
        return InProcessMember(
            name, self, now=self._now(), codec=seeded_codec(f"{name}.{self._starts}"),
            routing="direct",
            filter_stacks=([self.module.send_creator(), *extra_send],
                           [*extra_receive, self.module.receive_creator()]),
            tracer_for=lambda member: self.tracer, clock=lambda: float(self.step_count))

    def _make_transmit(self, source: str) -> Callable[[SentMessage, tuple[str, ...]], None]:
        """The transmit function of a node a test made itself (not a member): its
        frames are signed as a member's are."""
        codec = self._codecs.setdefault(source, seeded_codec(f"{source}.own"))
        encoder = StreamEncoder(compress=False)

        def transmit(message: SentMessage, dests: tuple[str, ...]) -> None:
            body = next(pack_envelopes([message], 1 << 24))
            for dest in dests:
                sealed = codec.seal(encoder.wrap((dest,), body))
                self.in_flight.append(InFlight(source, dest, message, sealed))

        return transmit

    def _delivered(self, name: str, message: ReceivedMessage) -> None:
        self.deliveries[name].append(message)
        for reaction in self.reactions[name]:
            reaction(self, name, message)

    # -- the members' carrier -----------------------------------------------------------------
    def command(self, member: InProcessMember, frame: bytes) -> None:
        self._to_server.append((member.name, frame))

    def relay(self, member: InProcessMember, frame: bytes, dests: tuple[str, ...],
              message: SentMessage | None) -> None:
        self._to_server.append((member.name, frame))

    def push(self, member: InProcessMember, dest: str, frame: bytes,
             message: SentMessage) -> None:
        self.in_flight.append(InFlight(message.sender, dest, message, frame))

    def _pump(self, hold: Iterable[str] = ()) -> None:
        """Carry frames to the server and its answers to the processes until none is
        left; processes in ``hold`` keep what they were sent (see :meth:`join`)."""
        if self._pumping:
            return  # a reaction's send: the pump under way carries it
        self._pumping = True
        held = set(hold)
        try:
            while self._to_server:
                process, frame = self._to_server.popleft()
                for conn, delivery in self.server.receive(process, frame, self._now()):
                    self._pending.setdefault(conn, deque()).append(delivery)
                for conn in list(self._pending):
                    if conn not in held:
                        self._process(conn, len(self._pending[conn]))
        finally:
            self._pumping = False

    def _process(self, process: str, count: int) -> None:
        """``process`` takes the first ``count`` things it was sent, in order."""
        queue = self._pending[process]
        member = self._processes.get(process)
        for _ in range(min(count, len(queue))):
            delivery = queue.popleft()
            if member is not None:
                member.take(delivery, self._now())
                self._track(member)

    def _track(self, member: InProcessMember) -> None:
        """Keep :attr:`nodes` and :attr:`members` on ``member``'s current incarnation."""
        mid = member.member
        if self.members.get(mid) is not member and member.joined and not member.left:
            self.members[mid] = member
            self.nodes[mid] = member.node
            self.deliveries.setdefault(mid, [])
            self.reactions.setdefault(mid, [])
            member.listeners.append(functools.partial(self._delivered, mid))

    # -- driving ----------------------------------------------------------------------------
    def send(self, sender: str, payload: Any, dests: Iterable[str]) -> SentMessage:
        """Application ``sender`` sends ``payload`` to ``dests``."""
        member = self.members.get(sender)
        if member is None:  # a node a test made itself
            node = self.nodes[sender]
            messages = node.tag_sends(payload, dests)
            node.submit_many(messages)
            return messages[0]
        messages = member.send(payload, list(dests))
        self._pump()
        return messages[0]

    def to_others(self, sender: str, payload: Any) -> SentMessage:
        """Broadcast to every other member."""
        return self.send(sender, payload, [n for n in self.nodes if n != sender])

    def _now(self) -> float:
        return float(self.step_count)

    def join(self, name: str, told: Iterable[str] | None = None) -> str:
        """``name`` joins while traffic flows; returns its member id (``name~2`` for a
        name that was a member before). The newcomer and the members in ``told`` (all
        by default) process its join now; tell the others later with
        :meth:`tell_join`, as a server's notices reach members at different times.
        Raises ``ValueError`` when ``name`` cannot be a client name or is not admitted
        (a member holds it)."""
        member = self._make_member(name)
        if name in self._processes:
            raise ValueError(f"{name!r} is not admitted to the session: a member holds "
                             "the name")
        informed = set(self.members if told is None else (display_name(m) for m in told))
        hold = [display_name(m) for m in self.members if display_name(m) not in informed]
        self._processes[name] = member
        member.start()
        self._pump(hold)
        if not member.joined:
            del self._processes[name]
            self._pending.pop(name, None)
            raise ValueError(f"{name!r} is not admitted to the session: "
                             f"{member.join_error or 'it is a member already'}")
        return member.member

    def tell_join(self, member: str, name: str) -> None:
        """``member`` processes the join of ``name`` (see :meth:`join`), and every notice
        it had queued before it. Nothing happens when it has processed it already."""
        process = display_name(member)
        queue = self._pending.get(process, deque())
        for index, delivery in enumerate(queue):
            if delivery[0] != "session":
                continue
            notice = open_session(sealed_body(delivery[1]))
            joined = str(notice.get("client", ""))
            if notice["op"] == "joined" and name in (joined, display_name(joined)):
                self._process(process, index + 1)
                self._pump()
                return

    def leave(self, name: str) -> None:
        """``name`` leaves: every other member is told (after the notices it had
        queued); frames to and from it are dropped, and its leave says it pushed none
        (nobody waits for them)."""
        self.in_flight = [f for f in self.in_flight if name not in (f.source, f.dest)]
        member = self.members.pop(name)
        node = self.nodes.pop(name)
        process = display_name(name)
        self._pending.pop(process, None)
        member.direct_sent.clear()
        member.leave()
        self._pump()
        node.tracer = NullTracer()  # what it does from now on is not the session's
        del self._processes[process]
        self._pending.pop(process, None)

    def arrivable(self) -> list[int]:
        """Indices into :attr:`in_flight` that may arrive next (FIFO links: heads only)."""
        if not self.fifo_links:
            return list(range(len(self.in_flight)))
        heads: dict[tuple[str, str], int] = {}  # the first frame of each link
        for index, frame in enumerate(self.in_flight):
            heads.setdefault((frame.source, frame.dest), index)
        return list(heads.values())

    def deliver(self, index: int = 0) -> InFlight:
        """Let in-flight frame ``index`` arrive at its destination."""
        frame = self.in_flight.pop(index)
        self.step_count += 1
        member = self.members.get(frame.dest)
        if member is not None:
            member.message_frame(frame.sealed, self._now(), direct=True)
            self._pump()
        else:
            node = self.nodes.get(frame.dest)
            if node is not None:  # a node a test made itself
                node.receive(decode_received(frame.frame, frame.dest))
        return frame

    def run(self, rng: random.Random | None = None, *, max_steps: int = 1_000_000,
            choose: Callable[[list[int], list[InFlight]], int] | None = None) -> int:
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

