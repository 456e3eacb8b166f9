"""Partial-order reduction for the model checker (``--por``): in each state, expand only a
*persistent set* of transitions - all the enabled transitions of a set of processes the
others can no longer send to (the actor rule, decided with the real objects), or one
arrival of a control kind the module declares commuting (hypothesis H, checked at run time
in every state where it is used: :class:`CommutationError`).

The method, the hypothesis and the soundness argument: docs/check_results.md,
"Partial-order reduction".
"""

from __future__ import annotations

from typing import Any

from groupcomm.check.config import ConfigError
from groupcomm.check.model import Model
from groupcomm.core.messages import ControlMessage
from groupcomm.wire.envelopes import decode_received


class CommutationError(ConfigError):
    """A control kind declared commuting (H) does not commute in a state the search
    visits: the declaration is wrong and the reduction would not be sound."""


def declared_commuting(model: Model) -> frozenset[str]:
    """The control kinds ``model``'s module declares commuting (its exact class's
    :attr:`~groupcomm.core.causality.CausalityModule.commuting_controls`); none on a FIFO
    network, where H fails (docs/check_results.md)."""
    if model.config.fifo_network:
        return frozenset()
    return frozenset(type(model.module).__dict__.get("commuting_controls", frozenset()))


class PersistentSets:
    """Chooses the persistent set of each state of ``model`` (as the set of processes
    whose enabled transitions form it) and memoizes what it learns."""

    #: bound on the local states one :meth:`_emissions` explores before giving up
    EMISSION_LIMIT = 4096
    #: the memo of emission nodes (a pure cache, about one entry per state: the largest
    #: table of a compact cykas search) is emptied past this many entries
    MEMO_LIMIT = 2_000_000

    def __init__(self, model: Model, commuting: frozenset[str] | None = None) -> None:
        self.model = model
        #: declared commuting control kinds (``None``: what the module declares)
        self.commuting = declared_commuting(model) if commuting is None else commuting
        #: frame -> its control kind if declared commuting, else None
        self._kinds: dict[bytes, str | None] = {}
        #: (process, snapshot id, frame, kind, arg) of diamonds already closed
        self._closed: set[tuple] = set()
        #: how many states were expanded with a single commuting control arrival
        self.singletons = 0
        n = self.n = model.n
        #: candidate sets S (bit sets), smallest first, with their members and those of R
        self._subsets = [
            (b, [i for i in range(n) if b >> i & 1], [i for i in range(n) if not b >> i & 1])
            for b in sorted(range(1, (1 << n) - 1), key=lambda b: bin(b).count("1"))
        ]
        self._actor_sets = {b: frozenset(m) for b, m, _ in self._subsets}
        #: (process, snapshot id, inputs) -> what it may emit: see :meth:`actors`
        self._targets: dict[tuple, tuple[int, int, tuple]] = {}
        self._quiets: dict[tuple, tuple | None] = {}
        self._inerts: dict[tuple, bool] = {}
        self._emitted: dict[tuple, frozenset[tuple[int, bytes]] | None] = {}
        #: frame sets and emission sets of the memo, one copy each (memory)
        self._shared: dict[frozenset, frozenset] = {}
        self._budget = 0
        #: how many states were expanded with a persistent set smaller than everything
        self.reduced = 0

    def trim(self, limit: int) -> None:
        """Empty the memos (pure caches: only time is lost) once they hold more than
        ``limit`` entries together."""
        memos = (self._closed, self._targets, self._quiets, self._inerts, self._emitted)
        if sum(len(memo) for memo in memos) > limit:
            for memo in (*memos, self._shared):
                memo.clear()

    def choose(self, state: tuple) -> frozenset[int] | tuple[str, str, bytes] | None:
        """The persistent set of ``state``: a declared-commuting control arrival
        ``(source, dest, frame)`` that delivers nothing (the first in network order), else
        the processes of :meth:`actors`, else None (expand everything)."""
        if self.commuting:
            arrival = self._commuting_arrival(state)
            if arrival is not None:
                self.singletons += 1
                return arrival
        return self.actors(state)

    def _kind(self, frame: bytes, dest: str) -> str | None:
        kinds = self._kinds
        if frame in kinds:
            return kinds[frame]
        try:
            user = decode_received(frame, dest).user_message
        except Exception:  # noqa: BLE001 - a frame the codec refuses is no candidate
            user = None
        kind = user.kind if isinstance(user, ControlMessage) and \
            user.kind in self.commuting else None
        kinds[frame] = kind
        return kind

    def _commuting_arrival(self, state: tuple) -> tuple[str, str, bytes] | None:
        model = self.model
        snaps, network, truth = state
        index = model.index
        kind_of = self._kind
        fifo = model.config.fifo_network
        heads: Any = network if not fifo else [(d, s, queue[0]) for (s, d), queue in network]
        for d, s, f in heads:
            if kind_of(f, d) is None:
                continue
            i = index[d]
            sid = snaps[i]
            local = model.local_step(i, sid, "arrive", f)
            if local[0] != "ok" or local[4]:
                continue  # it breaks a property or delivers: expand as usual
            # H in this state: close the diamond with every other transition of d
            left = truth[i][0]
            if left:
                for dests in model.send_options(state, i, left):
                    self._close(i, sid, f, "send", dests)
            if not fifo:
                others: Any = (f2 for d2, _, f2 in network if d2 == d and f2 != f)
            else:
                others = (queue[0] for (_, d2), queue in network
                          if d2 == d and queue[0] != f)
            for f2 in others:
                self._close(i, sid, f, "arrive", f2)
            return (s, d, f)
        return None

    def _close(self, i: int, sid: int, frame: bytes, kind: str, arg: Any) -> None:
        """Check that the arrival of ``frame`` at process ``i`` (interned snapshot
        ``sid``; it delivers nothing) commutes with input ``(kind, arg)``; raises
        :class:`CommutationError` if not. Memoized per diamond."""
        key = (i, sid, frame, kind, arg)
        if key in self._closed:
            return
        model = self.model
        local = model.local_step
        a = local(i, sid, "arrive", frame)
        x = local(i, sid, kind, arg)
        ax = local(i, a[1], kind, arg)
        why = ""
        if x[0] != "ok":
            # x breaks a property: it must break the same one after the arrival
            if not (ax[0] == "violation" and ax[1] == x[1]):
                why = "the other step's outcome changes"
        else:
            xa = local(i, x[1], "arrive", frame)
            if ax[0] != "ok" or xa[0] != "ok":
                why = "one order breaks a property"
            elif xa[4]:
                why = "the arrival delivers after the other step"
            elif ax[1] != xa[1]:
                why = "the two orders end in different states"
            elif ax[3] != x[3] or ax[4] != x[4]:
                why = "the other step sends or delivers differently"
            elif not _same_frames(a[2] + ax[2], x[2] + xa[2], model.config.fifo_network):
                why = "the two orders emit different frames"
        if why:
            other = f"a send to {', '.join(arg)}" if kind == "send" else "another arrival"
            raise CommutationError(
                f"--por: the {model.config.protocol} module declares that a "
                f"{self._kind(frame, model.names[i])!r} arrival commutes with every other "
                f"step of its receiver, but at {model.names[i]} it does not commute with "
                f"{other}: {why}")
        self._closed.add(key)

    def actors(self, state: tuple) -> frozenset[int] | None:
        """The processes whose enabled transitions form the persistent set of
        ``state``, or None: expand every enabled transition."""
        model = self.model
        snaps, network, truth = state
        n = self.n
        idle = 0  # bit set of processes with no application sends left
        counts = [0] * n
        workload = model.config.workload is not None
        for i, entry in enumerate(truth):
            if entry[0]:
                counts[i] = 1 if workload else len(model.choices[i])
            else:
                idle |= 1 << i
        if not idle:
            return None
        inputs: list[list[bytes]] = [[] for _ in range(n)]
        index = model.index
        if not model.config.fifo_network:
            for d, _, f in network:  # sorted: each process's inputs in a canonical order
                k = index[d]
                counts[k] += 1
                inputs[k].append(f)
        else:
            for (_, d), queue in network:
                k = index[d]
                counts[k] += 1  # the head of each channel may arrive
                inputs[k].extend(queue)
        if sum(1 for c in counts if c) < 2:
            return None  # one process acts: its transitions are all there is
        # per idle process, when needed: what it may emit acting alone on the frames in
        # flight to it, as :meth:`_split` gives it (-1: anything)
        targets: list[tuple[int, int, tuple] | None] = [None] * n
        memo = self._targets
        total = sum(counts)
        full = (1 << n) - 1
        # candidates S whose complement R is idle, by the size of T (smallest first):
        # the first one that qualifies is the best
        candidates = []
        for position, (subset, members, rest_members) in enumerate(self._subsets):
            if (full & ~subset) & ~idle:
                continue  # a member of R has sends left: it may send to S
            size = sum(counts[i] for i in members)
            if 0 < size < total:
                # ties: fewer processes first, then in name order
                candidates.append((size, position, subset, rest_members))
        candidates.sort()
        for _, _, subset, rest_members in candidates:
            rest = full & ~subset
            internal = False
            soft: list[tuple[int, bytes]] = []
            for r in rest_members:
                found = targets[r]
                if found is None:
                    if not inputs[r]:
                        found = (0, 0, ())
                    else:
                        key = (r, snaps[r], tuple(inputs[r]))
                        found = memo.get(key)
                        if found is None:
                            emitted = self._emissions(r, snaps[r], frozenset(inputs[r]))
                            found = (-1, -1, ()) if emitted is None else self._split(emitted)
                            memo[key] = found
                    targets[r] = found
                hard, reach, controls = found
                if hard & subset:
                    break
                if reach & rest:
                    internal = True
                if reach & subset:
                    soft.extend(controls)
            else:
                # R's members may feed each other: the fixpoint over their inputs
                if internal:
                    more = self._quiet(rest, subset, snaps, inputs)
                    if more is None:
                        continue
                    soft.extend(more)
                if soft and not self._inert_at(subset, snaps, soft):
                    continue
                self.reduced += 1
                return self._actor_sets[subset]
        return None

    def _split(self, emitted: frozenset[tuple[int, bytes]]) -> tuple[int, int, tuple]:
        """``(hard, reach, controls)`` of a set of emissions: the bit set reached by
        frames that are not declared-commuting controls, the bit set reached by all, and
        the declared-commuting ``(dest, frame)`` s."""
        names = self.model.names
        kind_of = self._kind
        hard = reach = 0
        controls = []
        for k, frame in emitted:
            reach |= 1 << k
            if self.commuting and kind_of(frame, names[k]) is not None:
                controls.append((k, frame))
            else:
                hard |= 1 << k
        return hard, reach, tuple(sorted(controls))

    def _inert_at(self, subset: int, snaps: tuple, controls: list[tuple[int, bytes]]) -> bool:
        """Whether every member k of ``subset``, receiving any subset of the declared-
        commuting controls addressed to it in ``controls``, in any order and nothing
        else, breaks nothing, delivers nothing and emits nothing."""
        per: dict[int, set[bytes]] = {}
        for k, frame in controls:
            if subset >> k & 1:
                per.setdefault(k, set()).add(frame)
        return all(self._inert(k, snaps[k], frozenset(frames)) for k, frames in per.items())

    def _inert(self, i: int, sid: int, frames: frozenset[bytes]) -> bool:
        key = (i, sid, frames)
        found = self._inerts.get(key)
        if found is None:
            found = True
            local = self.model.local_step
            for frame in frames:
                step = local(i, sid, "arrive", frame)
                if step[0] != "ok" or step[2] or step[4] or (
                        len(frames) > 1 and not self._inert(i, step[1], frames - {frame})):
                    found = False
                    break
            self._inerts[key] = found
        return found

    def _quiet(self, rest: int, subset: int, snaps: tuple, inputs: list[list[bytes]]
               ) -> tuple[tuple[int, bytes], ...] | None:
        """The ``(dest, frame)`` of the declared-commuting controls the processes of ``rest``
        (none with sends left), acting alone on the frames in flight to them and on what
        they emit to each other, may emit to ``subset``; None if they may emit anything else."""
        members = [i for i in range(self.n) if rest >> i & 1]
        key = (rest, subset, tuple((snaps[i], tuple(inputs[i])) for i in members))
        if key not in self._quiets:
            self._quiets[key] = self._fixpoint(rest, subset, members, snaps, inputs)
        return self._quiets[key]

    def _fixpoint(self, rest: int, subset: int, members: list[int], snaps: tuple,
                  inputs: list[list[bytes]]) -> tuple[tuple[int, bytes], ...] | None:
        got = {i: set(inputs[i]) for i in members}
        soft: set[tuple[int, bytes]] = set()
        changed = True
        while changed:
            changed = False
            for i in members:
                emitted = self._emissions(i, snaps[i], frozenset(got[i]))
                if emitted is None:
                    return None
                hard, _, controls = self._split(emitted)
                if hard & subset:
                    return None  # a frame to S that is not a declared-commuting control
                soft.update(control for control in controls if subset >> control[0] & 1)
                for k, frame in emitted:  # (R and S make up every process)
                    if rest >> k & 1 and frame not in got[k]:
                        got[k].add(frame)
                        changed = True
        return tuple(sorted(soft))

    def _emissions(self, i: int, snap_id: int, frames: frozenset[bytes]
                   ) -> frozenset[tuple[int, bytes]] | None:
        """Every ``(dest, frame)`` process ``i`` can emit from interned snapshot
        ``snap_id`` receiving any subset of ``frames`` in any order (and nothing else; a
        step that breaks a property ends that order), with the model's memoized local
        steps; None ("anything") past :attr:`EMISSION_LIMIT` new nodes. Memoized per
        node: ``E(s, F) = union over f in F of (emitted by s on f) | E(s after f, F - f)``."""
        key = (i, snap_id, frames)
        found = self._emitted.get(key, False)
        if found is not False:
            return found
        if len(self._emitted) > self.MEMO_LIMIT:
            self._emitted.clear()
            self._shared.clear()
        self._budget = self.EMISSION_LIMIT
        try:
            return self._emit(i, snap_id, frames)
        except _TooLarge:
            self._emitted[key] = None
            return None

    def _emit(self, i: int, snap_id: int, frames: frozenset[bytes]
              ) -> frozenset[tuple[int, bytes]]:
        key = (i, snap_id, frames)
        found = self._emitted.get(key)
        if found is not None:
            return found
        self._budget -= 1
        if self._budget < 0:
            raise _TooLarge
        model = self.model
        index = model.index
        shared = self._shared
        out: set[tuple[int, bytes]] = set()
        for frame in frames:
            local = model.local_step(i, snap_id, "arrive", frame)
            if local[0] != "ok":
                continue
            for _, dest, emitted in local[2]:
                out.add((index[dest], emitted))
            if len(frames) > 1:
                rest = frames - {frame}
                out |= self._emit(i, local[1], shared.setdefault(rest, rest))
        result = frozenset(out)
        result = shared.setdefault(result, result)  # equal sets stored once (memory)
        self._emitted[key] = result
        return result


def _same_frames(first: tuple, second: tuple, fifo: bool) -> bool:
    """Whether two sequences of emitted ``(source, dest, frame)`` put the same frames in
    the network: as multisets, or on a FIFO network in the same order per channel."""
    if not fifo:
        return sorted(first) == sorted(second)
    channels: dict[tuple[str, str], list[bytes]] = {}
    for s, d, f in first:
        channels.setdefault((s, d), []).append(f)
    for s, d, f in second:
        queue = channels.get((s, d))
        if not queue or queue[0] != f:
            return False
        queue.pop(0)
    return not any(channels.values())


class _TooLarge(Exception):
    """The emission analysis went past its bound."""
