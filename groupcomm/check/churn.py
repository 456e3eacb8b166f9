"""Membership changes in the model: processes that join after the start and processes
that leave, interleaved with the traffic (``CheckConfig.late`` / ``.leaving``,
``groupcomm check --join P --leave Q``).

Joins, departures and every relayed frame go through the real
:class:`~groupcomm.protocol.registry.SessionRegistry` (held in the state as the id of its
interned state, :mod:`groupcomm.check.server`); members take its notices as the
transport does (:mod:`groupcomm.check.notices`). What stays modelled here is the channel
from the server to each member: notices in the order sent, a frame from ``p`` after
``p``'s ``joined`` notice, ``p``'s ``left`` notice after ``p``'s frames, and a frame
relayed after that notice behind ``p``'s frames still in flight (its entry names those
departed senders, ``behind``). Network entries are ``(dest, source, frame, behind)``; a
notice is ``(dest, subject, notice, ())``. A ``("send-racing", p, dests, notice)``
transition is a send whose destination leaves while it waits to be processed: tag,
departure notice, send pipeline, on ``p``'s real node. The rules and what they find:
docs/check_results.md, "Joins and departures".
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable
from itertools import groupby
from typing import Any

from groupcomm.check.config import CheckConfig, ConfigError
from groupcomm.check.model import Model
from groupcomm.check.notices import (
    JOIN,
    LEFT,
    NOW,
    encode_notice,
    is_notice,
    notice_entry,
    notice_fields,
    notice_kind,
    notice_subject,
    take_notices,
)
from groupcomm.check.server import ServerTable
from groupcomm.check.state import Violation
from groupcomm.core.messages import ControlMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.client_actions import APPLICATION, SESSION
from groupcomm.protocol.registry import (
    Forward,
    Join,
    Leave,
    Notify,
    Relay,
    Return,
    SessionRegistry,
)
from groupcomm.wire.envelopes import decode_received

__all__ = ["GONE", "RACING", "ChurnModel", "build_model"]

#: the snapshot of a process that has left
GONE = ("gone",)
#: the transition of a send whose destination leaves while it is queued (module doc)
RACING = "send-racing"


def build_model(config: CheckConfig, *, trace: bool = False) -> Model:
    """The model for ``config``: with late joiners or leavers a :class:`ChurnModel`."""
    if config.late or config.leaving:
        return ChurnModel(config, trace=trace)
    return Model(config, trace=trace)


class ChurnModel(Model):
    """:class:`Model` with joins and departures through the real session registry
    (module doc). A state is ``(nodes, network, truth, server)``, ``server`` the id of
    the registry's state in :attr:`servers`."""

    #: a racing send is a send, then the deliveries its departure notice allowed
    send_kinds = ("send", RACING)

    def __init__(self, config: CheckConfig, *, trace: bool = False) -> None:
        names = config.names()
        for role, chosen in (("--join", config.late), ("--leave", config.leaving)):
            for name in chosen:
                if name not in names:
                    raise ConfigError(f"{role} {name}: not a process of this run "
                                      f"({', '.join(names)})")
            if len(set(chosen)) != len(chosen):
                raise ConfigError(f"{role}: a process is named twice")
        if len(set(names) - set(config.late)) < 1:
            raise ConfigError("at least one process must be a member at the start")
        if config.symmetry or config.por:
            raise ConfigError("--symmetry and --por assume a fixed membership; check joins "
                              "and departures without them (--reduce works)")
        if config.fifo_network:
            raise ConfigError("joins and departures are checked on the unordered network "
                              "(drop --fifo-network)")
        if config.workload is not None:
            raise ConfigError("a workload fixes destinations, but with joins and departures "
                              "the members a process can send to change: use --messages")
        #: the session server's states (the registry the ZeroMQ server drives)
        self.servers = ServerTable(SessionRegistry(server_id="check", now=NOW))
        #: the server's state in the step being run (frames are relayed through it)
        self._server_now = self.servers.initial
        #: processes gone in the state being expanded (see add_frames)
        self._gone_now: set[str] = set()
        self._changes: dict[tuple, tuple[int, tuple[bytes, ...], tuple]] = {}
        super().__init__(config, trace=trace)  # the first members join (start_session)
        self.initial_state = (*self.initial_state, self._server_now)
        self.late = [self.index[name] for name in config.late]
        self.leaving = [self.index[name] for name in config.leaving]
        self.gone = [self.intern(i, GONE) for i in range(self.n)]
        self.tracing = trace

    def start_session(self, first: list[str]) -> None:
        """The first members join the registry one by one; every notice is processed
        at once (the join sequence of LocalNetwork)."""
        for name in first:
            self._server_now, actions = self.servers.handle(
                self._server_now, Join(name, name, APPLICATION, SESSION, NOW))
            told: dict[str, list[dict[str, Any]]] = {}
            for action in actions:
                if isinstance(action, Notify):
                    told.setdefault(str(action.conn), []).append(json.loads(encode_notice(action)))
            for conn, notices in told.items():
                take_notices(self.nodes[self.index[conn]], notices)

    def present(self, snaps: tuple, i: int) -> bool:
        return bool(self.known_members(snaps, i))

    def known_members(self, snaps: tuple, i: int) -> tuple[str, ...]:
        """The members process ``i`` knows (its node's view), itself included."""
        return () if snaps[i] == self.gone[i] else self.snapshots[i][snaps[i]][2]

    def server_members(self, state: tuple) -> list[str]:
        """The members the registry lists in ``state``, in join order."""
        return self.servers.members(state[3], APPLICATION, SESSION)

    def _events(self, snaps: tuple) -> int:
        """How many joins and departures have happened (numbers the next notices)."""
        joined = sum(1 for i in self.late if snaps[i] == self.gone[i] or self.known_members(snaps, i))
        return joined + sum(1 for i in self.leaving if snaps[i] == self.gone[i])

    def _departed(self, snaps: tuple) -> set[str]:
        return {self.names[i] for i in self.leaving if snaps[i] == self.gone[i]}

    def send_options(self, state: tuple, i: int, left: int) -> list[tuple[str, ...]]:
        me = self.names[i]
        others = tuple(m for m in self.known_members(state[0], i) if m != me)
        if not others:
            return []
        return [others] if self.mode == "broadcast" else [(o,) for o in others]

    @staticmethod
    def actor(action: tuple) -> tuple[str, Any]:
        if action[0] == "join":
            return action[1], action[2]  # (the joiner's own notices, see _run)
        if action[0] == RACING:
            return action[1], (action[2], action[3])
        return Model.actor(action)

    def racing_sends(self, state: tuple) -> list[tuple[tuple, tuple]]:
        """``(action, network without the notice)`` for each send that may race a
        departure (module doc): a departure notice that may arrive at a process with a
        send left, and each destination choice of that send that includes the leaver."""
        truth = state[2]
        found = []
        for (_, s, d, f), rest in self.arrivals(state[1]):
            if notice_kind(f) != LEFT:
                continue
            i = self.index[d]
            left = truth[i][0]
            if left:
                for dests in self.send_options(state, i, left):
                    if s in dests:
                        found.append(((RACING, d, dests, f), rest))
        return found

    def membership_actions(self, state: tuple) -> list[tuple]:
        """Joins of late processes not in the session yet, departures of leavers in it
        (whom the registry lists)."""
        snaps = state[0]
        members = set(self.server_members(state))
        joins = [("join", self.names[i]) for i in self.late
                 if snaps[i] != self.gone[i] and self.names[i] not in members]
        return joins + [("leave", self.names[i]) for i in self.leaving if self.names[i] in members]

    def moves(self, state: tuple, actors: Any = None) -> list[tuple[tuple, tuple]]:
        if actors is not None:
            raise ValueError("persistent sets are not available with joins and departures")
        network = state[1]
        return (super().moves(state) + [(action, network) for action in self.membership_actions(state)]
                + self.racing_sends(state))

    def arrivals(self, network: tuple) -> list[tuple[tuple, tuple]]:
        """``(("arrive", source, dest, frame), network without it)`` for every entry that
        may arrive next (the channel's orders, module doc)."""
        joins = set()
        frames = set()
        first: dict[str, int] = {}  # destination -> number of its oldest notice in flight
        for d, s, f, _ in network:
            kind = notice_kind(f)
            if kind:
                if kind == JOIN:
                    joins.add((d, s))
                if f[1] < first.get(d, 256):
                    first[d] = f[1]
            else:
                frames.add((d, s))
        enabled = []
        for k, (d, s, f, behind) in enumerate(network):
            kind = notice_kind(f)
            if kind:
                ready = f[1] == first[d] and (kind == JOIN or (d, s) not in frames)
            else:
                ready = not behind and (d, s) not in joins
            if ready:
                enabled.append((("arrive", s, d, f), network[:k] + network[k + 1:]))
        return enabled

    def add_frames(self, network: tuple, frames: list[tuple[str, str, bytes]]) -> tuple:
        """Relay ``frames`` (source, dest, frame, in the order transmitted) through the
        registry in its state of this step; its forwards join the network."""
        if not frames:
            return network
        forwards: list[tuple[str, str, bytes]] = []
        # one relay per message (its frame to each destination)
        for (source, frame), copies in groupby(frames, key=lambda f: (f[0], f[2])):
            dests = tuple(d for _, d, _ in copies)
            self._server_now, actions = self.servers.handle(
                self._server_now, Relay(source, source, APPLICATION, SESSION, NOW, dests, frame))
            for action in actions:
                if isinstance(action, Forward):
                    forwards.append((str(action.conn), action.sender, action.frame))
                elif isinstance(action, Return):
                    raise Violation("exception", f"the server returned a frame of {source}, "
                                    "which it does not count as a member")
        return self._enter(network, forwards, self._gone_now)

    def _enter(self, network: tuple, entries: Iterable[tuple[str, str, bytes]],
               gone: set[str]) -> tuple:
        """``network`` with ``entries`` (dest, source, frame) sent after everything in it:
        a frame is behind the frames of the departed processes ``gone`` to its
        destination."""
        behind_of: dict[str, tuple[str, ...]] = {}
        if gone:
            for d, s, f, _ in network:
                if s in gone and not is_notice(f):
                    behind_of[d] = tuple(sorted({*behind_of.get(d, ()), s}))
        new = tuple(self.shared((d, s, f, () if is_notice(f) else behind_of.get(d, ())))
                    for d, s, f in entries)
        return tuple(sorted(network + new))

    def _settle(self, network: tuple) -> tuple:
        """``network`` with each frame's ``behind`` cut to the departed senders that
        still have a frame in flight to its destination."""
        if not any(entry[3] for entry in network):
            return network
        pending = {(d, s) for d, s, f, _ in network if not is_notice(f)}
        out = []
        for entry in network:
            d, s, f, behind = entry
            if behind:
                kept = tuple(x for x in behind if (d, x) in pending)
                if kept != behind:
                    entry = self.shared((d, s, f, kept))
            out.append(entry)
        return tuple(out)  # (sorted still: entries differ before their last field)

    def _run(self, state: tuple, action: tuple, network: tuple) -> tuple[tuple, str]:
        if action[0] == "leave":
            return self._leave(state, action[1], network)
        snaps, _, truth, server = state
        gone = self._departed(snaps)
        if action[0] == "join":  # the registry admits it, then its node takes its notices
            who = action[1]
            server, own, entries = self._server_change(server, "join", who, self._events(snaps))
            if not own or json.loads(own[0])["op"] != "welcome":
                raise Violation("exception", f"the server did not admit {who}: it answered "
                                f"{[json.loads(notice) for notice in own]}")
            network = self._enter(network, entries, gone)
            action = ("join", who, own)
        self._server_now = server
        self._gone_now = gone
        try:
            (snaps, network, truth), text = super()._run((snaps, network, truth), action, network)
        finally:
            self._gone_now = set()
        # (only a departed sender leaves frames behind it)
        return (snaps, self._settle(network) if gone else network, truth, self._server_now), text

    def _server_change(self, server: int, kind: str, who: str,
                       number: int) -> tuple[int, tuple[bytes, ...], tuple]:
        """The registry takes ``who``'s join or leave in state ``server``: its next state,
        the notices to ``who`` (as the client reads them) and the network entries for
        the others (``number`` numbers the notices), memoized."""
        key = (server, kind, who, number)
        hit = self._changes.get(key)
        if hit is None:
            event = (Join if kind == "join" else Leave)(who, who, APPLICATION, SESSION, NOW)
            new, actions = self.servers.handle(server, event)
            op = "joined" if kind == "join" else "left"
            own = tuple(encode_notice(a) for a in actions if isinstance(a, Notify) and a.conn == who)
            entries = tuple((str(a.conn), who, notice_entry(number, a)) for a in actions
                            if isinstance(a, Notify) and a.conn != who and a.op == op)
            entries += tuple((str(a.conn), a.sender, a.frame) for a in actions
                             if isinstance(a, Forward))
            hit = self._changes[key] = (new, own, entries)
        return hit

    def _leave(self, state: tuple, who: str, network: tuple) -> tuple[tuple, str]:
        snaps, _, truth, server = state
        i = self.index[who]
        reached = self._reached(state, i)
        left, vc, sent, delivered = truth[i]
        dropped = []
        new_sent = []
        for k, (dests, clock) in enumerate(sent):
            kept = tuple(d for d in dests if (k, d) in reached)
            dropped += [f"{who}#{k + 1}@{d}" for d in dests if (k, d) not in reached]
            new_sent.append((kept, clock))
        entry = self.shared((0, vc, tuple(new_sent), delivered))
        new_truth = truth[:i] + (entry,) + truth[i + 1:]
        if self.is_one_truth(truth):  # (so the steps after it are memoized as well)
            new_truth = self.one_truth(new_truth)
        if self.tracing:
            self.step += 1
            self._trace_leave(i, snaps[i])
        new_snaps = snaps[:i] + (self.gone[i],) + snaps[i + 1:]
        server, _, entries = self._server_change(server, "leave", who, self._events(snaps))
        # its connection closes: what was on its way to it is not delivered
        network = tuple(e for e in network if e[0] != who)
        network = self._enter(network, entries, self._departed(snaps))
        text = f"{who} leaves"
        if dropped:
            text += f" (never transmitted, reported undeliverable: {', '.join(dropped)})"
        return (new_snaps, self._settle(network), new_truth, server), text

    def _reached(self, state: tuple, i: int) -> set[tuple[int, str]]:
        """(send index, destination) of the messages of process ``i`` that left it: in
        flight, held at the destination or delivered there."""
        snaps, network, truth = state[:3]
        who = self.names[i]
        reached: set[tuple[int, str]] = set()
        for j, (_, _, _, delivered) in enumerate(truth):
            reached |= {(k, self.names[j]) for s, k in delivered if s == i}
        for d, s, f, _ in network:
            if s == who and not is_notice(f):
                message = decode_received(f, d)
                if not isinstance(message.user_message, ControlMessage):
                    reached.add((int(message.message_id.rpartition("#")[2]) - 1, d))
        for j, name in enumerate(self.names):
            if j != i and self.present(snaps, j):
                node = self.nodes[j]
                node.restore(self.snapshots[j][snaps[j]])
                for message in node.held():
                    if message.sender == who:
                        reached.add((int(message.message_id.rpartition("#")[2]) - 1, name))
        return reached

    def _trace_leave(self, i: int, snap_id: int) -> None:
        node = self.nodes[i]
        node.restore(self.snapshots[i][snap_id])
        node.trace("leave", client=node.name)

    def record_end(self, state: tuple) -> None:
        """Trace the end of a replayed run: every member still there leaves (the trace
        analysis then knows whose traces end early)."""
        self.step += 2
        for i in range(self.n):
            if self.present(state[0], i):
                self._trace_leave(i, state[0][i])

    def take_input(self, node: ProtocolNode, kind: str, arg: Any,
                   sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]],
                   got: list[tuple[int, int, str]]) -> str | tuple:
        if kind == "send" or (kind == "arrive" and not is_notice(arg)):
            return super().take_input(node, kind, arg, sent_msgs, got)
        who = node.name
        if kind == "join":  # its welcome and its own joined notice
            notices = [json.loads(notice) for notice in arg]
            take_notices(node, notices)
            text = f"{who} joins (members {', '.join(notices[-1]['all_users'])})"
        elif kind == RACING:  # tag, the departure notice, then the send pipeline
            dests, told = arg
            result = self.send_step(
                node, dests, sent_msgs,
                between=lambda: take_notices(node, [notice_fields(told)]))
            if type(result) is tuple:
                return result
            text = f"{result}, then learns that {notice_subject(told)} left before the send " \
                "reaches its module"
        else:
            take_notices(node, [notice_fields(arg)])
            what = "joined" if notice_kind(arg) == JOIN else "left"
            text = f"{who} learns that {notice_subject(arg)} {what}"
        failed = self.collect_deliveries(node, got)
        if failed is not None:
            return failed
        if got:
            text += f" (delivers {', '.join(m for _, _, m in got)})"
        return text

    def pack(self, state: tuple) -> bytes:
        return super().pack(state[:3]) + array("I", [state[3]]).tobytes()

    def unpack(self, packed: bytes) -> tuple:
        size = array("I").itemsize
        return (*super().unpack(packed[:-size]), array("I", packed[-size:])[0])

    def tables(self) -> dict[str, Any]:
        return {**super().tables(), "servers": self.servers.registries}

    def restore_tables(self, tables: dict[str, Any]) -> None:
        super().restore_tables(tables)
        self.servers.restore_tables(tables["servers"])

    def undelivered(self, state: tuple) -> list[str]:
        gone = self._departed(state[0])
        return [entry for entry in super().undelivered(state)
                if entry.rpartition("@")[2] not in gone]
