"""Partial-order reduction for the model checker (``--por``): in each state, expand only
a *persistent set* of transitions - all enabled transitions of a set S of processes that
the other processes can no longer send to - instead of every enabled transition.

**Transitions and their actors.** A transition is ``("send", p, dests)`` (actor p) or
``("arrive", s, p, frame)`` (actor p, the destination). Three facts of the model
(:class:`~groupcomm.check.model.Model`):

* *F1, locality.* A transition of p reads and writes only p's node snapshot and p's
  ground-truth entry, removes one frame addressed to p from the network and adds the
  frames p emits. It *reads* one thing of other processes: the judge of a delivery at p
  looks at the send records of every process, but only at messages in the causal past
  of the delivered message (the loop stops at the first send record whose own entry
  exceeds the delivered message's clock), and those were all sent before that message.
* *F2, independence of different actors.* If transitions t (actor p) and u (actor q !=
  p) are both enabled in a state, executing one does not disable the other (u cannot
  remove a frame addressed to p; on a FIFO network it can only append to the tail of a
  channel into p, whose head t takes), both orders reach the same state (the network
  is a multiset or a tuple of channels; each process's part is written by its own
  actor only), and each has the same outcome - successor or violated property - in
  both orders: by F1, u changes nothing t reads, except that a send by q appends a send
  record whose own entry is larger than any q-entry of the messages t may deliver
  (those messages were sent before; the records they could depend on are unchanged).
* *F3, enabling.* A transition of p that is not enabled becomes enabled only by a
  transition of p itself (its next send, the next frame of a FIFO channel into p) or by
  another process emitting a frame addressed to p.

**The persistent set.** Let R be the complement of S. If no member of R has application
sends left (their destinations may include S) and R, acting on its own, can never emit
a frame addressed to S, then T = the enabled transitions of S is *persistent*: along
any path from the state that avoids T, by F3 no transition of S can become enabled (the
first one would need an emission to S by R first, or be enabled now and so be in T), so
every transition on the path belongs to R and is independent of every member of T (F2).
Whether R can emit to S is over-approximated **with the real objects**, no protocol
knowledge: every member r of R, from its current snapshot, is run on every subset, in
every order, of the frames it could receive - those in flight to r and, to a fixpoint,
those the other members of R could emit to r - using the checker's memoized local steps
(:meth:`PersistentSets._emissions`; a step that breaks a property ends that order, as
the search would stop there; beyond a bound the answer is "anything"). This contains
every sequence of receipts r can really perform before S acts. The smallest qualifying
T is chosen; if none is smaller than the whole enabled set, everything is expanded.

**What is preserved.** The state space is finite and acyclic (a send uses up a budget;
an arrival consumes a frame and every emitted frame carries a fresh id from a counter in
the snapshot). Then a search that expands a persistent set in every state it visits
(the standard selective search; Godefroid 1996, ch. 4 and 6):

* reaches every terminal state of the full search: so the liveness verdict and the
  number of terminal states are unchanged;
* reaches, for every violating transition t reachable in the full search, a state in
  which the same transition (same actor and input) violates the same property: by
  induction on (length of the path w to t, longest path from the state), if some
  transition of w·t is in T, the first such one commutes to the front (F2, persistence)
  and the path gets shorter; otherwise any u in T commutes with all of w·t, so u·w·t
  reaches t with an equal path length from a state with a shorter longest path.

So the verdict ("ok" or "violation") is unchanged and every violated property stays
reachable; what is not kept is the *shortest* counterexample (breadth-first search over
the reduced graph finds a shortest path in it) and, when several properties fail, which
one a search meets first. The argument holds per visited state whatever the search
order and state matching (every visited state is expanded), so it combines with
``--reduce`` (hash compaction) and with ``--symmetry``: the representative the search
keeps is bisimilar to the state it stands for, with the same path lengths.
``tests/test_check.py`` compares verdicts, properties and the exact sets of terminal
states with the plain search for every protocol, known-bad ones included, on small
bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groupcomm.check.model import Model


class PersistentSets:
    """Chooses the persistent set of each state of ``model`` (as the set of processes
    whose enabled transitions form it) and memoizes what it learns."""

    #: bound on the local states one :meth:`_emissions` explores before giving up
    EMISSION_LIMIT = 4096

    def __init__(self, model: Model) -> None:
        self.model = model
        n = self.n = model.n
        #: candidate sets S (bit sets), smallest first, with their members and those of R
        self._subsets = [
            (b, [i for i in range(n) if b >> i & 1], [i for i in range(n) if not b >> i & 1])
            for b in sorted(range(1, (1 << n) - 1), key=lambda b: bin(b).count("1"))
        ]
        self._actor_sets = {b: frozenset(m) for b, m, _ in self._subsets}
        #: (process, snapshot id, inputs) -> bit set of the processes it may emit to
        #: (-1: anything)
        self._targets: dict[tuple, int] = {}
        self._quiets: dict[tuple, bool] = {}
        self._emitted: dict[tuple, frozenset[tuple[int, bytes]] | None] = {}
        self._budget = 0
        #: how many states were expanded with a persistent set smaller than everything
        self.reduced = 0

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
        # per idle process, computed when needed: the processes it may emit to when it
        # acts alone on the frames in flight to it (None: not computed yet)
        targets: list[int | None] = [None] * n
        memo = self._targets
        total = sum(counts)
        full = (1 << n) - 1
        # candidates S whose complement R is idle, by the size of T (smallest first):
        # the first one that qualifies is the best
        candidates = []
        for position, (subset, members, rest_members) in enumerate(self._subsets):
            if (full & ~subset) & ~idle:
                continue  # a member of R has sends left: it may send to S
            size = 0
            for i in members:
                size += counts[i]
            if 0 < size < total:
                # ties: fewer processes first, then in name order
                candidates.append((size, position, subset, rest_members))
        candidates.sort()
        best: int | None = None
        for _, _, subset, rest_members in candidates:
            rest = full & ~subset
            internal = False
            for r in rest_members:
                t = targets[r]
                if t is None:
                    if not inputs[r]:
                        t = 0
                    else:
                        key = (r, snaps[r], tuple(inputs[r]))
                        t = memo.get(key)
                        if t is None:
                            emitted = self._emissions(r, snaps[r], frozenset(inputs[r]))
                            t = -1 if emitted is None else sum({1 << k for k, _ in emitted})
                            memo[key] = t
                    targets[r] = t
                if t & subset:
                    break
                if t & rest:
                    internal = True
            else:
                # R's members may feed each other: the fixpoint over their inputs
                if internal and not self._quiet(rest, subset, snaps, inputs):
                    continue
                best = subset
                break
        if best is None:
            return None
        self.reduced += 1
        return self._actor_sets[best]

    def _quiet(self, rest: int, subset: int, snaps: tuple, inputs: list[list[bytes]]) -> bool:
        """Whether the processes of ``rest`` (bit set, none with sends left), acting alone
        on the frames in flight to them and on what they emit to each other, can never
        emit a frame to a member of ``subset``."""
        members = [i for i in range(self.n) if rest >> i & 1]
        key = (rest, subset, tuple((snaps[i], tuple(inputs[i])) for i in members))
        found = self._quiets.get(key)
        if found is None:
            found = self._fixpoint(rest, subset, members, snaps, inputs)
            self._quiets[key] = found
        return found

    def _fixpoint(self, rest: int, subset: int, members: list[int], snaps: tuple,
                  inputs: list[list[bytes]]) -> bool:
        got = {i: set(inputs[i]) for i in members}
        changed = True
        while changed:
            changed = False
            for i in members:
                emitted = self._emissions(i, snaps[i], frozenset(got[i]))
                if emitted is None:
                    return False
                for k, frame in emitted:
                    if subset >> k & 1 or not rest >> k & 1:
                        return False
                    if frame not in got[k]:
                        got[k].add(frame)
                        changed = True
        return True

    def _emissions(self, i: int, snap_id: int, frames: frozenset[bytes]
                   ) -> frozenset[tuple[int, bytes]] | None:
        """Every ``(dest, frame)`` process ``i`` can emit from interned snapshot
        ``snap_id`` when it receives any subset of ``frames`` in any order (and nothing
        else), found with the real objects (the model's memoized local steps); a step
        that breaks a property ends that order. None if more than
        :attr:`EMISSION_LIMIT` new ``(snapshot, frames left)`` nodes would be needed
        (read as "anything"). Memoized per node, so states share their sub-problems:
        ``E(s, F) = union over f in F of (emitted by s on f) | E(s after f, F - {f})``."""
        key = (i, snap_id, frames)
        found = self._emitted.get(key, False)
        if found is not False:
            return found
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
        cache = model._cache  # noqa: SLF001 - the model's memo of local steps
        index = model.index
        out: set[tuple[int, bytes]] = set()
        for frame in frames:
            local = cache.get((i, snap_id, "arrive", frame))
            if local is None:
                local = model._local(i, snap_id, "arrive", frame)  # noqa: SLF001
            if local[0] != "ok":
                continue
            for _, dest, emitted in local[2]:
                out.add((index[dest], emitted))
            if len(frames) > 1:
                out |= self._emit(i, local[1], frames - {frame})
        result = frozenset(out) if out else _NOTHING
        self._emitted[key] = result
        return result


_NOTHING: frozenset[tuple[int, bytes]] = frozenset()


class _TooLarge(Exception):
    """The emission analysis went past its bound."""
