"""Exhaustive checking of the session protocol with the code that runs: the real
:class:`~groupcomm.protocol.registry.SessionRegistry` (the server's rules), a real
:class:`~groupcomm.core.membership.Membership` per client and a real
:class:`~groupcomm.core.node.ProtocolNode` per member, which decides, as the transport
does, whether a frame's sender is a member or goes to the session protocol
(:meth:`Membership.admit`).

**World.** Clients are started and restarted under their names, each start a new
connection; the server is one registry (a new, empty one after a server restart).
Channels: per connection a FIFO from the client to the server and one back (ZeroMQ
connections are FIFO), and an unordered set of direct frames (direct routing). Time is
a counter that a ``tick`` transition advances by one second (the registry's heartbeat
timeout is 1.5 s, its takeover wait 1 s, a client's heartbeat interval 0.5 s).

**Transitions** (every interleaving is explored, breadth first, so the first violation
has a shortest counterexample): ``start p`` (a client joins; ``--join`` names who may
start late, the others start first, in any order), ``send p`` (p's application sends
one frame to every member it knows, relayed or direct), ``heartbeat p`` (one in flight
at a time), ``leave p``, ``crash p`` and a restart under the same name (``restart``),
``tick`` (``ticks`` at most: silent members time out, takeovers fall due), ``server
restart`` (frames inside the server and on its connections are lost, as documented),
and the arrival of the head of any channel.

**Properties.**

* *order* - two clients never learn of two membership changes in different orders;
* *unique-id* - a member id is never given to two different starts of a client (a
  client that keeps its id across a server restart is the same start);
* *relay-order* - a relayed frame never reaches a client that does not know its
  sender as a member yet (the relay's promise: join notices before frames);
* *lost* - in a quiescent state (nothing can happen but heartbeats) in which every
  running client is settled (a member of the current server, or out for good), every
  frame sent to a member was delivered to it, unless its destination is out of the
  session, its sender was removed without leaving (timed out, crashed, replaced: what
  it sent and that never arrived is lost, as documented), or the frame was inside the
  server when it restarted; a member that left gracefully is owed nothing but its own
  frames all arrive;
* *views* - in such a final state, every settled member's view is the registry's
  member list;
* *exception* - the registry or a client raised.

Final states in which some running client is not settled yet (it ran out of time to
rejoin within ``ticks``) are counted as *unsettled*, not judged.

Known-bad registries are kept for the checker to catch:
``reuses-incarnation`` forgets the incarnation of a name that leaves (a name that
comes back is ``carol`` again) and ``relays-before-join`` hands a member the frames
kept for it before the notices that tell it who the members are.

A step copies only what it changes (the clients it touches, the registry if it takes an
input) with :func:`~groupcomm.check.plain_state.clone`, and a member's node is one
object per member id, set back to the member's snapshot before each use.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from groupcomm.check.plain_state import clone, freeze
from groupcomm.core.membership import (
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
    member_id,
)
from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import get_module
from groupcomm.protocol.client_actions import apply_to_node
from groupcomm.protocol.registry import (
    Action,
    Forward,
    Notify,
    Rejected,
    Return,
    SessionRegistry,
    Tick,
)
from groupcomm.protocol.registry_events import BadCommand, Input, command_input, routed_input

__all__ = ["REGISTRIES", "SessionCheck", "SessionCheckConfig", "SessionCheckResult",
           "check_session"]

APPLICATION, SESSION = "default", "s"
HEARTBEAT_TIMEOUT = 1.5
TAKEOVER_WAIT = 1.0
HEARTBEAT_INTERVAL = 0.5
#: early and departing frames wait longer than any run of the model lasts: their
#: expiry is a timeout of the real client, not a rule of the protocol
PATIENCE = 1e9


class _ReusesIncarnation(SessionRegistry):
    """Known-bad: forgets a name's incarnation when it leaves."""

    def _remove(self, session: Any, member: Any, why: str, direct: Any,
                out: list[Action]) -> None:
        self.incarnations.pop((session.application, session.name, member.name), None)
        super()._remove(session, member, why, direct, out)


class _RelaysBeforeJoin(SessionRegistry):
    """Known-bad: hands a member the frames kept for it before telling it (and the
    others) who the members are."""

    def _admit(self, join: Any, out: list[Action]) -> None:
        mine: list[Action] = []
        super()._admit(join, mine)
        forwards = [a for a in mine if isinstance(a, Forward)]
        rest = [a for a in mine if not isinstance(a, Forward)]
        out.extend(rest[:1] + forwards + rest[1:])  # welcome, frames, then the notices


#: registry variant name -> class (the first is the real one)
REGISTRIES: dict[str, type[SessionRegistry]] = {
    "correct": SessionRegistry,
    "reuses-incarnation": _ReusesIncarnation,
    "relays-before-join": _RelaysBeforeJoin,
}


@dataclass(frozen=True)
class SessionCheckConfig:
    """The bounds of one exhaustive run."""

    processes: int = 2
    #: names that start after the others (any time)
    late: tuple[str, ...] = ()
    #: names that may leave (once)
    leaving: tuple[str, ...] = ()
    #: names that may crash and be restarted under the same name (once)
    restarting: tuple[str, ...] = ()
    #: frames each start of a client may send (each to every member it knows)
    messages: int = 1
    #: the names that send (default: every one)
    senders: tuple[str, ...] | None = None
    #: how many seconds may pass (heartbeat timeouts and takeovers need 1 or 2)
    ticks: int = 0
    server_restart: bool = False
    direct: bool = False
    registry: str = "correct"
    max_states: int = 2_000_000

    def names(self) -> list[str]:
        return [f"p{i}" for i in range(1, self.processes + 1)]

    def validate(self) -> None:
        """Raise ValueError naming the bad bound."""
        if not 1 <= self.processes <= 4:
            raise ValueError(f"processes must be 1 to 4, not {self.processes}")
        names = self.names()
        for role, chosen in (("late", self.late), ("leaving", self.leaving),
                             ("restarting", self.restarting), ("senders", self.senders or ())):
            unknown = [n for n in chosen if n not in names]
            if unknown:
                raise ValueError(f"{role}: {', '.join(unknown)} is not one of "
                                 f"{', '.join(names)}")
        if set(self.late) >= set(names):
            raise ValueError("at least one process must start first")
        if self.messages < 0 or self.ticks < 0:
            raise ValueError("messages and ticks must be >= 0")
        if self.registry not in REGISTRIES:
            raise ValueError(f"registry {self.registry!r} is not one of "
                             f"{', '.join(REGISTRIES)}")


@dataclass
class _Client:
    """One start of a client process (a connection)."""

    name: str
    start: int
    conn: str
    membership: Membership
    node: tuple | None = None  # the node's snapshot once it is a member
    member: str = ""
    alive: bool = True
    sent: int = 0
    #: frames pushed directly to each member (a graceful leave says how many)
    direct_sent: dict[str, int] = field(default_factory=dict)
    #: (server epoch, membership change) in the order this client learned them
    learned: tuple[tuple[int, str], ...] = ()
    #: its part of the state key, kept until a step changes it
    frozen: Any = None

    def key(self) -> Any:
        if self.frozen is None:
            self.frozen = (self.conn, self.name, self.start, self.alive, self.sent,
                           _sorted(self.direct_sent), self.member, self.node, self.learned,
                           _state_of(self.membership))
        return self.frozen


@dataclass
class _World:
    now: float = 0.0
    ticks: int = 0
    epoch: int = 0
    server_restarts: int = 0
    registry: SessionRegistry | None = None
    #: the registry's part of the state key, kept until a step changes it
    registry_key: Any = None
    clients: dict[str, _Client] = field(default_factory=dict)  # conn -> client
    starts: dict[str, int] = field(default_factory=dict)        # name -> starts so far
    left: frozenset[str] = frozenset()                          # names that left
    crashed: frozenset[str] = frozenset()                       # names that crashed
    up: dict[str, tuple] = field(default_factory=dict)          # conn -> commands
    down: dict[str, tuple] = field(default_factory=dict)        # conn -> notices/frames
    direct: frozenset = frozenset()                             # (conn, message)
    #: frame id -> (sender member, destination member)
    frames: dict[str, tuple[str, str]] = field(default_factory=dict)
    delivered: frozenset[tuple[str, str]] = frozenset()         # (frame id, member)
    excused: frozenset[tuple[str, str]] = frozenset()           # lost in a restart
    gone: frozenset[str] = frozenset()          # member ids the server removed
    #: member id -> (name, start) of the client it was given to
    given: dict[str, tuple[str, int]] = field(default_factory=dict)


class _Found(Exception):
    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop
        self.detail = detail


#: attributes that count what happened, not what the protocol remembers
_COUNTERS = {"stats", "relayed", "_probes"}


def _sorted(table: dict) -> tuple:
    """A world-level table whose order means nothing (its values are hashable)."""
    return tuple(sorted(table.items()))


def _thaw(value: Any) -> Any:
    """Undo :func:`~groupcomm.check.plain_state.freeze` on a notice's fields (maps back to dicts)."""
    if isinstance(value, tuple):
        if len(value) == 2 and value[0] == "dict":
            return {k: _thaw(v) for k, v in value[1]}
        return tuple(_thaw(v) for v in value)
    return value


def _state_of(obj: Any) -> Any:
    return freeze({k: v for k, v in vars(obj).items() if k not in _COUNTERS})


@dataclass
class SessionCheckResult:
    """What one run found."""

    config: SessionCheckConfig
    result: str  # ok | violation | incomplete
    states: int
    transitions: int
    depth: int
    final_states: int
    unsettled: int
    violation: str | None = None
    counterexample: list[str] = field(default_factory=list)

    def summary(self) -> str:
        head = (f"{self.result}: {self.states:,} states, {self.transitions:,} transitions, "
                f"depth {self.depth}, {self.final_states:,} quiescent states judged, "
                f"{self.unsettled:,} left unsettled by the bounds")
        if self.violation is None:
            return head
        steps = "\n".join(f"  {i}. {step}" for i, step in enumerate(self.counterexample, 1))
        return f"{head}\n{self.violation}\ncounterexample ({len(self.counterexample)} " \
               f"steps):\n{steps}"


class SessionCheck:
    """The transition function over :class:`_World` (see the module docstring)."""

    def __init__(self, config: SessionCheckConfig) -> None:
        config.validate()
        self.config = config
        self.names = config.names()
        self.registry_class = REGISTRIES[config.registry]
        self._owned = set()
        self._registry_owned = False
        #: the server epoch of the notice being processed
        self._epoch = 0
        #: frames carry no causality headers here: the session rules are the subject
        self._module_name = "none"
        self._deliveries: list[ReceivedMessage] = []
        self._nodes: dict[str, ProtocolNode] = {}
        self._fresh: dict[str, tuple] = {}

    # -- building blocks ---------------------------------------------------------------------
    def initial(self) -> _World:
        world = _World()
        world.registry = self._new_registry(0.0)
        return world

    def _new_registry(self, now: float) -> SessionRegistry:
        return self.registry_class(server_id="s", now=now, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                                   takeover_wait=TAKEOVER_WAIT)

    def _node(self, member: str) -> ProtocolNode:
        """The node of ``member``, one per member id, set back to a snapshot before each
        use (building one per step cost a tenth of the search)."""
        node = self._nodes.get(member)
        if node is None:
            module = get_module(self._module_name)
            node = ProtocolNode(member, transmit=lambda m, d: None, clock=lambda: 0.0,
                                send_creators=[module.send_creator()],
                                receive_creators=[module.receive_creator()],
                                deliver=self._deliveries.append)
            self._fresh[member] = node.snapshot()
            self._nodes[member] = node
        return node

    def _fresh_node(self, member: str) -> tuple:
        """The snapshot of a new node of ``member`` (no members, nothing sent)."""
        self._node(member)
        return self._fresh[member]

    def key(self, world: _World) -> Any:
        clients = tuple(world.clients[conn].key() for conn in sorted(world.clients))
        if world.registry_key is None:
            world.registry_key = _state_of(world.registry)
        return (world.now, world.ticks, world.epoch, world.server_restarts,
                world.registry_key, clients, _sorted(world.starts), world.left,
                world.crashed, world.gone, _sorted(world.up), _sorted(world.down), world.direct,
                _sorted(world.frames), world.delivered, world.excused, _sorted(world.given))

    # -- enabled transitions -----------------------------------------------------------------
    def enabled(self, world: _World) -> list[tuple]:
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
        for client in world.clients.values():
            if not client.alive:
                continue
            m = client.membership
            if m.phase in ("joined", "rejoining") and client.sent < config.messages \
                    and (config.senders is None or client.name in config.senders) \
                    and (m.may_relay or config.direct):
                if any(u != m.member for u in m.current.values()):
                    actions.append(("send", client.conn))
            # a heartbeat matters only while time can still pass (it keeps the member
            # from timing out) or when the server does not know the client (the answer
            # makes it rejoin); one exchange in flight at a time (else pongs pile up)
            matters = world.ticks < config.ticks or client.conn not in world.registry.by_conn
            if matters and m.joined and not any(c[0] == "heartbeat" for c in world.up.get(client.conn, ())) \
                    and not any(e[0] == "notice" and e[1] in ("pong", "error")
                                for e in world.down.get(client.conn, ())):
                actions.append(("heartbeat", client.conn))
            if m.phase == "joined" and client.name in config.leaving \
                    and client.name not in world.left:
                actions.append(("leave", client.conn))
            if client.name in config.restarting and client.name not in world.crashed \
                    and m.phase != "joining":
                actions.append(("crash", client.conn))
        if world.ticks < config.ticks:
            actions.append(("tick",))
        if config.server_restart and not world.server_restarts:
            actions.append(("server-restart",))
        for conn, queue in sorted(world.up.items()):
            if queue:
                actions.append(("to-server", conn))
        for conn, queue in sorted(world.down.items()):
            if queue:
                actions.append(("to-client", conn))
        for entry in sorted(world.direct, key=repr):
            actions.append(("direct", entry))
        return actions

    # -- one transition ------------------------------------------------------------------------
    def step(self, world: _World, action: tuple) -> tuple[_World, str]:
        """The world after ``action`` and a line saying what happened; raises
        :class:`_Found` when a property fails."""
        world = self._clone(world)
        kind = action[0]
        try:
            text = getattr(self, "_" + kind.replace("-", "_"))(world, *action[1:])
        except _Found:
            raise
        except Exception as error:  # noqa: BLE001 - any exception in the protocol is a finding
            raise _Found("exception", f"{type(error).__name__}: {error}") from error
        return world, text

    # -- copy on write: a step copies only what it changes ----------------------------------
    def _clone(self, world: _World) -> _World:
        self._owned: set[str] = set()
        self._registry_owned = False
        new = copy.copy(world)
        for table in ("clients", "starts", "up", "down", "frames", "given"):
            setattr(new, table, dict(getattr(world, table)))
        return new

    def _mine(self, world: _World, conn: str) -> _Client:
        """``conn``'s client, copied for this step if it was not yet."""
        if conn not in self._owned:
            old = world.clients[conn]
            client = copy.copy(old)
            client.membership = clone(old.membership)
            client.direct_sent = dict(old.direct_sent)
            client.frozen = None
            world.clients[conn] = client
            self._owned.add(conn)
        return world.clients[conn]

    def _own_registry(self, world: _World) -> None:
        if not self._registry_owned:
            world.registry = clone(world.registry)
            world.registry_key = None
            self._registry_owned = True

    def _start(self, world: _World, name: str) -> str:
        number = world.starts.get(name, 0) + 1
        world.starts[name] = number
        conn = f"{name}.{number}"
        membership = Membership(name, heartbeat_interval=HEARTBEAT_INTERVAL, now=world.now,
                                early_wait=PATIENCE, depart_wait=PATIENCE)
        client = _Client(name, number, conn, membership)
        world.clients[conn] = client
        self._owned.add(conn)
        self._client_actions(world, client, membership.start(address=conn))
        return f"{conn} starts and asks to join as {name}"

    def _send(self, world: _World, conn: str) -> str:
        client = self._mine(world, conn)
        m = client.membership
        client.sent += 1
        frame = f"{m.member}#{client.sent}"
        dests = tuple(sorted(u for u in m.current.values() if u != m.member))
        for dest in dests:
            world.frames[f"{frame}@{dest}"] = (m.member, dest)
        if self.config.direct:
            for dest in dests:
                address = m.addresses.get(dest)
                if address is not None and address in world.clients:
                    world.direct |= {(address, frame)}
                    client.direct_sent[dest] = client.direct_sent.get(dest, 0) + 1
            return f"{m.member} sends {frame} directly to {', '.join(dests)}"
        self._up(world, conn, ("relay", dests, frame))
        return f"{m.member} relays {frame} to {', '.join(dests)}"

    def _heartbeat(self, world: _World, conn: str) -> str:
        client = self._mine(world, conn)
        self._client_actions(world, client, client.membership.heartbeat(world.now))
        return f"{client.membership.member} sends a heartbeat"

    def _leave(self, world: _World, conn: str) -> str:
        client = self._mine(world, conn)
        world.left |= {client.name}
        self._client_actions(world, client, client.membership.leave(client.direct_sent))
        return f"{client.membership.member} leaves"

    def _crash(self, world: _World, conn: str) -> str:
        client = self._mine(world, conn)
        client.alive = False
        world.crashed |= {client.name}
        world.down.pop(conn, None)
        world.direct = frozenset(e for e in world.direct if e[0] != conn)
        return f"{conn} ({client.membership.member}) crashes"

    def _tick(self, world: _World) -> str:
        world.ticks += 1
        world.now += 1.0
        self._own_registry(world)
        self._server_actions(world, world.registry.handle(Tick(world.now, world.now)))
        for conn in list(world.clients):
            if world.clients[conn].alive:
                client = self._mine(world, conn)
                self._client_actions(world, client, client.membership.tick(world.now))
        return f"a second passes (t={world.now:g})"

    def _server_restart(self, world: _World) -> str:
        world.server_restarts += 1
        world.epoch += 1
        lost = [c for q in world.up.values() for c in q if c[0] == "relay"]
        lost += [e for q in world.down.values() for e in q if e[0] == "frame"]
        for entry in lost:
            frame = entry[2]
            for fid, (_, dest) in world.frames.items():
                if fid.startswith(frame + "@"):
                    world.excused |= {(fid, dest)}
        world.up = {}
        world.down = {}
        world.registry = self._new_registry(world.now)
        world.registry_key = None
        return "the session server restarts (frames inside it are lost)"

    def _to_server(self, world: _World, conn: str) -> str:
        command, *rest = world.up[conn]
        world.up[conn] = tuple(rest)
        op = command[0]
        client = world.clients[conn]
        self._own_registry(world)
        fields: dict[str, Any] = {"op": op, "client": client.name, "application": APPLICATION,
                                  "session": SESSION}
        try:
            if op == "relay":  # a routed frame: its head names the destinations
                event: Input = routed_input(world.registry.by_conn, conn, world.now,
                                            tuple(command[1]), command[2].encode())
            else:
                event = command_input({**fields, **_thaw(command[1])}, conn, world.now)
        except BadCommand as error:
            raise _Found("exception", f"the client sent a bad command: {error}") from None
        self._server_actions(world, world.registry.handle(event))
        return f"the server takes {op} from {conn}"

    def _to_client(self, world: _World, conn: str) -> str:
        entry, *rest = world.down[conn]
        world.down[conn] = tuple(rest)
        client = self._mine(world, conn)
        m = client.membership
        if entry[0] == "notice":
            self._epoch = entry[3]
            notice = {"op": entry[1], **_thaw(entry[2])}
            actions = m.on_notice(notice, world.now)
            self._client_actions(world, client, actions)
            return f"{conn} gets {entry[1]} {self._about(notice)}"
        if entry[0] == "returned":
            actions = m.on_returned(entry[1], entry[2].encode(), world.now)
            self._client_actions(world, client, actions)
            return f"{conn} gets {entry[2]} back (the server did not know it)"
        frame = entry[2]
        sender = frame.rpartition("#")[0]
        self._arrive(world, client, sender, frame, relayed=True)
        return f"{m.member} receives {frame} from the server"

    def _direct(self, world: _World, entry: tuple[str, str]) -> str:
        world.direct -= {entry}
        conn, frame = entry
        client = self._mine(world, conn)
        sender = frame.rpartition("#")[0]
        self._client_actions(world, client, client.membership.on_direct_frame(sender))
        self._arrive(world, client, sender, frame, relayed=False)
        return f"{client.membership.member} receives {frame} directly"

    # -- what a client does with a frame ------------------------------------------------------
    def _arrive(self, world: _World, client: _Client, sender: str, frame: str,
                relayed: bool) -> None:
        m = client.membership
        message = ReceivedMessage(application_name=APPLICATION, session_name=SESSION,
                                  user_message=frame, message_id=frame, sender=sender,
                                  receiver=m.member)
        node = self._restore(client)
        if node is not None and sender in node.member_set:
            self._hand(world, client, node, [message])
            return
        if relayed and not m.is_stale(sender) and sender not in m.departing:
            raise _Found("relay-order", f"{frame}, relayed by the server, reached {m.member} "
                         f"before it knew {sender} as a member")
        self._client_actions(world, client, m.admit(message, world.now))

    def _restore(self, client: _Client) -> ProtocolNode | None:
        if client.node is None:
            return None
        node = self._node(client.member)
        node.restore(client.node)
        return node

    def _hand(self, world: _World, client: _Client, node: ProtocolNode,
              messages: list[ReceivedMessage]) -> None:
        self._deliveries.clear()
        apply_to_node(node, Arrive(tuple(messages)))  # as the transport does
        node.drain()
        for message in self._deliveries:
            world.delivered |= {(f"{message.message_id}@{client.member}", client.member)}
        self._deliveries.clear()
        client.node = node.snapshot()

    def _learn(self, client: _Client, change: str) -> None:
        """Note a membership change ``client`` learned from a notice of the current
        server (a restarted server orders its own notices, not the old one's)."""
        learned = (self._epoch, change)
        if learned in client.learned:
            return
        kind, _, member = change.partition(" ")
        if kind == "joined" and any(c == f"left {member}" for _, c in client.learned):
            raise _Found("unique-id", f"{client.conn} learned that {member} left, then that "
                         f"{member} joined: the id of a membership that ended is given again")
        client.learned = (*client.learned, learned)

    def _client_actions(self, world: _World, client: _Client, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, SendCommand):
                self._up(world, client.conn, (action.op, freeze(dict(action.fields))))
            elif isinstance(action, Incarnated):
                member = action.member
                owner = world.given.get(member)
                if owner is not None and owner != (client.name, client.start):
                    raise _Found("unique-id", f"{member} was given to start {client.start} "
                                 f"of {client.name}, but start {owner[1]} had it before")
                world.given[member] = (client.name, client.start)
                if client.node is None or client.member != member:
                    # first join, or back after being declared gone: a fresh node (what
                    # the old incarnation was owed was excused when it was removed)
                    client.node = self._fresh_node(member)
                client.member = member
                self._joined(world, client, action.joined)
            elif isinstance(action, MemberJoined):
                self._joined(world, client, action)
            elif isinstance(action, MemberLeft):
                self._learn(client, f"left {action.member}")
                node = self._restore(client)
                if node is not None:
                    apply_to_node(node, action)  # as the transport does
                    client.node = node.snapshot()
            elif isinstance(action, Arrive):
                node = self._restore(client)
                if node is None:
                    raise _Found("relay-order", f"{client.conn} was handed frames before it "
                                 "was a member")
                self._hand(world, client, node, list(action.messages))
            elif isinstance(action, ResendReturned):
                for dests, frame in action.frames:
                    self._up(world, client.conn, ("relay", tuple(dests), frame.decode()))
            elif isinstance(action, DropReturned):
                pass  # frames of a retired incarnation: excused when it was retired
            elif isinstance(action, Reject):
                pass  # stale frames (excused with their incarnation) and malformed input
            elif isinstance(action, JoinDone | LeftSession):
                pass

    def _joined(self, world: _World, client: _Client, joined: MemberJoined) -> None:
        # the member list is in join order: whoever precedes the subject joined before it
        for user in (*joined.all_users, joined.member):
            self._learn(client, f"joined {user}")
        node = self._restore(client)
        if node is None:
            return
        apply_to_node(node, joined)  # as the transport does
        client.node = node.snapshot()

    def _up(self, world: _World, conn: str, command: tuple) -> None:
        if world.clients[conn].alive:
            world.up[conn] = (*world.up.get(conn, ()), command)

    def _server_actions(self, world: _World, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Rejected):
                continue
            if isinstance(action, Notify) and action.op == "left":
                self._excuse_departed(world, str(action.fields["client"]))
            if isinstance(action, Notify) and action.op == "welcome":
                given = member_id(str(action.fields["client"]),
                                  int(action.fields["incarnation"]))
                if given in world.gone:
                    raise _Found("unique-id", f"{given} was removed from the session, and "
                                 f"{action.conn} is admitted under that id again")
            client = world.clients.get(action.conn)
            if client is None or not client.alive:
                continue  # a crashed client's connection: what the server sends is lost
            if isinstance(action, Notify):
                entry: tuple = ("notice", action.op, freeze(dict(action.fields)),
                                world.epoch)
            elif isinstance(action, Forward):
                entry = ("frame", action.sender, action.frame.decode())
            elif isinstance(action, Return):
                entry = ("returned", action.dests, action.frame.decode())
            else:
                continue
            world.down[action.conn] = (*world.down.get(action.conn, ()), entry)

    def _excuse_departed(self, world: _World, member: str) -> None:
        """The server removed ``member`` (it left, timed out or was replaced)."""
        world.gone |= {member}

    @staticmethod
    def _about(notice: dict[str, Any]) -> str:
        if "client" in notice and notice.get("op") in ("joined", "left", "welcome"):
            return str(notice["client"])
        return str(notice.get("reason", "") or notice.get("probe", ""))

    # -- properties ------------------------------------------------------------------------
    def check_order(self, world: _World) -> None:
        clients = list(world.clients.values())
        for i, a in enumerate(clients):
            for b in clients[i + 1:]:
                common = [c for c in a.learned if c in b.learned]
                other = [c for c in b.learned if c in a.learned]
                if common != other:
                    raise _Found("order", f"{a.conn} learned {_changes(common)}; {b.conn} "
                                 f"learned {_changes(other)}")

    def settled(self, world: _World) -> bool:
        members = set(world.registry.members_of(APPLICATION, SESSION))
        for client in world.clients.values():
            if not client.alive:
                continue
            m = client.membership
            if m.phase in ("left", "failed"):
                continue
            if m.phase != "joined" or m.member not in members:
                return False
        return True

    def check_final(self, world: _World) -> None:
        members = world.registry.members_of(APPLICATION, SESSION)
        for client in world.clients.values():
            m = client.membership
            if client.alive and m.phase == "joined":
                node = self._restore(client)
                view = sorted(node.member_set) if node is not None else []
                if view != sorted(members):
                    raise _Found("views", f"{m.member} sees {', '.join(view)}; the server "
                                 f"lists {', '.join(members)}")
        live = {c.member for c in world.clients.values()
                if c.alive and c.membership.phase == "joined"}
        graceful = {c.member for c in world.clients.values() if c.name in world.left}
        for fid, (sender, dest) in sorted(world.frames.items()):
            if (fid, dest) in world.excused or (fid, dest) in world.delivered:
                continue
            # not owed: to a member that is out; from one the server removed without
            # its leave (what it sent and that never arrived is lost, as documented)
            if dest not in live or dest in world.gone:
                continue
            if sender in world.gone and sender not in graceful:
                continue
            raise _Found("lost", f"{fid.partition('@')[0]} from {sender} never reached "
                         f"{dest}")


def _changes(learned: list[tuple[int, str]]) -> str:
    return ", ".join(f"{change} (server {epoch + 1})" for epoch, change in learned)


def check_session(config: SessionCheckConfig,
                  progress: Callable[[int, int], None] | None = None) -> SessionCheckResult:
    """Explore every interleaving within ``config``'s bounds, breadth first."""
    checker = SessionCheck(config)
    quiet = [logging.getLogger(n) for n in ("groupcomm.core", "groupcomm.protocol",
                                            "groupcomm.filters")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    try:
        return _search(checker, config, progress)
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)


def _search(checker: SessionCheck, config: SessionCheckConfig,
            progress: Callable[[int, int], None] | None) -> SessionCheckResult:
    start = checker.initial()
    seen: dict[Any, tuple[Any, str] | None] = {checker.key(start): None}
    frontier: deque[tuple[_World, Any, int]] = deque([(start, checker.key(start), 0)])
    transitions = finals = unsettled = depth = 0
    next_report = 10_000
    while frontier:
        world, key, level = frontier.popleft()
        depth = max(depth, level)
        actions = checker.enabled(world)
        # quiescent: nothing can happen but heartbeats, which only come back as pongs
        # (or, to a client the server does not know, lead to its rejoin)
        if all(a[0] == "heartbeat" for a in actions):
            if checker.settled(world):
                finals += 1
                try:
                    checker.check_final(world)
                except _Found as found:
                    return _violation(config, seen, key, None, found, len(seen),
                                      transitions, depth, finals, unsettled)
            elif not actions:
                unsettled += 1
        for action in actions:
            transitions += 1
            try:
                nxt, text = checker.step(world, action)
                checker.check_order(nxt)
            except _Found as found:
                return _violation(config, seen, key, action, found, len(seen), transitions,
                                  depth, finals, unsettled)
            nxt_key = checker.key(nxt)
            if nxt_key in seen:
                continue
            seen[nxt_key] = (key, text)
            if len(seen) > config.max_states:
                return SessionCheckResult(config, "incomplete", len(seen), transitions, depth,
                                          finals, unsettled,
                                          f"stopped at {config.max_states:,} states")
            frontier.append((nxt, nxt_key, level + 1))
        if progress is not None and len(seen) >= next_report:
            next_report += 10_000
            progress(len(seen), depth)
    return SessionCheckResult(config, "ok", len(seen), transitions, depth, finals, unsettled)


def _violation(config: SessionCheckConfig, seen: dict, key: Any, action: tuple | None,
               found: _Found, states: int, transitions: int, depth: int, finals: int,
               unsettled: int) -> SessionCheckResult:
    steps: list[str] = []
    while seen.get(key) is not None:
        key, text = seen[key]
        steps.append(text)
    steps.reverse()
    if action is not None:
        steps.append(" ".join(str(a) for a in action) + "  <- breaks it")
    else:
        steps.append("(nothing more happens but heartbeats)")
    return SessionCheckResult(config, "violation", states, transitions, depth, finals,
                              unsettled, f"{found.prop}: {found.detail}", steps)


def iter_registry_variants() -> Iterator[str]:
    """The known-bad registry variants (every entry of :data:`REGISTRIES` but the real
    one)."""
    yield from (name for name in REGISTRIES if name != "correct")
