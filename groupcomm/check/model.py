"""The model: N real :class:`~groupcomm.core.node.ProtocolNode` s, a network of frames, and the
checker's own ground truth; and the search over it.

**State.** A state is a tuple ``(nodes, network, truth)``:

* ``nodes`` - one :meth:`ProtocolNode.snapshot` per process (application clock, id
  counter, membership and the causality manager's snapshot, held messages included);
* ``network`` - the frames in flight, each the exact bytes of the real codec: an
  unordered, non-duplicating network is the sorted tuple of ``(dest, source, frame)``
  (a multiset; frames are unique anyway since message and control ids are); a per-pair
  FIFO network (``fifo_network``) is the sorted tuple of ``((source, dest), frames)``
  for the non-empty channels;
* ``truth`` - kept by the checker, outside the protocol: per process the sends still to
  make, its ground-truth vector clock, the messages it sent (destinations and the vector
  clock of each send) and the set of messages it delivered.

**Transitions.** ``("send", p, dests)``: the application at ``p`` sends its next message
(every choice of destination explored: each single other process, or the broadcast to
all others for broadcast-only modules, or the destinations a workload file fixes).
``("arrive", source, dest, frame)``: a frame in flight arrives (any frame on an
unordered network; the head of each channel on a FIFO network). A transition restores
only the node it touches from the state's snapshot, runs it through its real pipelines
and takes its snapshot again; frames it transmits join the network.

**Properties.** Judged at every transition: *causal* - a delivery of m at i while some
m' → m addressed to i is undelivered at i (reported as *fifo* when m' has the same sender
as m: FIFO is the special case); *duplicate* - a second delivery of m at i; *exception* -
a filter or manager raised; *refused* - the module refused an application send (vector
and the other broadcast-only modules refuse unicasts: the message can never be
delivered, the liveness failure of 000, footnote 1, caught at the call); and in every
terminal state (no transition enabled) *liveness* - every message sent has been
delivered at every destination.

**Search.** Breadth-first by default (the first violation found has a shortest
counterexample), depth-first on request. States are deduplicated on the whole state, or
(``reduce``) on a 64-bit digest of it (hash compaction, Holzmann's bitstate cousin:
sound up to digest collisions, probability about n²/2⁶⁵ for n states - 3·10⁻⁶ at ten
million), with the frontier's node snapshots interned so equal snapshots are stored
once. Counterexamples are kept as shared parent links of the frontier, not per state
(with ``reduce``, not at all: a violation is found again with them). ``symmetry``
deduplicates on a canonical key instead - states that differ only in process names
or control-message numbering count once (:mod:`groupcomm.check.symmetry`). ``por``
expands only a persistent set of the enabled transitions in each state - those of the
processes the others can no longer send to, or one arrival of a control the module
declares commuting (:mod:`groupcomm.check.por`). ``compact`` keeps a breadth-first
hash-compacted search's frontier packed into bytes (:meth:`Model.pack`).
"""

from __future__ import annotations

import gc
import json
import os
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.core.causality import CausalityError
from groupcomm.core.messages import ControlMessage, GroupMessage, ReceivedMessage, SentMessage
from groupcomm.core.node import ProtocolNode
from groupcomm.core.tracing import MemoryTracer, NullTracer, write_trace_dir
from groupcomm.transport.codec import decode_received, encode_message

PROPERTIES = ("causal", "fifo", "duplicate", "exception", "refused", "liveness")


class ConfigError(ValueError):
    """A bad checker configuration (unknown protocol, bad bounds, bad workload)."""


# -- configuration ----------------------------------------------------------------------------
@dataclass
class CheckConfig:
    """What to check and how.

    ``workload`` maps process name to the destinations of each of its sends, in order
    (see :func:`load_workload`); without one every process makes ``messages`` sends to
    destinations chosen nondeterministically (``destinations``: ``auto`` - broadcast to
    all others for broadcast-only modules, a single other process otherwise;
    ``unicast``; ``broadcast``).
    """

    protocol: str = "cykas"
    processes: int = 3
    messages: int = 2
    fifo_network: bool = False
    dfs: bool = False
    reduce: bool = False
    #: symmetry reduction (see :mod:`groupcomm.check.symmetry`)
    symmetry: bool = False
    #: partial-order reduction: expand a persistent set of transitions (see
    #: :mod:`groupcomm.check.por`)
    por: bool = False
    #: with ``reduce`` and breadth-first search on an unordered network: keep the
    #: frontier's states packed into bytes (memory; costs a little time)
    compact: bool = False
    max_states: int | None = None
    workload: dict[str, list[tuple[str, ...]]] | None = None
    destinations: str = "auto"
    #: tag sends without the module's destination check (shows what the filter would do)
    bypass_refusal: bool = False
    #: called with a progress dict about every ``progress_interval`` seconds
    progress: Callable[[dict[str, Any]], None] | None = None
    progress_interval: float = 2.0

    def names(self) -> list[str]:
        if self.workload is not None:
            return list(self.workload)
        return [f"p{i + 1}" for i in range(self.processes)]


def load_workload(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """Read a workload: JSON ``{"sends": {"p1": [["p2"], ["p2", "p3"]], "p2": [], ...}}``
    (or that mapping itself). Every process of the run is a key of ``sends``; each entry
    is the destination list of one application send, made in that order (when is
    explored). Raises :class:`ConfigError` on anything else."""
    if isinstance(source, Mapping):
        data: Any = source
        where = "workload"
    else:
        where = str(source)
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"cannot read workload {where}: {error.strerror or error}") from None
        except json.JSONDecodeError as error:
            raise ConfigError(f"workload {where} is not JSON: {error}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("sends"), Mapping):
        raise ConfigError(f"workload {where}: expected an object with a 'sends' object "
                          '(e.g. {"sends": {"p1": [["p2"]], "p2": []}})')
    sends = data["sends"]
    names = list(sends)
    if len(names) < 2:
        raise ConfigError(f"workload {where}: needs at least two processes, got {names}")
    workload: dict[str, list[tuple[str, ...]]] = {}
    for name, entries in sends.items():
        if not isinstance(name, str) or not name or "#" in name or "~" in name:
            raise ConfigError(f"workload {where}: bad process name {name!r}")
        if not isinstance(entries, list):
            raise ConfigError(f"workload {where}: sends of {name} must be a list of lists")
        out = []
        for entry in entries:
            if isinstance(entry, str):
                entry = [entry]
            if (not isinstance(entry, list) or not entry
                    or not all(isinstance(d, str) for d in entry)):
                raise ConfigError(f"workload {where}: each send of {name} must be a non-empty "
                                  f"list of process names, got {entry!r}")
            for dest in entry:
                if dest not in sends or dest == name:
                    raise ConfigError(f"workload {where}: {name} sends to {dest!r}, which is "
                                      "not another process of the workload")
            out.append(tuple(dict.fromkeys(entry)))
        workload[name] = out
    return workload


# -- results ----------------------------------------------------------------------------------
@dataclass
class CheckResult:
    """What a search found. ``result`` is ``ok``, ``violation`` or ``incomplete`` (stopped
    by ``max_states`` or interrupted before finishing, nothing found so far)."""

    result: str
    protocol: str
    processes: int
    messages: int
    property: str | None = None
    detail: str | None = None
    states: int = 0
    transitions: int = 0
    max_depth: int = 0
    seconds: float = 0.0
    terminal_states: int = 0
    #: human-readable steps of the counterexample
    counterexample: list[str] = field(default_factory=list)
    #: the transitions of the counterexample (to replay it)
    actions: list[tuple] = field(default_factory=list)
    #: causal / fifo: steps after the violation until the overtaken message is delivered
    #: as well, so the trace files show both deliveries (DESIGN.md's definition)
    completion: list[str] = field(default_factory=list)
    completion_actions: list[tuple] = field(default_factory=list)
    stopped: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def is_ok(self) -> bool:
        return self.result == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "protocol": self.protocol,
            "processes": self.processes,
            "messages": self.messages,
            "property": self.property,
            "detail": self.detail,
            "states": self.states,
            "transitions": self.transitions,
            "max_depth": self.max_depth,
            "terminal_states": self.terminal_states,
            "seconds": round(self.seconds, 3),
            "states_per_second": round(self.states / self.seconds) if self.seconds else None,
            "stopped": self.stopped,
            "counterexample": list(self.counterexample),
            "completion": list(self.completion),
            "config": dict(self.config),
        }


class Violation(Exception):
    """A property failed on a transition (internal: carries the property and why)."""

    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop
        self.detail = detail
        #: the transition that broke the property (set by :meth:`Model.successors`)
        self.action: tuple | None = None
        #: causal / fifo: (process, sender, index) of the message delivered too late
        self.missing: tuple[int, int, int] | None = None


# -- the model --------------------------------------------------------------------------------
class Model:
    """The processes, their real nodes, and the transition function.

    ``trace=True`` gives the nodes a :class:`MemoryTracer` (used to replay a
    counterexample into trace files); searching runs with tracing off.
    """

    def __init__(self, config: CheckConfig, *, trace: bool = False) -> None:
        from groupcomm.core.registry import UnknownModuleError, get_module

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
        if config.destinations not in ("auto", "unicast", "broadcast"):
            raise ConfigError(f"destinations must be auto, unicast or broadcast, "
                              f"got {config.destinations!r}")
        self.n = len(self.names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.step = 0
        self.tracer = MemoryTracer() if trace else NullTracer()
        self._outbox: list[tuple[str, str, bytes]] = []
        self._delivered_now: list[ReceivedMessage] = []
        self.nodes = [self._make_node(name) for name in self.names]
        #: per process: interned snapshots (id -> snapshot, snapshot -> id)
        self._snaps: list[dict[int, tuple]] = [{} for _ in self.names]
        self._snap_ids: list[dict[tuple, int]] = [{} for _ in self.names]
        #: memo of local steps (off while tracing: a replay must run every step)
        self._memo = not trace
        #: when True causal and FIFO violations are not raised (to extend a
        #: counterexample until the overtaken message is delivered too)
        self.lenient = False
        self._cache: dict[tuple, tuple] = {}
        self._entries: dict[tuple, tuple] = {}
        self._values: dict[Any, Any] = {}
        #: truth entries, shared between the states that have them (memory)
        self._truths: dict[tuple, tuple] = {}
        #: compact states (:meth:`pack`): id() of a truth or network entry -> its number,
        #: and the entries by number (which also keeps them alive)
        self._numbers: dict[int, int] = {}
        self._numbered: list[Any] = []
        # the same join sequence as LocalNetwork: one by one, everyone told
        initial_frames: list[tuple[str, str, bytes]] = []
        for count, name in enumerate(self.names, start=1):
            for member in self.names[:count]:
                self.nodes[self.index[member]].client_joined(
                    name, is_new_session=count == 1, all_users=tuple(self.names[:count])
                )
        initial_frames, self._outbox = self._outbox, []
        if self._delivered_now:
            raise ConfigError("a module delivered an application message at join")
        self.choices = self._destination_choices()
        budgets = tuple(len(self.choices[i]) if config.workload is not None else config.messages
                        for i in range(self.n))
        zero = (0,) * self.n
        truth = tuple((budgets[i], zero, (), frozenset()) for i in range(self.n))
        snaps = tuple(self._intern(i, node.snapshot()) for i, node in enumerate(self.nodes))
        self.initial_state = (snaps, self._add_frames(self._empty_network(), initial_frames),
                              truth)

    # -- set-up ---------------------------------------------------------------------------
    def _make_node(self, name: str) -> ProtocolNode:
        def transmit(message: SentMessage, dests: tuple[str, ...]) -> None:
            frame = encode_message(message)
            for dest in dests:
                self._outbox.append((name, dest, frame))

        node = ProtocolNode(
            name,
            transmit=transmit,
            clock=lambda: float(self.step),
            send_creators=[self.module.send_creator()],
            receive_creators=[self.module.receive_creator()],
            tracer=self.tracer,
        )

        def on_deliverable(message: ReceivedMessage) -> None:
            node.application_delivered(message)
            self._delivered_now.append(message)

        node.on_deliverable = on_deliverable
        return node

    def _destination_choices(self) -> list[list[tuple[str, ...]]]:
        """Per process: the destination sets of its sends. Nondeterministic mode: the
        options of every send; workload mode: the fixed list, one entry per send."""
        config = self.config
        if config.workload is not None:
            return [list(config.workload[name]) for name in self.names]
        mode = config.destinations
        if mode == "auto":
            mode = "broadcast" if self.module.broadcast_only else "unicast"
        out = []
        for name in self.names:
            others = tuple(n for n in self.names if n != name)
            if mode == "broadcast":
                out.append([others])
            else:
                out.append([(o,) for o in others])
        return out

    # -- network --------------------------------------------------------------------------
    def _empty_network(self) -> tuple:
        return ()

    def _add_frames(self, network: tuple, frames: list[tuple[str, str, bytes]]) -> tuple:
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
            return tuple(sorted(network + entries))
        channels = {pair: list(queue) for pair, queue in network}
        for s, d, f in frames:
            channels.setdefault((s, d), []).append(f)
        return tuple(sorted((pair, tuple(queue)) for pair, queue in channels.items()))

    def arrivals(self, network: tuple) -> list[tuple[str, str, bytes, tuple]]:
        """``(source, dest, frame, network without it)`` for every frame that may arrive."""
        out = []
        if not self.config.fifo_network:
            for k, (d, s, f) in enumerate(network):
                if k and network[k - 1] == (d, s, f):
                    continue  # a second copy of the same frame: same successor
                out.append((s, d, f, network[:k] + network[k + 1:]))
            return out
        for k, ((s, d), queue) in enumerate(network):
            rest = queue[1:]
            if rest:
                remaining = network[:k] + (((s, d), rest),) + network[k + 1:]
            else:
                remaining = network[:k] + network[k + 1:]
            out.append((s, d, queue[0], remaining))
        return out

    def _without(self, network: tuple, s: str, d: str, f: bytes) -> tuple:
        """``network`` after frame ``f`` from ``s`` to ``d`` (enabled) arrives."""
        if not self.config.fifo_network:
            for k, entry in enumerate(network):
                if entry[2] == f and entry[0] == d and entry[1] == s:
                    return network[:k] + network[k + 1:]
        else:
            for k, ((s2, d2), queue) in enumerate(network):
                if s2 == s and d2 == d and queue[0] == f:
                    rest = queue[1:]
                    if rest:
                        return network[:k] + (((s, d), rest),) + network[k + 1:]
                    return network[:k] + network[k + 1:]
        raise ValueError(f"transition {describe_action(('arrive', s, d, f))} is not enabled")

    # -- transitions ------------------------------------------------------------------------
    def enabled(self, state: tuple) -> list[tuple]:
        """Every transition enabled in ``state`` (sends first, then arrivals)."""
        _, network, truth = state
        actions: list[tuple] = []
        workload = self.config.workload is not None
        for i, (left, _, _, _) in enumerate(truth):
            if left:
                if workload:
                    actions.append(("send", self.names[i], self.choices[i][len(self.choices[i]) - left]))
                else:
                    for dests in self.choices[i]:
                        actions.append(("send", self.names[i], dests))
        for s, d, f, _ in self.arrivals(network):
            actions.append(("arrive", s, d, f))
        return actions

    def successors(self, state: tuple,
                   actors: frozenset[int] | tuple[str, str, bytes] | None = None
                   ) -> Iterable[tuple[tuple, tuple, str]]:
        """``(action, next state, description)`` for every enabled transition (only those
        of the processes in ``actors``, if given, or only the arrival ``(source, dest,
        frame)`` if ``actors`` is one: a persistent set); raises :class:`Violation` (with
        ``.action`` set) when one breaks a property."""
        snaps, network, truth = state
        if type(actors) is tuple:
            s, d, f = actors
            action = ("arrive", s, d, f)
            try:
                nxt, text = self._run(state, action, self._without(network, s, d, f))
            except Violation as violation:
                violation.action = action
                raise
            yield action, nxt, text
            return
        workload = self.config.workload is not None
        run = self._run
        for i, (left, _, _, _) in enumerate(truth):
            if not left or (actors is not None and i not in actors):
                continue
            options = ([self.choices[i][len(self.choices[i]) - left]] if workload
                       else self.choices[i])
            for dests in options:
                action = ("send", self.names[i], dests)
                try:
                    nxt, text = run(state, action, network)
                except Violation as violation:
                    violation.action = action
                    raise
                yield action, nxt, text
        index = self.index
        for s, d, f, rest in self.arrivals(network):
            if actors is not None and index[d] not in actors:
                continue
            action = ("arrive", s, d, f)
            try:
                nxt, text = run(state, action, rest)
            except Violation as violation:
                violation.action = action
                raise
            yield action, nxt, text

    def apply(self, state: tuple, action: tuple) -> tuple[tuple, str]:
        """The successor of ``state`` by ``action`` and its description."""
        if action[0] == "send":
            return self._run(state, action, state[1])
        _, s, d, f = action
        for s2, d2, f2, rest in self.arrivals(state[1]):
            if (s2, d2, f2) == (s, d, f):
                return self._run(state, action, rest)
        raise ValueError(f"transition {describe_action(action)} is not enabled")

    def _run(self, state: tuple, action: tuple, network: tuple) -> tuple[tuple, str]:
        snaps, _, truth = state
        kind = action[0]
        if kind == "send":
            who, arg = action[1], action[2]
        else:
            who, arg = action[2], action[3]
        i = self.index[who]
        local = self._cache.get((i, snaps[i], kind, arg))
        if local is None:
            local = self._local(i, snaps[i], kind, arg)
        if local[0] == "violation":
            raise Violation(local[1], local[2])
        _, new_snap, frames, sent_msgs, got, text = local
        left, vc, sent, delivered = truth[i]
        if kind == "send":
            own = list(vc)
            new_sent = list(sent)
            for dests, node_vc in sent_msgs:
                own[i] += 1
                if tuple(own) != node_vc:
                    raise Violation("exception", f"{who}: node clock {node_vc} differs from "
                                    f"the checker's {tuple(own)}")
                new_sent.append((dests, node_vc))
            new_truth_i = (left - 1, tuple(own), tuple(new_sent), delivered)
        elif got:
            for j, k, msg_id in got:
                vc, delivered = self._judge(truth, i, j, k, msg_id, vc, delivered)
            new_truth_i = (left, vc, sent, delivered)
        else:  # nothing delivered: the truth does not change
            new_snaps = snaps[:i] + (new_snap,) + snaps[i + 1:]
            return (new_snaps, self._add_frames(network, frames), truth), text
        new_truth_i = self._truths.setdefault(new_truth_i, new_truth_i)
        new_snaps = snaps[:i] + (new_snap,) + snaps[i + 1:]
        new_truth = truth[:i] + (new_truth_i,) + truth[i + 1:]
        return (new_snaps, self._add_frames(network, frames), new_truth), text

    def _local(self, i: int, snap_id: int, kind: str, arg: Any) -> tuple:
        """What node ``i`` in its interned state ``snap_id`` does on one input (an
        application send to ``arg`` or the arrival of frame ``arg``): a pure function of
        the snapshot, so memoized. Returns ``("ok", new snap id, frames, sent messages,
        deliveries, text)`` or ``("violation", property, detail)``."""
        key = (i, snap_id, kind, arg)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = self._local_run(i, snap_id, kind, arg)
        if self._memo:
            self._cache[key] = result
        return result

    def _intern(self, i: int, snap: tuple) -> int:
        table = self._snap_ids[i]
        key = _exact(snap)
        found = table.get(key)
        if found is None:
            snaps = self._snaps[i]
            found = len(snaps)
            table[key] = found
            snaps[found] = snap
        return found

    # -- compact states (the frontier of a hash-compacted search) -------------------------------
    def pack(self, state: tuple) -> bytes:
        """``state`` as bytes: 32-bit snapshot ids, then numbers standing for its truth
        entries and network entries (the objects the states share). Unordered networks
        only; :meth:`unpack` gives back an equal state."""
        snaps, network, truth = state
        numbers = self._numbers
        out = list(snaps)
        for entry in truth:
            number = numbers.get(id(entry))
            if number is None:
                number = self._number(entry)
            out.append(number)
        for entry in network:
            number = numbers.get(id(entry))
            if number is None:
                number = self._number(entry)
            out.append(number)
        return array("I", out).tobytes()

    def unpack(self, packed: bytes) -> tuple:
        """The state :meth:`pack` made ``packed`` from."""
        values = array("I")
        values.frombytes(packed)
        n = self.n
        numbered = self._numbered
        return (tuple(values[:n]), tuple([numbered[k] for k in values[2 * n:]]),
                tuple([numbered[k] for k in values[n:2 * n]]))

    def _number(self, entry: Any) -> int:
        number = len(self._numbered)
        self._numbered.append(entry)
        self._numbers[id(entry)] = number
        return number

    def shared(self, value: Any) -> Any:
        """The one copy of ``value`` (a network entry) the states of this model share:
        equal entries that are the same object cost less memory and compare at once
        (identity) in the sorts and lookups of every step."""
        return self._values.setdefault(value, value)

    def _local_run(self, i: int, snap_id: int, kind: str, arg: Any) -> tuple:
        who = self.names[i]
        node = self.nodes[i]
        node.restore(self._snaps[i][snap_id])
        self._outbox = []
        self._delivered_now = []
        self.step += 1
        sent_msgs: list[tuple[tuple[str, ...], tuple[int, ...]]] = []
        got: list[tuple[int, int, str]] = []
        try:
            if kind == "send":
                dests: tuple[str, ...] = arg
                try:
                    if self.config.bypass_refusal:
                        # on purpose: tag without the module's destination check
                        if self.module.unicast_events and len(dests) > 1:
                            messages = [node._tag_one(None, (d,)) for d in dests]  # noqa: SLF001
                        else:
                            messages = [node._tag_one(None, dests)]  # noqa: SLF001
                    else:
                        messages = node.tag_sends(None, dests)
                except CausalityError as error:
                    self._reset(node)
                    return ("violation", "refused",
                            f"{who} sends to {', '.join(dests)}: the {self.config.protocol} "
                            f"module refused it ({error}); the message can never be delivered")
                for message in messages:
                    clock = dict(message.vc)
                    sent_msgs.append((message.destinations,
                                      tuple(clock.get(n, 0) for n in self.names)))
                node.submit_many(messages)
                if self._delivered_now:
                    self._reset(node)
                    return ("violation", "exception", f"{who} delivered during its own send")
                ids = ", ".join(m.message_id for m in messages)
                text = f"{who} sends {ids} to {', '.join(dests)}"
            else:
                frame: bytes = arg
                message = decode_received(frame, who)
                node.receive(message)
                for m in self._delivered_now:
                    sender_name, _, number = m.message_id.rpartition("#")
                    j = self.index.get(sender_name)
                    if j is None or not number.isdigit():
                        self._reset(node)
                        return ("violation", "exception",
                                f"{who} delivered {m.message_id}, which no process sent")
                    got.append((j, int(number) - 1, m.message_id))
                if isinstance(message.user_message, ControlMessage):
                    control = message.user_message
                    about = f" about {control.about}" if control.about else ""
                    text = f"{who} receives {control.kind}{about} from {message.sender}"
                else:
                    text = f"{who} receives {message.message_id} ({message.kind}) from " \
                           f"{message.sender}"
                ids = [m for _, _, m in got]
                if ids == [message.message_id]:
                    text += " (delivered)"
                elif ids:
                    text += f" (delivers {', '.join(ids)})"
                elif not isinstance(message.user_message, ControlMessage):
                    text += " (buffered)"
            snap = node.snapshot()
        except Exception as error:  # noqa: BLE001 - any exception in a filter is a finding
            self._reset(node)
            return ("violation", "exception", f"{who}: {type(error).__name__}: {error}")
        return ("ok", self._intern(i, snap), tuple(self._outbox), tuple(sent_msgs),
                tuple(got), text)

    @staticmethod
    def _reset(node: ProtocolNode) -> None:
        node._sends.clear()  # noqa: SLF001 - drop the work of a failed step
        node._deliveries.clear()  # noqa: SLF001
        node._inputs.clear()  # noqa: SLF001

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
        # m' -> m iff vc(m')[sender(m')] <= vc(m)[sender(m')] (DESIGN.md). A delivery that
        # overtakes a message of its own sender is reported as fifo whichever other
        # messages it overtakes too, so the property does not depend on process names
        missing: tuple[int, int] | None = None
        for s, (_, _, sent_s, _) in enumerate(truth):
            limit = own[s]
            for n, (dests, vc_s) in enumerate(sent_s):
                if vc_s[s] > limit:
                    break  # later sends of s have larger own entries
                if me not in dests or (s, n) == key or (s, n) in delivered:
                    continue
                if self.lenient:
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

    def held_summary(self, state: tuple) -> str:
        parts = []
        for i, node in enumerate(self.nodes):
            node.restore(self._snaps[i][state[0][i]])
            held = node.held()
            if held:
                parts.append(f"{self.names[i]} holds {', '.join(m.message_id for m in held)}")
        return "; ".join(parts)

    def records(self) -> list[dict[str, Any]]:
        return self.tracer.records if isinstance(self.tracer, MemoryTracer) else []


def _exact(value: Any) -> Any:
    """``value`` with every message replaced by what it carries *including* its
    ground-truth clock (messages compare without it: :meth:`GroupMessage.freeze`), so
    two snapshots that differ only in a held message's clock stay apart."""
    if isinstance(value, tuple):
        for v in value:
            if type(v) not in _ATOMIC:
                return tuple([_exact(v) for v in value])
        return value  # only atoms (the common case: clocks, matrices, counters)
    if isinstance(value, GroupMessage):
        return (value.freeze(), value.vc)
    return value


#: values :func:`_exact` leaves as they are
_ATOMIC = frozenset({int, str, bytes, float, bool, type(None)})


def describe_action(action: tuple) -> str:
    if action[0] == "send":
        return f"{action[1]} sends to {', '.join(action[2])}"
    return f"frame {action[1]} -> {action[2]} arrives"


# -- search ---------------------------------------------------------------------------------
def check(config: CheckConfig) -> CheckResult:
    """Explore every interleaving within the bounds of ``config``; see the module doc.

    With ``reduce`` the search keeps no parent links (they would cost more memory than
    the digests); when it finds a violation, the search is run again with them, from
    the warm model, to get the counterexample (same order, so the same one)."""
    model = Model(config)
    # the search allocates millions of long-lived tuples (frontier, memos) and makes no
    # reference cycles: the cyclic collector would only rescan them (measured: up to a
    # third of the CPU time at 3x3; same peak memory without it)
    collecting = gc.isenabled()
    gc.disable()
    try:
        if not config.reduce:
            return search(model, config, keep_paths=True)
        result = search(model, config, keep_paths=False)
        if result.result == "violation":
            seconds = result.seconds
            result = search(model, config, keep_paths=True)
            result.seconds += seconds
        return result
    finally:
        if collecting:
            gc.enable()


def search(model: Model, config: CheckConfig, *, keep_paths: bool) -> CheckResult:
    """The breadth-first (or depth-first) search of :func:`check` on ``model``; without
    ``keep_paths`` a violation is reported without its counterexample."""
    result = CheckResult(
        result="ok", protocol=config.protocol, processes=model.n,
        messages=config.messages if config.workload is None else max(
            (len(v) for v in config.workload.values()), default=0),
        config={
            "fifo_network": config.fifo_network, "dfs": config.dfs, "reduce": config.reduce,
            "max_states": config.max_states, "workload": config.workload is not None,
            "destinations": config.destinations, "bypass_refusal": config.bypass_refusal,
            "symmetry": None, "por": config.por, "compact": config.compact,
        },
    )
    start = time.perf_counter()
    last_report = start
    initial = model.initial_state
    reduce = config.reduce
    canon: Callable[[tuple], Any] | None = None
    if config.symmetry:
        from groupcomm.check.symmetry import Symmetry

        symmetry = Symmetry(model)
        canon = symmetry.key
        result.config["symmetry"] = symmetry.describe()
        result.config["symmetry_group"] = symmetry.size
    persistent: Callable[[tuple], Any] | None = None
    sets = None
    if config.por:
        from groupcomm.check.por import PersistentSets

        sets = PersistentSets(model)
        persistent = sets.choose
    first = canon(initial) if canon is not None else initial
    seen: set = {hash(first) if reduce else first}
    #: with symmetry: concrete states already generated (their keys are in ``seen``)
    known: set = set()
    # frontier entries: (state, depth, path) where path is (action, parent path); the
    # step texts are recomputed for the counterexample only (they cost memory)
    frontier: deque[Any] = deque([(initial, 0, None)])
    pop = frontier.pop if config.dfs else frontier.popleft
    # a breadth-first hash-compacted search keeps its frontier compact: each state packed
    # into bytes (Model.pack), depths counted per level instead of stored
    compact = (config.compact and not keep_paths and not config.dfs
               and not config.fifo_network)
    if compact:
        frontier = deque([model.pack(initial)])
        pop = frontier.popleft
        pack, unpack = model.pack, model.unpack
        level_left = 1  # states of the current level still in the frontier
        level = 0
    states = 1
    transitions = 0
    max_depth = 0
    terminal = 0
    found: tuple | None = None
    try:
        while frontier:
            if compact:
                if not level_left:
                    level += 1
                    level_left = len(frontier)
                level_left -= 1
                state, depth, path = unpack(pop()), level, None
            else:
                state, depth, path = pop()
            any_enabled = False
            gen = model.successors(state, persistent(state) if persistent else None)
            while True:
                try:
                    action, nxt, text = next(gen)
                except StopIteration:
                    break
                except Violation as violation:
                    failed = violation.action
                    assert failed is not None
                    found = (violation, (failed, path) if keep_paths else None, depth + 1)
                    transitions += 1
                    break
                any_enabled = True
                transitions += 1
                if canon is not None:
                    # the same concrete state again (a diamond of independent steps):
                    # its key is known to be in ``seen``, skip computing it
                    concrete = hash(nxt) if reduce else nxt
                    if concrete in known:
                        continue
                    known.add(concrete)
                    key = canon(nxt)
                else:
                    key = nxt
                if reduce:
                    key = hash(key)
                if key in seen:
                    continue
                seen.add(key)
                states += 1
                if depth + 1 > max_depth:
                    max_depth = depth + 1
                if compact:
                    frontier.append(pack(nxt))
                else:
                    frontier.append((nxt, depth + 1, (action, path) if keep_paths else None))
            if found is not None:
                break
            if not any_enabled:
                terminal += 1
                missing = model.undelivered(state)
                if missing:
                    held = model.held_summary(state)
                    detail = (f"terminal state with {len(missing)} undelivered: "
                              f"{', '.join(missing[:8])}" + (f" ({held})" if held else ""))
                    found = (Violation("liveness", detail), path, depth)
                    break
            if config.max_states is not None and states >= config.max_states:
                result.stopped = f"max_states {config.max_states} reached"
                break
            if config.progress is not None:
                now = time.perf_counter()
                if now - last_report >= config.progress_interval:
                    last_report = now
                    config.progress({"states": states, "transitions": transitions,
                                     "depth": depth, "frontier": len(frontier),
                                     "seconds": now - start,
                                     "rate": states / (now - start)})
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    result.seconds = time.perf_counter() - start
    result.states = states
    result.transitions = transitions
    result.max_depth = max_depth
    result.terminal_states = terminal
    if sets is not None:
        result.config["por_reduced_states"] = sets.reduced + sets.singletons
        result.config["por_commuting_states"] = sets.singletons
    if found is not None:
        violation, path, _ = found
        result.result = "violation"
        result.property = violation.prop
        result.detail = violation.detail
        actions: list[tuple] = []
        while path is not None:
            action, path = path
            actions.append(action)
        actions.reverse()
        result.actions = actions
        result.counterexample = _texts(model, actions, violation) if keep_paths else []
        if keep_paths and violation.missing is not None:
            result.completion_actions, result.completion = _complete(
                model, result.actions, violation.missing)
    elif result.stopped is not None:
        result.result = "incomplete"
    return result


def _texts(model: Model, actions: list[tuple], violation: Violation) -> list[str]:
    """The step texts of a counterexample (its last step the violation, unless the
    violation is of a terminal state)."""
    texts = []
    state = model.initial_state
    for n, action in enumerate(actions):
        if n == len(actions) - 1 and violation.action is not None:
            texts.append(_text_of_failed(action, violation))
            break
        state, text = model.apply(state, action)
        texts.append(text)
    return texts


def _complete(model: Model, actions: list[tuple], missing: tuple[int, int, int],
              limit: int = 200_000) -> tuple[list[tuple], list[str]]:
    """A shortest continuation of ``actions`` (whose last step broke causal or FIFO
    order) in which the overtaken message is delivered too; ``([], [])`` if none is
    found within ``limit`` states."""
    i, s, n = missing
    model.lenient = True
    try:
        state = model.initial_state
        for action in actions:
            state, _ = model.apply(state, action)
        start = state
        seen = {start}
        frontier: deque[tuple[tuple, tuple | None]] = deque([(start, None)])
        while frontier and len(seen) < limit:
            state, path = frontier.popleft()
            if (s, n) in state[2][i][3]:
                steps: list[tuple[tuple, str]] = []
                while path is not None:
                    action, text, path = path
                    steps.append((action, text))
                steps.reverse()
                return [a for a, _ in steps], [t for _, t in steps]
            try:
                for action, nxt, text in model.successors(state):
                    if nxt not in seen:
                        seen.add(nxt)
                        frontier.append((nxt, (action, text, path)))
            except Violation:
                continue
        return [], []
    finally:
        model.lenient = False


def _text_of_failed(action: tuple, violation: Violation) -> str:
    if action[0] == "send":
        return f"{action[1]} sends to {', '.join(action[2])}: VIOLATION {violation.prop}"
    try:
        message = decode_received(action[3], action[2])
        what = (message.user_message.kind if isinstance(message.user_message, ControlMessage)
                else f"{message.message_id} ({message.kind})")
    except Exception:  # noqa: BLE001 - only for the text
        what = "a frame"
    return f"{action[2]} receives {what} from {action[1]}: VIOLATION {violation.prop}"


# -- counterexample -> traces -----------------------------------------------------------------
def replay(config: CheckConfig, actions: list[tuple]) -> tuple[list[str], list[dict[str, Any]]]:
    """Run ``actions`` from the initial state with tracing on: the step texts and the
    trace records (DESIGN.md schema). The violating last step is run too: a refused send
    is recorded as the application's ``send`` (never delivered), other violations keep
    the records the real nodes wrote up to the failure."""
    model = Model(config, trace=True)
    model.lenient = True  # run on past a causal / FIFO violation (the completion)
    state = model.initial_state
    texts = []
    for n, action in enumerate(actions):
        try:
            state, text = model.apply(state, action)
        except Violation as violation:
            if n != len(actions) - 1:
                raise
            texts.append(f"{describe_action(action)}: VIOLATION {violation.prop}")
            if violation.prop == "refused":
                _record_refused_send(model, state, action)
            break
        texts.append(text)
    return texts, model.records()


def _record_refused_send(model: Model, state: tuple, action: tuple) -> None:
    _, who, dests = action
    i = model.index[who]
    left, vc, sent, _ = state[2][i]
    own = list(vc)
    own[i] += 1
    model.tracer.emit({
        "ts": float(model.step), "process": who, "event": "send", "protocol":
        model.config.protocol, "msg": f"{who}#{len(sent) + 1}", "sender": who,
        "dests": list(dests), "vc": {n: c for n, c in zip(model.names, own, strict=True) if c},
        "refused": True,
    })


def write_counterexample(config: CheckConfig, result: CheckResult,
                         trace_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the counterexample of ``result`` (with its completion, if any) as
    ``<process>.jsonl`` trace files."""
    _, records = replay(config, result.actions + result.completion_actions)
    return write_trace_dir(records, trace_dir)
