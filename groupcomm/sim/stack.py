"""What the simulator's engine drives: the protocol side of the processes.

A :class:`Stack` takes the application's sends and the frames that arrive, and calls
back into the simulation (:class:`StackHost`) to put frames on the NICs and hand
deliveries to the applications: :class:`RealStack` runs whole clients,
:class:`~groupcomm.sim.matrix_model.MatrixModelStack` the vectorised model of the matrix
protocol. Both depend on this module, not on the engine, so the engine can import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from groupcomm.core.headers import meta_bytes
from groupcomm.core.messages import SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import get_module
from groupcomm.core.tracing import Tracer
from groupcomm.protocol.inprocess import InProcessMember, InProcessServer, seeded_codec
from groupcomm.protocol.registry import Notify
from groupcomm.sim.workload import PlannedSend, Workload


class SimulationError(RuntimeError):
    """The simulation cannot run as configured."""


class StackHost(Protocol):
    """What a stack may use of the simulation that drives it."""

    config: Any  # the run's SimConfig
    workload: Workload
    names: list[str]
    now: float
    tracer: Tracer

    def transmit(self, source: str, dest: str, item: Any, size: int, meta: int,
                 control: bool, eager: bool = False) -> None:
        """Queue a frame at ``source``'s NIC."""

    def delivered(self, name: str, payload: Any) -> None:
        """The application of ``name`` got a message."""


@dataclass(slots=True, eq=False)
class Frame:
    """A frame in a NIC queue or on a link; ``item`` is whatever the stack sent."""

    source: str
    dest: str
    item: Any
    size: int


class Stack(Protocol):
    """The protocol side of the processes (real nodes, or the matrix model)."""

    def app_send(self, planned: PlannedSend) -> None:
        """The application of ``planned.sender`` sends now."""

    def arrive(self, frame: Frame) -> None:
        """A frame reached its destination."""

    def held(self) -> int:
        """Messages the protocols still hold (buffered or unsent)."""


class RealStack:
    """Whole clients (:class:`~groupcomm.protocol.inprocess.InProcessMember`) that join
    through the registry (:class:`~groupcomm.protocol.inprocess.InProcessServer`) before
    time 0, then push their messages to each other unencoded (docs/sim_results.md, the
    model)."""

    def __init__(self, sim: StackHost) -> None:
        self.sim = sim
        config = sim.config
        self.module = get_module(config.protocol)
        self.header = config.header_bytes
        self.payload = config.payload_bytes
        self.server = InProcessServer(now=sim.now, codec=seeded_codec("server"))
        #: process name -> its member (one incarnation each: nobody leaves)
        self.members: dict[str, InProcessMember] = {}
        self._commands: list[tuple[str, bytes]] = []
        # the size and metadata of the message last transmitted (one per destination)
        self._last: tuple[SentMessage | None, int, int] = (None, 0, 0)
        for name in sim.names:
            try:
                member = InProcessMember(
                    name, self, now=sim.now, codec=seeded_codec(name), routing="unencoded",
                    filter_stacks=([self.module.send_creator()],
                                   [self.module.receive_creator()]),
                    tracer_for=lambda member: sim.tracer, clock=lambda: sim.now)
            except ValueError as error:
                raise SimulationError(f"process {name!r} cannot join: {error}") from None
            member.listeners.append(
                lambda message, name=name: sim.delivered(name, message.user_message))
            self.members[name] = member
        self._join_all(list(sim.names))
        #: process name -> its protocol node
        self.nodes: dict[str, ProtocolNode] = {n: m.node for n, m in self.members.items()}

    def _join_all(self, names: list[str]) -> None:
        """Every process joins the session, one by one, before time 0."""
        server, now = self.server, self.sim.now
        own: dict[str, dict[str, Any]] = {}
        last: dict[str, Any] = {}
        for name in names:
            member = self.members[name]
            member.start()
            (conn, frame), = self._commands
            self._commands.clear()
            notices = [a for a in server.actions(conn, frame, now) if isinstance(a, Notify)]
            if not notices or notices[0].op != "welcome":
                raise SimulationError(f"process {name!r} cannot join: "
                                      f"{notices[0].fields if notices else 'refused'}")
            if self.module.broadcast_only:
                # vector's late-joiner handshake needs every member to see every later
                # join (the members already there send the newcomer a ``base`` message):
                # each notice is processed as it comes, as from a session server
                for delivery_to, delivery in server.carry_out(notices):
                    self.members[delivery_to].take(delivery, now)
                continue
            member.take(server.notice("welcome", **notices[0].fields), now)
            own[name] = next(dict(n.fields) for n in notices
                             if n.op == "joined" and n.conn == name)
            last = own[name]
        # the whole session exists from the start: by time 0 every process has heard of
        # every join, and what it processes is folded into one notice, its own join with
        # the session's members at time 0 (processing every later join costs O(n^3)
        # manager work at 500 processes)
        for name, fields in own.items():
            fields.update(all_users=last["all_users"], addresses=last["addresses"])
            self.members[name].take(server.notice("joined", **fields), now)

    # -- the members' carrier ------------------------------------------------------------------
    def command(self, member: InProcessMember, frame: bytes) -> None:
        self._commands.append((member.name, frame))

    def relay(self, member: InProcessMember, frame: bytes, dests: tuple[str, ...],
              message: SentMessage | None) -> None:
        raise SimulationError(f"{member.name} relays through the server, which the "
                              "simulation does not model")

    def push(self, member: InProcessMember, dest: str, frame: bytes,
             message: SentMessage) -> None:
        last, size, meta = self._last
        if message is not last:
            meta = meta_bytes(message)
            size = self.header + meta + (0 if not message.is_user_message() else self.payload)
            self._last = (message, size, meta)
        self.sim.transmit(member.name, dest, message, size, meta,
                          not message.is_user_message(), message.kind == "eager")

    def app_send(self, planned: PlannedSend) -> None:
        self.members[planned.sender].send((planned.key, planned.job_ms), planned.dests)

    def arrive(self, frame: Frame) -> None:
        self.members[frame.dest].messages([frame.item.received_by(frame.dest)], self.sim.now)

    def held(self) -> int:
        return sum(len(member.node.held()) for member in self.members.values())
