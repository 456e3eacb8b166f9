"""Exhaustive checking of the session protocol with the code that runs: whole clients
(:class:`~groupcomm.protocol.inprocess.InProcessMember`, each a real ``ClientProtocol``)
and the real ``SessionRegistry`` behind the server's checks
(:class:`~groupcomm.protocol.inprocess.InProcessServer`), exchanging signed frames.
The world, its transitions and the properties are described in docs/check_results.md
(the session protocol); the properties are judged in :mod:`groupcomm.check.session_props`.

A step copies only what it changes (the clients it touches, the server if it takes an
input); each client start is one live member object, set back to the client's captured
state before each use (:mod:`groupcomm.check.client_state`).
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from groupcomm.check import client_state
from groupcomm.check.config import quiet_loggers
from groupcomm.check.plain_state import clone, freeze
from groupcomm.check.session_config import (
    REGISTRIES,
    TRANSFERS,
    SessionCheckConfig,
    SessionCheckResult,
)
from groupcomm.check.session_props import Found, SessionProperties, search
from groupcomm.check.session_world import App, Client, Learner, World
from groupcomm.core.member_ids import member_id
from groupcomm.core.messages import ControlMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import get_module
from groupcomm.core.session_messages import ClockAck, JoinMarker, StateReply, StateRequest
from groupcomm.protocol.inprocess import (
    InProcessMember,
    InProcessServer,
    seeded_codec,
)
from groupcomm.protocol.membership import SERVER_SILENCE_HEARTBEATS
from groupcomm.protocol.registry import Action, Notify, Tick
from groupcomm.wire.frames import SESSION, sealed_body
from groupcomm.wire.session import open_session

__all__ = ["REGISTRIES", "TRANSFERS", "SessionCheck", "SessionCheckConfig",
           "SessionCheckResult", "check_session"]

HEARTBEAT_TIMEOUT = 1.5
TAKEOVER_WAIT = 1.0
HEARTBEAT_INTERVAL = 1.0
#: early and departing frames, and (unless asked) a newcomer's wait for a snapshot,
#: last longer than any run of the model: their expiry is a timeout of the real
#: client, not a rule of the protocol
PATIENCE = 1e9


def _sorted(table: dict) -> tuple:
    return tuple(sorted(table.items()))


class SessionCheck(SessionProperties):
    """The transition function over :class:`World` (see the module docstring)."""

    def __init__(self, config: SessionCheckConfig) -> None:
        config.validate()
        self.config = config
        self.names = config.names()
        self.registry_class = REGISTRIES[config.registry]
        self.cuts_class, self.gate_class = TRANSFERS[config.transfer]
        self.module = get_module(config.protocol)
        # a client notices a silent server after SERVER_SILENCE_HEARTBEATS heartbeats;
        # within shorter bounds nothing can be silent that long, so the pongs and the
        # time of the last notice change nothing: pongs are not delivered, and that time
        # is left out of the state key
        self._silence = config.ticks >= SERVER_SILENCE_HEARTBEATS * HEARTBEAT_INTERVAL
        self._unkeyed = frozenset() if self._silence else frozenset({"server_seen"})
        self._owned: set[str] = set()
        #: per client start: its live member, application and node objects
        self._members: dict[str, tuple[InProcessMember, App, dict[str, ProtocolNode]]] = {}
        #: the live server of each server epoch
        self._servers: dict[int, InProcessServer] = {}
        #: the live server, once the step set it back (None: the step has not touched it)
        self._server: InProcessServer | None = None
        self._world: World | None = None
        #: membership changes learned in the step: (conn, change)
        self._changes: list[tuple[str, str]] = []
        #: id() of a live member -> its connection
        self._conns: dict[int, str] = {}
        #: the server epoch of the notice being taken
        self._epoch = 0
        #: session frame -> its op (see _op)
        self._ops: dict[bytes, str] = {}
        #: frame -> its body (see _body)
        self._bodies: dict[bytes, bytes] = {}
        #: frame -> what it carries, said for a counterexample
        self._texts: dict[bytes, str] = {}
        #: frame -> the application messages it carries ((message id, destinations))
        self._carried: dict[bytes, tuple[tuple[str, tuple[str, ...]], ...]] = {}

    # -- building blocks ---------------------------------------------------------------------
    def initial(self) -> World:
        return World(server=self._new_server(0, 0.0))

    def _new_server(self, epoch: int, now: float) -> tuple:
        """A new, empty server of ``epoch`` as a world holds it (:attr:`World.server`)."""
        registry = self.registry_class(server_id="s", now=now,
                                       heartbeat_timeout=HEARTBEAT_TIMEOUT,
                                       takeover_wait=TAKEOVER_WAIT)
        if epoch not in self._servers:  # its live server (the codec's nonce is the epoch's)
            self._servers[epoch] = InProcessServer(now=now, registry=registry,
                                                   codec=seeded_codec(f"server.{epoch}"))
        return (registry, 0, OrderedDict())  # nothing sealed yet, nothing seen

    def _body(self, frame: bytes) -> bytes:
        """A frame as the state key holds it: without its signature, nonce and counter.
        In the model no frame arrives twice, so the replay windows never refuse one and
        the counters change nothing: states that differ only in them are one."""
        found = self._bodies.get(frame)
        if found is None:
            found = self._bodies[frame] = sealed_body(frame)
        return found

    def key(self, world: World) -> Any:
        clients = tuple(world.clients[conn].key(self._unkeyed) for conn in sorted(world.clients))
        if world.server_key is None:
            registry = world.server[0]
            # (no command of the model travels in parts: ``parts`` stays empty)
            world.server_key = freeze({k: v for k, v in vars(registry).items()
                                       if k not in ("relayed", "_probes", "parts")})
        body = self._body
        up = tuple((conn, tuple([body(f) for f in frames]))
                   for conn, frames in sorted(world.up.items()))
        down = tuple((conn, tuple([(d[0], body(d[1]), d[2] if d[0] == "message" or d[2] is None
                                    else body(d[2]), e) for d, e in queue]))
                     for conn, queue in sorted(world.down.items()))
        direct = frozenset((conn, body(frame)) for conn, frame in world.direct)
        return (world.now, world.ticks, world.epoch, world.server_restarts,
                world.server_key, clients, _sorted(world.starts), world.left,
                world.crashed, world.gone, up, down, direct, _sorted(world.frames),
                world.delivered, world.excused)

    # -- enabled transitions -----------------------------------------------------------------
    def enabled(self, world: World) -> list[tuple]:
        config = self.config
        actions: list[tuple] = []
        started = set(world.starts)
        running = {c.name for c in world.clients.values() if c.alive}
        first = [n for n in self.names if n not in config.late]
        for name in self.names:
            if name in running:
                continue
            if name in started:  # crashed: started again once, under the same name
                if name in world.crashed and world.starts[name] == 1:
                    actions.append(("start", name))
                continue
            if name in config.late and not set(first) <= started:
                continue
            actions.append(("start", name))
        registry = world.server[0]
        more_time = world.ticks < config.ticks
        for client in world.clients.values():
            if not client.alive:
                continue
            phase, member, others, due, heartbeat_only = client.view
            if phase in ("joined", "rejoining") and client.sent < config.messages \
                    and (config.senders is None or client.name in config.senders) and others:
                actions.append(("send", client.conn))
            # a heartbeat matters from a member while time can still pass (it keeps the
            # member from timing out) or when the server does not know the client (the
            # answer makes it rejoin)
            if due <= world.now and (not heartbeat_only or (
                    phase in ("joined", "rejoining")
                    and (more_time or client.conn not in registry.by_conn)
                    and not self._beating(world, client.conn))):
                actions.append(("timer", client.conn))
            if phase == "joined" and client.name in config.leaving \
                    and client.name not in world.left:
                actions.append(("leave", client.conn))
            if client.name in config.restarting and client.name not in world.crashed \
                    and phase != "joining":
                actions.append(("crash", client.conn))
        if more_time:
            actions.append(("tick",))
        if config.server_restart and not world.server_restarts:
            actions.append(("server-restart",))
        for conn, queue in sorted(world.up.items()):
            if queue:
                actions.append(("to-server", conn))
        for conn, queue in sorted(world.down.items()):
            if queue:
                actions.append(("to-client", conn))
        for entry in sorted(world.direct):
            actions.append(("direct", entry))
        return actions

    def _beating(self, world: World, conn: str) -> bool:
        """Whether a heartbeat of ``conn`` or its answer is on its way (one exchange at a
        time: a heartbeat due meanwhile goes once the answer is in)."""
        return (any(self._op(frame) == "heartbeat" for frame in world.up.get(conn, ()))
                or any(d[0] == "session" and self._op(d[1]) in ("pong", "error")
                       for d, _ in world.down.get(conn, ())))

    def _op(self, frame: bytes) -> str:
        """The op of a session frame (``relay`` for a message frame)."""
        op = self._ops.get(frame)
        if op is None:
            body = self._body(frame)
            op = self._ops[frame] = open_session(body)["op"] if body[:1] == SESSION else "relay"
        return op

    # -- one transition ------------------------------------------------------------------------
    def step(self, world: World, action: tuple) -> tuple[World, str]:
        """The world after ``action`` and a line saying what happened; raises
        :class:`Found` when a property fails."""
        world = self._clone(world)
        self._world = world
        self._changes.clear()
        self._epoch = world.epoch
        try:
            text = getattr(self, "_" + action[0].replace("-", "_"))(world, *action[1:])
            self._after_step(world)
        except Found:
            raise
        except Exception as error:  # noqa: BLE001 - any exception in the protocol is a finding
            raise Found("exception", f"{type(error).__name__}: {error}") from error
        return world, text

    def _clone(self, world: World) -> World:
        self._owned = set()
        self._server = None
        new = copy.copy(world)
        for table in ("clients", "starts", "up", "down", "frames"):
            setattr(new, table, dict(getattr(world, table)))
        return new

    def _live(self, world: World, conn: str) -> InProcessMember:
        """``conn``'s member, set back to its state in ``world`` (once per step: the
        step then changes the live member, and _after_step captures it)."""
        member, app, nodes = self._members[conn]
        if conn not in self._owned:
            client = world.clients[conn]
            client_state.restore(member, client.state, nodes)
            app.restore(client.app)
            self._owned.add(conn)
        return member

    def _live_server(self, world: World) -> InProcessServer:
        if self._server is None:
            registry, counter, replay = world.server
            server = self._server = self._servers[world.epoch]
            server.registry = clone(registry)
            server.codec._counter = counter  # noqa: SLF001
            server.codec._replay._state = clone(replay)  # noqa: SLF001
            world.server_key = None
        return self._server

    def _after_step(self, world: World) -> None:
        """Capture what the step changed; judge the step's deliveries and learning."""
        for conn in self._owned:
            member, app, nodes = self._members[conn]
            node = member.protocol.node  # a new incarnation's node is kept too
            nodes.setdefault(node.name, node)
            client = copy.copy(world.clients[conn])
            client.state = client_state.capture(member)
            client.view = self._view(member)
            client.frozen = None
            self._judge_handed(world, client, app)
            client.app = app.state()
            world.clients[conn] = client
        for conn, change in self._changes:
            self._learn(world.clients[conn], change)
        if self._server is not None:
            codec = self._server.codec
            world.server = (self._server.registry, codec._counter,  # noqa: SLF001
                            codec._replay._state)  # noqa: SLF001
            world.server_key = None

    @staticmethod
    def _view(member: InProcessMember) -> tuple:
        """What :meth:`enabled` reads of a client without restoring it: its phase, its
        member id, whether it knows other members, when its timer is next due and
        whether only a heartbeat would be."""
        protocol = member.protocol
        membership = protocol.membership
        gate = protocol.transfer.gate  # when its timeout falls due
        due = protocol._next_heartbeat  # noqa: SLF001
        heartbeat_only = True
        other = []
        if gate is not None and gate.waiting and gate.asked is not None:
            other.append(gate._deadline)  # noqa: SLF001
        if protocol.node.tickers:
            other.append(protocol._next_tick)  # noqa: SLF001
        if other and min(other) <= due:
            due, heartbeat_only = min(other), False
        others = any(u != membership.member for u in membership.current.values())
        return (membership.phase, membership.member, others, due, heartbeat_only)

    # -- transitions --------------------------------------------------------------------------
    def _start(self, world: World, name: str) -> str:
        number = world.starts.get(name, 0) + 1
        world.starts[name] = number
        conn = f"{name}.{number}"
        member, app = self._make_member(world, name, conn)
        self._members[conn] = (member, app, {})
        self._conns[id(member)] = conn
        world.clients[conn] = Client(name, conn, client_state.capture(member),
                                     app.state(), self._view(member))
        self._owned.add(conn)
        member.start(conn if self.config.direct else "")
        return f"{conn} starts and asks to join as {name}"

    def _make_member(self, world: World, name: str, conn: str) -> tuple[InProcessMember, App]:
        app = App()
        state = self.config.state
        timeout = self.config.state_timeout
        member = InProcessMember(
            name, self, now=world.now, codec=seeded_codec(conn),
            routing="direct" if self.config.direct else "relayed",
            filter_stacks=([self.module.send_creator()], [self.module.receive_creator()]),
            heartbeat_interval=HEARTBEAT_INTERVAL,
            state_provider=app.provide if state else None,
            state_consumer=app.install if state and (
                self.config.asking is None or name in self.config.asking) else None,
            state_timeout=PATIENCE if timeout is None else timeout)
        app.member = member
        member.listeners.append(app.hand)
        protocol = member.protocol
        protocol.membership.early_wait = protocol.membership.depart_wait = PATIENCE
        transfer = protocol.transfer
        transfer._cuts = self.cuts_class()  # noqa: SLF001 - the variant under check
        if transfer.gate is not None:
            transfer.gate = self.gate_class(transfer.gate.timeout)
        protocol.add_session_listener(Learner(self._changes, conn))
        return member, app

    def _send(self, world: World, conn: str) -> str:
        client = world.clients[conn]
        member = self._live(world, conn)
        known = frozenset(c.partition(" ")[2] for _, c in client.learned
                          if c.startswith("joined "))
        membership = member.protocol.membership
        dests = sorted(u for u in membership.current.values() if u != member.member)
        messages = member.send(f"{conn}:{client.sent + 1}", dests)
        client = world.clients[conn] = copy.copy(client)
        client.sent += 1
        _, app, _ = self._members[conn]
        for message in messages:
            app.own = (*app.own, message.app_message_id)
            app.seen |= {message.app_message_id}
            for dest in message.destinations:
                world.frames[f"{message.message_id}@{dest}"] = (
                    message.sender, dest, message.app_message_id, known)
        ids = ", ".join(m.message_id for m in messages)
        how = "directly" if self.config.direct else "through the server"
        return f"{member.member} sends {ids} to {', '.join(dests)} {how}"

    def _timer(self, world: World, conn: str) -> str:
        member = self._live(world, conn)
        member.timer(world.now)
        return f"{member.member}'s timer runs (t={world.now:g})"

    def _leave(self, world: World, conn: str) -> str:
        member = self._live(world, conn)
        world.left |= {world.clients[conn].name}
        member.leave()
        return f"{member.member} leaves"

    def _crash(self, world: World, conn: str) -> str:
        client = world.clients[conn] = copy.copy(world.clients[conn])
        client.alive = False
        client.frozen = None
        world.crashed |= {client.name}
        world.down.pop(conn, None)
        world.direct = frozenset(e for e in world.direct if e[0] != conn)
        return f"{conn} ({client.member}) crashes"

    def _tick(self, world: World) -> str:
        world.ticks += 1
        world.now += 1.0
        server = self._live_server(world)
        self._server_out(world, server.registry.handle(Tick(world.now, world.now)), server)
        return f"a second passes (t={world.now:g})"

    def _server_restart(self, world: World) -> str:
        world.server_restarts += 1
        world.epoch += 1
        for conn, queue in world.down.items():
            client = world.clients[conn]
            for delivery, _ in queue:
                if delivery[0] == "message":
                    for mid, _ in self._carried.get(delivery[1], ()):
                        world.excused |= {(mid, client.member)}
        world.down = {}
        world.server = self._new_server(world.epoch, world.now)
        world.server_key = None
        return "the session server restarts (what it had taken and not yet sent is lost)"

    def _to_server(self, world: World, conn: str) -> str:
        frame, *rest = world.up[conn]
        world.up[conn] = tuple(rest)
        server = self._live_server(world)
        op = self._op(frame)
        self._server_out(world, server.actions(conn, frame, world.now), server)
        return f"the server takes {self._describe(frame) if op == 'relay' else op} from {conn}"

    def _to_client(self, world: World, conn: str) -> str:
        (delivery, epoch), *rest = world.down[conn]
        world.down[conn] = tuple(rest)
        member = self._live(world, conn)
        self._epoch = epoch
        if delivery[0] == "message":
            self.check_relay_order(member, delivery[2], delivery[1])
            member.take(delivery, world.now)
            return f"{member.member} receives {self._describe(delivery[1])} from the server"
        notice = open_session(sealed_body(delivery[1]))
        member.take(delivery, world.now)
        if delivery[2] is not None:
            return f"{conn} gets {self._describe(delivery[2])} back (the server did not know it)"
        return f"{conn} gets {notice['op']} {_about(notice)}"

    def _direct(self, world: World, entry: tuple[str, bytes]) -> str:
        world.direct -= {entry}
        conn, frame = entry
        member = self._live(world, conn)
        member.message_frame(frame, world.now, direct=True)
        return f"{member.member} receives {self._describe(frame)} directly"

    def _describe(self, frame: bytes) -> str:
        return self._texts.get(frame, "a frame")

    # -- the members' carrier --------------------------------------------------------------------
    def command(self, member: InProcessMember, frame: bytes) -> None:
        self._up(member, frame)

    def relay(self, member: InProcessMember, frame: bytes, dests: tuple[str, ...],
              message: SentMessage | None) -> None:
        if message is not None:
            self._remember(frame, message)
        self._up(member, frame)

    def push(self, member: InProcessMember, dest: str, frame: bytes,
             message: SentMessage) -> None:
        self._remember(frame, message)
        world = self._world
        assert world is not None
        address = member.protocol.membership.addresses.get(dest)
        if address is not None and address in world.clients and world.clients[address].alive:
            world.direct |= {(address, frame)}

    def _remember(self, frame: bytes, message: SentMessage) -> None:
        if frame in self._texts:
            return
        user = message.user_message
        mid = message.message_id
        if isinstance(user, JoinMarker):
            self._texts[frame] = f"{mid} (join marker for {user.newcomer})"
        elif isinstance(user, ClockAck):
            self._texts[frame] = f"{mid} (clock acknowledgement)"
        elif isinstance(user, StateRequest):
            self._texts[frame] = f"{mid} (state request)"
        elif isinstance(user, StateReply):
            self._texts[frame] = f"{mid} ({'snapshot' if user.available else 'no snapshot'})"
        elif isinstance(user, ControlMessage):
            self._texts[frame] = f"{mid} ({user.kind})"
        else:
            self._texts[frame] = mid
            self._carried[frame] = ((mid, message.destinations),)

    def _up(self, member: InProcessMember, frame: bytes) -> None:
        world = self._world
        assert world is not None
        conn = self._conns[id(member)]
        if world.clients[conn].alive:
            world.up[conn] = (*world.up.get(conn, ()), frame)

    def _server_out(self, world: World, actions: list[Action], server: InProcessServer) -> None:
        for action in actions:
            if isinstance(action, Notify) and action.op == "left":
                world.gone |= {str(action.fields["client"])}
            if isinstance(action, Notify) and action.op == "welcome":
                given = member_id(str(action.fields["client"]),
                                  int(action.fields["incarnation"]))
                if given in world.gone:
                    raise Found("unique-id", f"{given} was removed from the session, and "
                                f"{action.conn} is admitted under that id again")
        for conn, delivery in server.carry_out(actions):
            client = world.clients.get(conn)
            if client is None or not client.alive:
                continue  # a crashed client's connection: what the server sends is lost
            if not self._silence and self._op(delivery[1]) == "pong":
                continue
            world.down[conn] = (*world.down.get(conn, ()), (delivery, world.epoch))


def _about(notice: dict[str, Any]) -> str:
    if "client" in notice and notice.get("op") in ("joined", "left", "welcome"):
        return str(notice["client"])
    return str(notice.get("reason", "") or notice.get("probe", ""))


def check_session(config: SessionCheckConfig,
                  progress: Callable[[int, int], None] | None = None) -> SessionCheckResult:
    """Explore every interleaving within ``config``'s bounds, breadth first."""
    checker = SessionCheck(config)
    quiet = [logging.getLogger(n) for n in ("groupcomm.core", "groupcomm.protocol",
                                            "groupcomm.filters", "groupcomm.transport")]
    with quiet_loggers(quiet, logging.CRITICAL):
        return search(checker, config, progress)

