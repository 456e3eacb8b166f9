"""The model: N real :class:`~groupcomm.core.node.ProtocolNode` s, a network of frames, and
the checker's own ground truth (docs/check_results.md: what is explored, the properties).

A state is ``(nodes, network, truth)``: one interned :meth:`ProtocolNode.snapshot` id per
process; the frames in flight, exact codec bytes (an unordered network is the sorted tuple
of ``(dest, source, frame)``, a per-pair FIFO network the sorted tuple of ``((source,
dest), frames)`` of its non-empty channels); and per process the sends still to make, its
ground-truth vector clock, the messages it sent (destinations and clock of each) and the
set of messages it delivered. Transitions are ``("send", p, dests)`` and ``("arrive",
source, dest, frame)``; one restores only the node it touches, runs it through its real
pipelines and snapshots it again. How the parts of states are kept once:
:mod:`groupcomm.check.interned`.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable
from itertools import combinations
from typing import Any

from groupcomm.check.config import DESTINATION_MODES, CheckConfig, ConfigError
from groupcomm.check.interned import InternedStates
from groupcomm.check.state import Violation, describe_action
from groupcomm.core.causality import CausalityError
from groupcomm.core.messages import ControlMessage, ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.registry import UnknownModuleError, get_module
from groupcomm.core.tracing import MemoryTracer, NullTracer
from groupcomm.wire.envelopes import decode_received, encode_message


class Model(InternedStates):
    """The processes, their real nodes, and the transition function; ``trace=True``
    records what the nodes do (a counterexample replayed into trace files)."""

    #: transitions that are an application send (the truth counts them as one)
    send_kinds: tuple[str, ...] = ("send",)

    def __init__(self, config: CheckConfig, *, trace: bool = False) -> None:
        self.config = config
        try:
            self.module = get_module(config.protocol)
        except UnknownModuleError as error:
            raise ConfigError(str(error)) from None
        self.names = config.names()
        if config.workload is None:
            if config.processes < 2:
                raise ConfigError(f"--processes must be at least 2, got {config.processes}")
            if config.processes > 9:
                raise ConfigError(f"--processes must be at most 9, got {config.processes}")
            if config.messages < 0:
                raise ConfigError(f"--messages must be >= 0, got {config.messages}")
        if config.destinations not in DESTINATION_MODES:
            raise ConfigError(f"destinations must be one of {', '.join(DESTINATION_MODES)}, "
                              f"got {config.destinations!r}")
        if config.destinations == "subsets" and self.module.broadcast_only:
            raise ConfigError(f"{config.protocol} sends to everyone only: destinations "
                              "subsets needs a module that takes unicasts and multicasts")
        self.index = {name: i for i, name in enumerate(self.names)}
        #: how destinations are chosen (``auto`` resolved)
        self.mode = config.destinations
        if self.mode == "auto":
            self.mode = "broadcast" if self.module.broadcast_only else "unicast"
        self.step = 0
        self.tracer = MemoryTracer() if trace else NullTracer()
        self._outbox: list[tuple[str, str, bytes]] = []
        self._delivered_now: list[ReceivedMessage] = []
        self.nodes = [self._make_node(name) for name in self.names]
        super().__init__(len(self.names))
        #: memo of local steps (off while tracing: a replay must run every step)
        self._memo = not trace
        #: when True causal and FIFO violations are not raised (to extend a
        #: counterexample until the overtaken message is delivered too)
        self.lenient = False
        self.step_cache: dict[tuple, tuple] = {}
        #: the network entries of a step's frames, built once
        self._entries: dict[tuple, tuple] = {}
        #: the memo of :meth:`_next_truth`, per effect of a step on the truth
        self._effects: dict[tuple, dict[int, tuple]] = {}
        # (late joiners, see groupcomm.check.churn, start as fresh nodes outside the session)
        self.start_session([name for name in self.names if name not in config.late])
        initial_frames, self._outbox = self._outbox, []
        if self._delivered_now:
            raise ConfigError("a module delivered an application message at join")
        self.choices = self._destination_choices()
        zero = (0,) * self.n
        truth = self.one_truth(tuple(
            (len(choices) if config.workload is not None else config.messages, zero, (),
             frozenset()) for choices in self.choices))
        snaps = tuple(self.intern(i, node.snapshot()) for i, node in enumerate(self.nodes))
        self.initial_state = (snaps, self.add_frames((), initial_frames), truth)

    def start_session(self, first: list[str]) -> None:
        """The members at the start join, one by one, everyone told at once (the join
        sequence of LocalNetwork); frames their nodes transmit are left in the outbox."""
        for count, name in enumerate(first, start=1):
            for member in first[:count]:
                self.nodes[self.index[member]].client_joined(
                    name, is_new_session=count == 1, all_users=tuple(first[:count]))

    def _make_node(self, name: str) -> ProtocolNode:
        def transmit(message: SentMessage, dests: tuple[str, ...]) -> None:
            frame = encode_message(message)
            for dest in dests:
                self._outbox.append((name, dest, frame))

        def deliver(message: ReceivedMessage) -> None:
            node.application_delivered(message)
            self._delivered_now.append(message)

        node = ProtocolNode(name, transmit=transmit, clock=lambda: float(self.step),
                            send_creators=[self.module.send_creator()],
                            receive_creators=[self.module.receive_creator()],
                            tracer=self.tracer, deliver=deliver)
        return node

    def _destination_choices(self) -> list[list[tuple[str, ...]]]:
        """Per process: the destination sets of its sends. Nondeterministic mode: the
        options of every send; workload mode: the fixed list, one entry per send."""
        if self.config.workload is not None:
            return [list(self.config.workload[name]) for name in self.names]
        out = []
        for name in self.names:
            others = tuple(n for n in self.names if n != name)
            if self.mode == "broadcast":
                out.append([others])
            elif self.mode == "subsets":  # every non-empty set of others: unicasts, multicasts
                out.append([tuple(c) for k in range(1, len(others) + 1)
                            for c in combinations(others, k)])
            else:
                out.append([(o,) for o in others])
        return out

    def add_frames(self, network: tuple, frames: list[tuple[str, str, bytes]]) -> tuple:
        if not frames:
            return network
        if not self.config.fifo_network:
            # the (dest, source, frame) entries of one local step are built once and
            # shared by every state they join (memory: frontiers hold millions)
            frames = tuple(frames)
            entries = self._entries.get(frames)
            if entries is None:
                entries = tuple(self.shared((d, s, f)) for s, d, f in frames)
                self._entries[frames] = entries
            if len(entries) == 1:  # (most steps: one insertion into a sorted network)
                merged = list(network)
                insort(merged, entries[0])
                return tuple(merged)
            return tuple(sorted(network + entries))
        channels = {pair: list(queue) for pair, queue in network}
        for s, d, f in frames:
            channels.setdefault((s, d), []).append(f)
        return tuple(sorted((pair, tuple(queue)) for pair, queue in channels.items()))

    def arrivals(self, network: tuple) -> list[tuple[tuple, tuple]]:
        """``(("arrive", source, dest, frame), network without it)`` for every frame that
        may arrive."""
        out = []
        if not self.config.fifo_network:
            for k, entry in enumerate(network):
                if k and network[k - 1] == entry:
                    continue  # a second copy of the same frame: same successor
                rest = list(network)
                del rest[k]
                d, s, f = entry
                out.append((("arrive", s, d, f), tuple(rest)))
            return out
        for k, ((s, d), queue) in enumerate(network):
            rest = queue[1:]
            if rest:
                remaining = network[:k] + (((s, d), rest),) + network[k + 1:]
            else:
                remaining = network[:k] + network[k + 1:]
            out.append((("arrive", s, d, queue[0]), remaining))
        return out

    def enabled(self, state: tuple) -> list[tuple]:
        """Every transition enabled in ``state`` (sends first, then arrivals)."""
        return [action for action, _ in self.moves(state)]

    def moves(self, state: tuple, actors: frozenset[int] | tuple[str, str, bytes] | None = None
              ) -> list[tuple[tuple, tuple]]:
        """``(action, network it starts from)`` for every enabled transition (only those
        of the processes in ``actors``, if given, or only the arrival ``(source, dest,
        frame)`` if ``actors`` is one: a persistent set)."""
        network, truth = state[1], state[2]
        if type(actors) is tuple:
            action = ("arrive", *actors)
            for move in self.arrivals(network):
                if move[0] == action:
                    return [move]
            raise ValueError(f"transition {describe_action(action)} is not enabled")
        moves = []
        for i, (left, _, _, _) in enumerate(truth):
            if left and (actors is None or i in actors):
                who = self.names[i]
                moves += [(("send", who, dests), network)
                          for dests in self.send_options(state, i, left)]
        if actors is None:
            return moves + self.arrivals(network)
        index = self.index
        return moves + [move for move in self.arrivals(network) if index[move[0][2]] in actors]

    def send_options(self, state: tuple, i: int, left: int) -> list[tuple[str, ...]]:
        """The destination sets process ``i`` may send its next message to (``left``
        sends still to make)."""
        if self.config.workload is not None:
            return [self.choices[i][len(self.choices[i]) - left]]
        return self.choices[i]

    @staticmethod
    def actor(action: tuple) -> tuple[str, Any]:
        """The process a transition runs on, and its input (destinations or frame)."""
        if action[0] == "send":
            return action[1], action[2]
        return action[2], action[3]

    def expand(self, state: tuple, actors: Any = None
               ) -> tuple[list[tuple[tuple, tuple, str]], Violation | None]:
        """``(action, next state, description)`` for the transitions of :meth:`moves`,
        in order, up to the first that breaks a property; and that :class:`Violation`
        (with ``.action`` set), or None."""
        steps = []
        run = self._run
        for action, network in self.moves(state, actors):
            try:
                nxt, text = run(state, action, network)
            except Violation as violation:
                violation.action = action
                return steps, violation
            steps.append((action, nxt, text))
        return steps, None

    def apply(self, state: tuple, action: tuple) -> tuple[tuple, str]:
        """The successor of ``state`` by ``action`` and its description."""
        if action[0] in ("send", "join", "leave"):  # (they take nothing off the network)
            return self._run(state, action, state[1])
        for enabled, network in self.moves(state):
            if enabled == action:
                return self._run(state, action, network)
        raise ValueError(f"transition {describe_action(action)} is not enabled")

    def _run(self, state: tuple, action: tuple, network: tuple) -> tuple[tuple, str]:
        snaps, _, truth = state
        kind = action[0]
        if kind == "arrive":
            who, arg = action[2], action[3]
        elif kind == "send":
            who, arg = action[1], action[2]
        else:
            who, arg = self.actor(action)
        i = self.index[who]
        local = self.step_cache.get((i, snaps[i], kind, arg))
        if local is None:
            local = self.local_step(i, snaps[i], kind, arg)
        if local[0] == "violation":
            raise Violation(local[1], local[2])
        if kind in self.send_kinds or local[4]:  # an application send or a delivery
            truth = self._next_truth(truth, i, kind, local)
        new_snaps = list(snaps)
        new_snaps[i] = local[1]
        return (tuple(new_snaps), self.add_frames(network, local[2]), truth), local[5]

    def _next_truth(self, truth: tuple, i: int, kind: str, local: tuple) -> tuple:
        """``truth`` after process ``i``'s step ``local`` (its sends counted and their
        clocks checked against its node's, its deliveries judged). Memoized per effect
        (see :meth:`local_step`) by the identity of ``truth``: only the model's own copies
        (:meth:`one_truth`, alive as long as the model) are keys, so an id is never reused."""
        judged = local[6] if self._memo else None
        if judged is not None:
            found = judged.get(id(truth))
            if found is not None:
                return found
        _, _, _, sent_msgs, got, _ = local[:6]
        left, vc, sent, delivered = truth[i]
        if kind in self.send_kinds:  # an application send (the deliveries after it)
            own = list(vc)
            for dests, node_vc in sent_msgs:
                own[i] += 1
                if tuple(own) != node_vc:
                    raise Violation("exception", f"{self.names[i]}: node clock {node_vc} "
                                    f"differs from the checker's {tuple(own)}")
                sent += ((dests, node_vc),)
            vc = tuple(own)
            left -= 1
        for j, k, msg_id in got:
            vc, delivered = self._judge(truth, i, j, k, msg_id, vc, delivered)
        new_truth = truth[:i] + (self.shared((left, vc, sent, delivered)),) + truth[i + 1:]
        # (the truths of unpacked states are fresh tuples: neither keys nor kept)
        if judged is not None and not self.lenient and self.is_one_truth(truth):
            new_truth = judged[id(truth)] = self.one_truth(new_truth)
        return new_truth

    def local_step(self, i: int, snap_id: int, kind: str, arg: Any) -> tuple:
        """What node ``i`` in its interned state ``snap_id`` does on input ``(kind, arg)``
        (a pure function of the snapshot, so memoized): ``("ok", new snap id, frames, sent
        messages, deliveries, text)`` or ``("violation", property, detail)``. A memoized
        "ok" has a seventh item, shared by the steps of the same effect on the truth: the
        memo of :meth:`_next_truth`, truth id -> the truth after it."""
        key = (i, snap_id, kind, arg)
        hit = self.step_cache.get(key)
        if hit is not None:
            return hit
        result = self._local_run(i, snap_id, kind, arg)
        if self._memo:
            if result[0] == "ok":
                # steps with the same effect on the truth share one memo
                effect = (i, kind in self.send_kinds, result[3], result[4])
                result += (self._effects.setdefault(effect, {}),)
            self.step_cache[key] = result
        return result

    def restore_tables(self, tables: dict[str, Any]) -> None:
        super().restore_tables(tables)
        self.step_cache.clear()

    def _local_run(self, i: int, snap_id: int, kind: str, arg: Any) -> tuple:
        """Node ``i`` set back to its interned snapshot ``snap_id`` takes one input
        (:meth:`take_input`): the result of :meth:`local_step`, not memoized."""
        node = self.nodes[i]
        node.restore(self.snapshots[i][snap_id])
        self._outbox = []
        self._delivered_now = []
        self.step += 1
        sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]] = []
        got: list[tuple[int, int, str]] = []
        try:
            text = self.take_input(node, kind, arg, sent_msgs, got)
            if type(text) is tuple:
                return text
            snap = node.snapshot()
        except Exception as error:  # noqa: BLE001 - any exception in a filter is a finding
            node.discard_queued()  # drop the work of the failed step
            return ("violation", "exception", f"{node.name}: {type(error).__name__}: {error}")
        return ("ok", self.intern(i, snap), tuple(self._outbox), tuple(sent_msgs),
                tuple(got), text)

    def take_input(self, node: ProtocolNode, kind: str, arg: Any,
                   sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]],
                   got: list[tuple[int, int, str]]) -> str | tuple:
        """``node`` takes input ``(kind, arg)`` (a send to ``arg``, or frame ``arg``),
        appending to ``sent_msgs`` and ``got``: the step's text, or its violation."""
        who = node.name
        if kind == "send":
            return self.send_step(node, arg, sent_msgs)
        message = decode_received(arg, who)
        node.receive(message)
        failed = self.collect_deliveries(node, got)
        if failed is not None:
            return failed
        if isinstance(message.user_message, ControlMessage):
            control = message.user_message
            about = f" about {control.about}" if control.about else ""
            return f"{who} receives {control.kind}{about} from {message.sender}"
        text = f"{who} receives {message.message_id} ({message.kind}) from {message.sender}"
        ids = [m for _, _, m in got]
        if ids == [message.message_id]:
            return text + " (delivered)"
        if ids:
            return text + f" (delivers {', '.join(ids)})"
        return text + " (buffered)"

    def send_step(self, node: ProtocolNode, dests: tuple[str, ...],
                  sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]],
                  between: Callable[[], None] | None = None) -> str | tuple:
        """The application at ``node`` sends to ``dests``: the node tags the send, then
        ``between`` runs if given (deliveries it makes are the caller's to collect), then
        the send pipeline. Appends each send's destinations and clock to ``sent_msgs``.
        Returns the step's text, or its violation (a refused send, a delivery during it)."""
        who = node.name
        try:
            # bypass_refusal: on purpose, without the module's destination check
            messages = node.tag_sends(None, dests, module_check=not self.config.bypass_refusal)
        except CausalityError as error:
            node.discard_queued()
            return ("violation", "refused",
                    f"{who} sends to {', '.join(dests)}: the {self.config.protocol} "
                    f"module refused it ({error}); the message can never be delivered")
        if between is not None:
            between()
        delivered_before = len(self._delivered_now)
        for message in messages:
            clock = dict(message.vc)
            sent_msgs.append((message.destinations, tuple(clock.get(n, 0) for n in self.names)))
        node.submit_many(messages)
        if len(self._delivered_now) > delivered_before:
            node.discard_queued()
            return ("violation", "exception", f"{who} delivered during its own send")
        return f"{who} sends {', '.join(m.message_id for m in messages)} to {', '.join(dests)}"

    def collect_deliveries(self, node: ProtocolNode,
                           got: list[tuple[int, int, str]]) -> tuple | None:
        """Append ``(sender index, send index, id)`` to ``got`` for each application
        delivery of the step; the step's violation if ``node`` delivered a message no
        process sent (its queued work dropped), else None."""
        for m in self._delivered_now:
            sender_name, _, number = m.message_id.rpartition("#")
            j = self.index.get(sender_name)
            if j is None or not number.isdigit():
                node.discard_queued()
                return ("violation", "exception",
                        f"{node.name} delivered {m.message_id}, which no process sent")
            got.append((j, int(number) - 1, m.message_id))
        return None

    def _judge(self, truth: tuple, i: int, j: int, k: int, msg_id: str, vc: tuple,
               delivered: frozenset) -> tuple[tuple, frozenset]:
        """Check one application delivery (message k of process j) at process ``i``;
        returns the new clock and delivered set of ``i``."""
        me = self.names[i]
        sent_j = truth[j][2]
        if k >= len(sent_j) or me not in sent_j[k][0]:
            raise Violation("duplicate", f"{me} delivered {msg_id}, which was not addressed "
                            "to it")
        key = (j, k)
        if key in delivered:
            raise Violation("duplicate", f"{me} delivered {msg_id} twice")
        own = sent_j[k][1]
        # m' -> m iff vc(m')[sender(m')] <= vc(m)[sender(m')] (docs/trace_schema.md). A delivery that
        # overtakes a message of its own sender is reported as fifo whichever other
        # messages it overtakes too, so the property does not depend on process names
        missing: tuple[int, int] | None = None
        for s, (_, _, sent_s, _) in enumerate(truth):
            limit = own[s]
            for n, (dests, vc_s) in enumerate(sent_s):
                if vc_s[s] > limit:
                    break  # later sends of s have larger own entries
                if me not in dests or (s, n) == key or (s, n) in delivered or self.lenient:
                    continue
                if s == j:
                    missing = (s, n)
                    break
                if missing is None:
                    missing = (s, n)
            if missing is not None and missing[0] == j:
                break
        if missing is not None:
            s, n = missing
            violation = Violation("fifo" if s == j else "causal", f"{me} delivered {msg_id} "
                                  f"before {self.names[s]}#{n + 1}, which happened before it")
            violation.missing = (i, s, n)
            raise violation
        new_vc = tuple(x if x >= y else y for x, y in zip(vc, own, strict=True))
        new_vc = new_vc[:i] + (new_vc[i] + 1,) + new_vc[i + 1:]
        return new_vc, delivered | {key}

    def undelivered(self, state: tuple) -> list[str]:
        """``msg@process`` for every message sent and not delivered at a destination."""
        truth = state[2]
        out = []
        for j, (_, _, sent, _) in enumerate(truth):
            for k, (dests, _) in enumerate(sent):
                for dest in dests:
                    if (j, k) not in truth[self.index[dest]][3]:
                        out.append(f"{self.names[j]}#{k + 1}@{dest}")
        return out

    def liveness_violation(self, state: tuple) -> Violation | None:
        """For a terminal ``state``: the liveness violation if a message sent was never
        delivered at one of its destinations (naming them and what each node holds)."""
        missing = self.undelivered(state)
        if not missing:
            return None
        holding = []
        for i, node in enumerate(self.nodes):
            if self.present(state[0], i):
                node.restore(self.snapshots[i][state[0][i]])
                if held := node.held():
                    holding.append(f"{self.names[i]} holds "
                                   f"{', '.join(m.message_id for m in held)}")
        held_text = "; ".join(holding)
        return Violation("liveness", f"terminal state with {len(missing)} undelivered: "
                         f"{', '.join(missing[:8])}" + (f" ({held_text})" if held_text else ""))

    def present(self, snaps: tuple, i: int) -> bool:
        """Whether process ``i`` is a member in a state with snapshots ``snaps``."""
        return True

    def records(self) -> list[dict[str, Any]]:
        return self.tracer.records if isinstance(self.tracer, MemoryTracer) else []
