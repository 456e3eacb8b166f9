"""What the simulator's engine drives: the protocol side of the processes.

A :class:`Stack` is handed the application's sends and the frames that arrive, and calls
back into the simulation (its :class:`StackHost` side) to put frames on the NICs and to
hand deliveries to the applications. Two stacks exist: :class:`RealStack` runs the
product's nodes and causality modules; :class:`~groupcomm.sim.matrix_model.MatrixModelStack`
is a vectorised model of the matrix protocol for large runs. Both depend on this module
only, not on the engine, so the engine can import them.

:class:`RealStack`'s processes join through the session protocol's own objects
(:class:`~groupcomm.protocol.client_actions.InProcessSession`: a session registry, and a
:class:`~groupcomm.core.membership.Membership` per process), before time 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from groupcomm.core.headers import meta_bytes
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import get_module
from groupcomm.core.tracing import Tracer
from groupcomm.protocol.client_actions import (
    APPLICATION,
    SESSION,
    InProcessSession,
    carry_out,
)
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
    engine: str

    def transmit(self, source: str, dest: str, item: Any, size: int, meta: int,
                 control: bool, eager: bool = False) -> None:
        """Queue a frame at ``source``'s NIC."""

    def delivered(self, name: str, payload: Any) -> None:
        """The application of ``name`` got a message."""


class Frame:
    """A frame in a NIC queue or on a link; ``item`` is whatever the stack sent."""

    __slots__ = ("source", "dest", "item", "size", "control")

    def __init__(self, source: str, dest: str, item: Any, size: int, control: bool) -> None:
        self.source = source
        self.dest = dest
        self.item = item
        self.size = size
        self.control = control


class Stack(Protocol):
    """The protocol side of the processes (real nodes, or the matrix model)."""

    def app_send(self, planned: PlannedSend) -> None:
        """The application of ``planned.sender`` sends now."""

    def arrive(self, frame: Frame) -> None:
        """A frame reached its destination."""

    def held(self) -> int:
        """Messages the protocols still hold (buffered or unsent)."""



class RealStack:
    """The product's nodes and causality modules (see the module docstring)."""

    def __init__(self, sim: StackHost) -> None:
        self.sim = sim
        config = sim.config
        self.module = get_module(config.protocol)
        self.header = config.header_bytes
        self.payload = config.payload_bytes
        clock = self._clock
        self.nodes: dict[str, ProtocolNode] = {}
        for name in sim.names:
            node = ProtocolNode(
                name,
                application=APPLICATION,
                session=SESSION,
                transmit=self._make_transmit(name),
                clock=clock,
                send_creators=[self.module.send_creator()],
                receive_creators=[self.module.receive_creator()],
                tracer=sim.tracer,
            )
            node.message_listeners.append(self._make_listener(name))
            self.nodes[name] = node
        self.session = InProcessSession(now=sim.now)
        self._join_all(list(sim.names))

    def _join_all(self, names: list[str]) -> None:
        """Every process joins the session, one by one, before time 0."""
        session, now = self.session, self.sim.now
        joins = []
        for name in names:
            try:
                member, notices = session.join(name, now)
            except ValueError as error:
                raise SimulationError(f"process {name!r} cannot join: {error}") from None
            assert member == name  # a new registry: every first join is incarnation 1
            if self.module.broadcast_only:
                # vector's late-joiner handshake needs every member to see every later
                # join (the members already there send the newcomer a ``base`` message):
                # each notice is processed as it comes, as from a session server
                for process, notice in notices:
                    self._notify(process, notice)
            else:
                joins.append((name, notices))
        if joins:
            # the whole session exists from the start: by time 0 every process has heard
            # of every join, and what it processes is folded into one notice, its own
            # join with the session's members at time 0 (processing every later join
            # costs O(n^3) manager work at 500 processes)
            last = joins[-1][1][-1][1]  # the last joiner's own notice lists everyone
            for name, notices in joins:
                own = next(n for process, n in notices if process == name)
                self._notify(name, {**own, "all_users": last["all_users"],
                                    "addresses": last["addresses"]})

    def _notify(self, process: str, notice: dict[str, Any]) -> None:
        carry_out(self.nodes[process],
                  self.session.on_notice(process, notice, self.sim.now))

    def _clock(self) -> float:
        return self.sim.now

    def _make_transmit(self, source: str) -> Callable[[SentMessage, tuple[str, ...]], None]:
        sim = self.sim

        def transmit(message: SentMessage, dests: tuple[str, ...]) -> None:
            meta = meta_bytes(message)
            control = not message.is_user_message()
            size = self.header + meta + (0 if control else self.payload)
            eager = message.kind == "eager"
            for dest in dests:
                sim.transmit(source, dest, message, size, meta, control, eager)

        return transmit

    def _make_listener(self, name: str) -> Callable[[ReceivedMessage], None]:
        sim = self.sim

        def listener(message: ReceivedMessage) -> None:
            sim.delivered(name, message.user_message)

        return listener

    def app_send(self, planned: PlannedSend) -> None:
        node = self.nodes[planned.sender]
        node.submit_many(node.tag_sends((planned.key, planned.job_ms), planned.dests))

    def arrive(self, frame: Frame) -> None:
        self.nodes[frame.dest].receive(frame.item.received_by(frame.dest))

    def held(self) -> int:
        return sum(len(node.held()) for node in self.nodes.values())
