"""Membership changes in the model: processes that join after the start and processes
that leave, interleaved with the traffic (``CheckConfig.late`` / ``.leaving``,
``groupcomm check --join P --leave Q``).

What is modelled is what the session server guarantees (docs/protocols.md, "Sessions
that change"):

* ``("join", p, members)``: ``p`` becomes a member. Its node processes its own join with
  the members of that moment; every one of them is sent a *join notice*, a network entry
  it processes as a transition of its own, whenever it arrives.
* ``("leave", p)``: ``p`` leaves cleanly. What it transmitted had reached the server and
  still arrives; frames to it are dropped (now and whenever a member that has not
  processed the departure yet sends to it); what its module had not transmitted yet (the
  output buffers of ``mfss`` and ``cykas``) is reported undeliverable, so those
  (message, destination) pairs are no longer owed. Every remaining member is sent a
  *departure notice*.
* The server relays everything to a member on one ordered channel, so at member ``d``:
  ``p``'s join notice comes before any frame from ``p``; ``p``'s departure notice after
  every frame ``p`` sent to ``d``; and every frame transmitted (by anyone) after ``p``
  left comes after those of ``p``'s frames to ``d`` still in flight (they had all
  reached the server, which relays in order). Such later frames are marked in the
  network (their source gets :data:`AFTER` appended) until the barrier is gone. Apart
  from that the network is unordered; churn is refused on a per-pair FIFO network.
  This is the default relayed routing; with direct routing a departure notice is no
  barrier for frames between other members.
* Sends go to the members the sender knows at that moment (each single other one, or
  all of them for broadcast-only modules).
* ``("send-racing", p, dests, notice)``: a send whose destination leaves while it waits
  to be processed. In a communicator the application's thread tags a send (the node
  checks the destinations against the members it knows then) and the I/O thread runs it
  through the send pipeline later, and may process a departure in between. When the
  departure notice of a member among ``dests`` could arrive at ``p`` and ``p`` has a
  send left, one transition runs the three in that order on ``p``'s real node: tag,
  process the notice, send pipeline. (A sender-side module that sent such a message
  anyway waited for ever for an acknowledgement from a departed member.)

The properties are those of :mod:`groupcomm.check.model`, over the messages addressed to
each process while it was a member; in a terminal state every message owed to a process
that is still a member must have been delivered there (a departed destination owes
nothing). Symmetry and partial-order reduction assume a fixed membership and are
refused with churn; hash compaction and compact frontiers work as usual.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupcomm.check.config import CheckConfig, ConfigError
from groupcomm.check.model import Model
from groupcomm.check.state import Violation, describe_action
from groupcomm.core.messages import ControlMessage
from groupcomm.wire.envelopes import decode_received

#: network entries that are the server's notices, not frames of the codec (which never
#: start with a zero byte): b"\0" + their number in the session's history + b"J" +
#: subject + b"|" + members, or + b"L" + subject. The server sends a member its notices
#: in that order.
JOIN = b"J"
LEFT = b"L"
#: the snapshot of a process that has left
GONE = ("gone",)
#: the transition of a send whose destination leaves while it is queued (module doc)
RACING = "send-racing"
#: appended to the source of a frame transmitted after a departure, while frames of the
#: departed process to the same destination are still in flight (they arrive first)
AFTER = "\x00"


def is_notice(frame: bytes) -> bool:
    return frame[:1] == b"\x00"


def notice(number: int, kind: bytes, body: str) -> bytes:
    return b"\x00" + bytes([number]) + kind + body.encode()


def notice_kind(frame: bytes) -> bytes:
    """:data:`JOIN` or :data:`LEFT` (``b""`` for a frame that is no notice)."""
    return frame[2:3] if frame[:1] == b"\x00" else b""


def notice_text(frame: bytes) -> str:
    """``joined p3`` / ``left p2`` for a notice entry."""
    subject = frame[3:].split(b"|")[0].decode()
    return f"{'joined' if notice_kind(frame) == JOIN else 'left'} {subject}"


def build_model(config: CheckConfig, *, trace: bool = False) -> Model:
    """The model for ``config``: with late joiners or leavers a :class:`ChurnModel`."""
    if config.late or config.leaving:
        return ChurnModel(config, trace=trace)
    return Model(config, trace=trace)


class ChurnModel(Model):
    """:class:`Model` with joins, departures and the server's notices (module doc)."""

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
        #: processes gone in the state being expanded (see add_frames)
        self._gone_now: set[str] = set()
        super().__init__(config, trace=trace)
        self.late = [self.index[name] for name in config.late]
        self.leaving = [self.index[name] for name in config.leaving]
        self.gone = [self.intern(i, GONE) for i in range(self.n)]
        self.tracing = trace

    # -- who is a member ------------------------------------------------------------------
    def present(self, snaps: tuple, i: int) -> bool:
        return snaps[i] != self.gone[i] and bool(self.snapshots[i][snaps[i]][2])

    def known_members(self, snaps: tuple, i: int) -> tuple[str, ...]:
        """The members process ``i`` knows (its node's view), itself included."""
        if snaps[i] == self.gone[i]:
            return ()
        return self.snapshots[i][snaps[i]][2]

    def _events(self, snaps: tuple) -> int:
        """How many joins and departures have happened (numbers the next notices)."""
        joined = sum(1 for i in self.late if snaps[i] == self.gone[i] or self.known_members(snaps, i))
        return joined + sum(1 for i in self.leaving if snaps[i] == self.gone[i])

    def _departed(self, snaps: tuple) -> set[str]:
        return {self.names[i] for i in self.leaving if snaps[i] == self.gone[i]}

    # -- transitions ----------------------------------------------------------------------
    def send_options(self, state: tuple, i: int, left: int) -> list[tuple[str, ...]]:
        snaps = state[0]
        if not self.present(snaps, i):
            return []
        me = self.names[i]
        others = tuple(m for m in self.known_members(snaps, i) if m != me)
        if not others:
            return []
        mode = self.config.destinations
        if mode == "auto":
            mode = "broadcast" if self.module.broadcast_only else "unicast"
        return [others] if mode == "broadcast" else [(o,) for o in others]

    @staticmethod
    def actor(action: tuple) -> tuple[str, Any]:
        if action[0] == "join":
            return action[1], action[2]
        if action[0] == RACING:
            return action[1], (action[2], action[3])
        return Model.actor(action)

    def racing_sends(self, state: tuple) -> list[tuple[tuple, tuple]]:
        """``(action, network without the notice)`` for each send that may race a
        departure (module doc): a departure notice that may arrive at a process with a
        send left, and each destination choice of that send that includes the leaver."""
        truth = state[2]
        found = []
        for s, d, f, rest in self.arrivals(state[1]):
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
        snaps = state[0]
        actions: list[tuple] = []
        for i in self.late:
            if snaps[i] != self.gone[i] and not self.known_members(snaps, i):
                members = tuple(n for k, n in enumerate(self.names)
                                if k != i and self.present(snaps, k))
                actions.append(("join", self.names[i], (*members, self.names[i])))
        for i in self.leaving:
            if self.present(snaps, i):
                actions.append(("leave", self.names[i]))
        return actions

    def enabled(self, state: tuple) -> list[tuple]:
        return (super().enabled(state) + self.membership_actions(state)
                + [action for action, _ in self.racing_sends(state)])

    def successors(self, state: tuple, actors: Any = None) -> Iterable[tuple[tuple, tuple, str]]:
        if actors is not None:
            raise ValueError("persistent sets are not available with joins and departures")
        yield from super().successors(state)
        moves = [(action, state[1]) for action in self.membership_actions(state)]
        for action, network in moves + self.racing_sends(state):
            try:
                nxt, text = self._run(state, action, network)
            except Violation as violation:
                violation.action = action
                raise
            yield action, nxt, text

    def apply(self, state: tuple, action: tuple) -> tuple[tuple, str]:
        if action[0] in ("join", "leave"):
            return self._run(state, action, state[1])
        if action[0] == RACING:
            for racing, network in self.racing_sends(state):
                if racing == action:
                    return self._run(state, action, network)
            raise ValueError(f"transition {describe_action(action)} is not enabled")
        return super().apply(state, action)

    def arrivals(self, network: tuple) -> list[tuple[str, str, bytes, tuple]]:
        joins = set()
        lefts = set()
        frames = set()
        first: dict[str, int] = {}  # destination -> number of its oldest notice in flight
        for d, s, f in network:
            kind = notice_kind(f)
            if kind:
                (joins if kind == JOIN else lefts).add((d, s))
                if f[1] < first.get(d, 256):
                    first[d] = f[1]
            else:
                frames.add((d, s))
        barred = {d for d, s in frames if (d, s) in lefts}
        enabled = []
        for s, d, f, rest in super().arrivals(network):
            kind = notice_kind(f)
            if kind == JOIN:
                if f[1] == first[d]:
                    enabled.append((s, d, f, rest))
            elif kind == LEFT:
                if f[1] == first[d] and (d, s) not in frames:
                    enabled.append((s, d, f, rest))
            elif s[-1] == AFTER:
                if d not in barred and (d, s[:-1]) not in joins:
                    enabled.append((s, d, f, rest))
            elif (d, s) not in joins:
                enabled.append((s, d, f, rest))
        return enabled

    def add_frames(self, network: tuple, frames: list[tuple[str, str, bytes]]) -> tuple:
        gone = self._gone_now
        if gone and frames:
            behind = {d for d, s, f in network if s in gone and not is_notice(f)}
            if behind:
                frames = [(s + AFTER if d in behind else s, d, f) for s, d, f in frames]
        return super().add_frames(network, frames)

    def _settle(self, state: tuple) -> tuple:
        """``state`` with the frames addressed to departed processes dropped, and the
        marks of frames whose barrier is gone removed (one state, not two)."""
        snaps, network, truth = state
        gone = self._departed(snaps)
        if not gone:
            return state
        kept = [e for e in network if e[0] not in gone]
        marked = [e for e in kept if e[1][-1] == AFTER]
        if marked:
            barred = {d for d, s, f in kept if s in gone and not is_notice(f)}
            if any(d not in barred for d, _, _ in marked):
                kept = sorted(self.shared((d, s[:-1], f)) if s[-1] == AFTER and d not in barred
                              else (d, s, f) for d, s, f in kept)
        if len(kept) == len(network) and not marked:
            return state
        return (snaps, tuple(kept), truth)

    def _run(self, state: tuple, action: tuple, network: tuple) -> tuple[tuple, str]:
        if action[0] == "leave":
            return self._leave(state, action[1], network)
        self._gone_now = self._departed(state[0])
        try:
            nxt, text = super()._run(state, action, network)
        finally:
            self._gone_now = set()
        if action[0] == "join":
            _, who, members = action
            told = notice(self._events(state[0]), JOIN, f"{who}|{','.join(members)}")
            nxt = (nxt[0], self.add_frames(nxt[1], [(who, m, told) for m in members
                                                    if m != who]), nxt[2])
        return self._settle(nxt), text

    def _leave(self, state: tuple, who: str, network: tuple) -> tuple[tuple, str]:
        snaps, _, truth = state
        i = self.index[who]
        reached = self._reached(state, i)
        left, vc, sent, delivered = truth[i]
        dropped = []
        new_sent = []
        for k, (dests, clock) in enumerate(sent):
            kept = tuple(d for d in dests if (k, d) in reached)
            dropped += [f"{who}#{k + 1}@{d}" for d in dests if (k, d) not in reached]
            new_sent.append((kept, clock))
        entry = self.shared_truth((0, vc, tuple(new_sent), delivered))
        new_truth = truth[:i] + (entry,) + truth[i + 1:]
        if self.tracing:
            self._record_own_leave(i, snaps)
        new_snaps = snaps[:i] + (self.gone[i],) + snaps[i + 1:]
        others = [m for k, m in enumerate(self.names) if k != i and self.present(snaps, k)]
        told = notice(self._events(snaps), LEFT, who)
        network = self.add_frames(network, [(who, m, told) for m in others])
        text = f"{who} leaves"
        if dropped:
            text += f" (never transmitted, reported undeliverable: {', '.join(dropped)})"
        return self._settle((new_snaps, network, new_truth)), text

    def _reached(self, state: tuple, i: int) -> set[tuple[int, str]]:
        """(send index, destination) of the messages of process ``i`` that left it: in
        flight, held at the destination or delivered there."""
        snaps, network, truth = state
        who = self.names[i]
        reached: set[tuple[int, str]] = set()
        for j, (_, _, _, delivered) in enumerate(truth):
            reached |= {(k, self.names[j]) for s, k in delivered if s == i}
        for d, s, f in network:
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

    def _record_own_leave(self, i: int, snaps: tuple) -> None:
        node = self.nodes[i]
        node.restore(self.snapshots[i][snaps[i]])
        self.step += 1
        node.trace("leave", client=node.name)

    def record_end(self, state: tuple) -> None:
        """Trace the end of a replayed run: every member still there leaves (the trace
        analysis then knows whose traces end early)."""
        self.step += 2
        for i in range(self.n):
            if self.present(state[0], i):
                node = self.nodes[i]
                node.restore(self.snapshots[i][state[0][i]])
                node.trace("leave", client=node.name)

    # -- what the node does on a membership input ----------------------------------------
    def _local_run(self, i: int, snap_id: int, kind: str, arg: Any) -> tuple:
        if kind == "send" or (kind == "arrive" and not is_notice(arg)):
            return super()._local_run(i, snap_id, kind, arg)
        who = self.names[i]
        node = self._start_step(i, snap_id)
        got: list[tuple[int, int, str]] = []
        sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]] = []
        try:
            if kind == "join":
                node.client_joined(who, all_users=arg)
                text = f"{who} joins (members {', '.join(arg)})"
            elif kind == RACING:  # tag, the departure notice, then the send pipeline
                dests, told = arg
                subject = told[3:].decode()
                result = self.send_step(node, who, dests, sent_msgs,
                                        between=lambda: node.client_left(subject))
                if type(result) is tuple:
                    return result
                text = f"{result}, then learns that {subject} left before the send reaches " \
                    "its module"
            elif notice_kind(arg) == JOIN:
                subject, _, members = arg[3:].decode().partition("|")
                node.client_joined(subject, all_users=tuple(members.split(",")))
                text = f"{who} learns that {subject} joined"
            else:
                subject = arg[3:].decode()
                node.client_left(subject)
                text = f"{who} learns that {subject} left"
            failed = self.unknown_delivered(node, who, got)
            if failed is not None:
                return failed
            if got:
                text += f" (delivers {', '.join(m for _, _, m in got)})"
            snap = node.snapshot()
        except Exception as error:  # noqa: BLE001 - any exception in a filter is a finding
            self._reset(node)
            return ("violation", "exception", f"{who}: {type(error).__name__}: {error}")
        return ("ok", self.intern(i, snap), tuple(self._outbox), tuple(sent_msgs), tuple(got),
                text)

    # -- properties -----------------------------------------------------------------------
    def undelivered(self, state: tuple) -> list[str]:
        gone = self._departed(state[0])
        return [entry for entry in super().undelivered(state)
                if entry.rpartition("@")[2] not in gone]

    def held_summary(self, state: tuple) -> str:
        parts = []
        for i, node in enumerate(self.nodes):
            if self.present(state[0], i):
                node.restore(self.snapshots[i][state[0][i]])
                held = node.held()
                if held:
                    parts.append(f"{self.names[i]} holds "
                                 f"{', '.join(m.message_id for m in held)}")
        return "; ".join(parts)
