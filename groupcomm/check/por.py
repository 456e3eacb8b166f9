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

**A second kind of persistent set: one declared-commuting control arrival.** The actor
rule above defers nothing while some process still has sends left, so it reduces little
in the first two thirds of a 3x3 run. A finer dependency inside one process is used
where the module *declares* it (its exact class's ``commuting_controls``, like the
symmetry declaration; today only mfss: ``ack``, on the unordered network only -
see :func:`declared_commuting`), in the manner of Promela's
``xr``/``xs`` channel assertions that Spin's partial-order reduction trusts and checks
at run time. The declaration is the hypothesis

  *H*: in every reachable state, if the arrival a of a control frame of a declared kind
  at p and another transition x of p are both enabled, then a delivers nothing, a and x
  lead to the same state in both orders, and x has the same outcome (successor or
  violated property) before and after a.

Under H, T = {a} is persistent whenever a is enabled and delivers nothing: along a path
that avoids a, a stays enabled (only a takes its frame; on a FIFO network other
transitions only append behind it), every transition of another actor is independent
of a (F2), and every transition of p is independent of a by H. The induction above then
applies unchanged to a search that uses either kind of persistent set in each state;
the truth (clocks, send records, delivered sets) is untouched by a, since a delivers
nothing and an arrival records no send, so the judge of x sees the same truth in both
orders. What an mfss ACK does is clear the awaited ACK and network-send the head of the
output buffer; an application send appends to the buffer's tail (or sends at once when
nothing is awaited: the same end state), a message arrival delivers and ACKs with the
control counter the ACK arrival does not touch - so H holds for mfss. It does *not* hold
for cykas (an ACK before an application send makes that send normal, after it eager;
a YCT and an eager arrival change MODE in an order-dependent way), which is why cykas
declares nothing.

**The actor rule with declared-commuting controls.** Under H the actor rule may also
let R emit declared-commuting controls to S, provided every member s of S, receiving
any subset of the controls R may emit to it, in any order, and nothing else, breaks
nothing, delivers nothing and emits nothing (:meth:`PersistentSets._inert`, with the
real objects; an mfss ACK is inert when its receiver has nothing buffered). Then T = the
enabled transitions of S is still persistent: along a path avoiding T the transitions
are R's (independent of T by F2) and arrivals at S of such controls (independent of
every member of T by H: they are enabled together, since T's transitions stay enabled),
and no other transition of S becomes enabled, because those arrivals emit nothing and R
emits nothing else to S. R's fixpoint still feeds R with everything R emits to R,
controls included. (Without the inertness condition this would be wrong: an ACK that
releases a buffered message to another member of S enables a transition of S outside
T; the 3x2 mfss search then lost 396 of its 1,804 terminal classes, which is how the
condition was found.)

**H is checked with the real filters, not trusted blindly**: in every state where the
search uses {a}, the diamond of a with every other enabled transition of p (each send
choice, each other arrival) is closed with the model's memoized local steps - same
interned snapshot, same emitted frames (as a multiset, or per FIFO channel in order),
same messages sent and delivered, same outcome - and a :class:`CommutationError` stops
the search if it is not (the declaration is wrong; a test declares cykas' ``ack`` and
``yct`` and is stopped). This run-time check covers the states the search visits; that H
also holds in the states it skips is the declaration's claim, which the tests check
exhaustively on full state graphs of small bounds (every reachable state, every pair).

The module runs past 500 lines because this docstring carries the method and its
soundness argument (about 120 lines); the code is about 420.
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
    :attr:`~groupcomm.core.causality.CausalityModule.commuting_controls`);
    none on a FIFO network (the declarations are for the unordered network: on FIFO
    links the order of two frames to the same peer is part of the state, and an mfss ACK
    that releases a message to q and a delivery that ACKs q put their frames on the same
    channel in the order of the two steps)."""
    if model.config.fifo_network:
        return frozenset()
    return frozenset(type(model.module).__dict__.get("commuting_controls", frozenset()))


class PersistentSets:
    """Chooses the persistent set of each state of ``model`` (as the set of processes
    whose enabled transitions form it) and memoizes what it learns."""

    #: bound on the local states one :meth:`_emissions` explores before giving up
    EMISSION_LIMIT = 4096
    #: the memo of emission nodes is emptied when it grows past this many entries (it
    #: is a pure cache; at 3x3 it grew by about one entry per state and was the largest
    #: table of a cykas search; emptying it at 3M cost the mfss 3x3 search ~10 % time;
    #: with the visited set compact it is the largest table left, hence 2M)
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
        #: (process, snapshot id, inputs) -> bit set of the processes it may emit to
        #: (-1: anything)
        self._targets: dict[tuple, int] = {}
        self._quiets: dict[tuple, tuple | None] = {}
        self._inerts: dict[tuple, bool] = {}
        self._emitted: dict[tuple, frozenset[tuple[int, bytes]] | None] = {}
        #: frame sets and emission sets of the memo, one copy each (memory)
        self._shared: dict[frozenset, frozenset] = {}
        self._budget = 0
        #: how many states were expanded with a persistent set smaller than everything
        self.reduced = 0

    def memo_entries(self) -> int:
        return (len(self._closed) + len(self._targets) + len(self._quiets)
                + len(self._inerts) + len(self._emitted))

    def trim(self, limit: int) -> None:
        """Empty the memos (pure caches: only time is lost) once they hold more than
        ``limit`` entries together."""
        if self.memo_entries() > limit:
            for memo in (self._closed, self._targets, self._quiets, self._inerts,
                         self._emitted, self._shared):
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
        if not fifo:
            heads: Any = ((d, s, f) for d, s, f in network)
        else:
            heads = ((d, s, queue[0]) for (s, d), queue in network)
        for d, s, f in heads:
            if kind_of(f, d) is None:
                continue
            i = index[d]
            sid = snaps[i]
            local = model.step_cache.get((i, sid, "arrive", f))
            if local is None:
                local = model.local_step(i, sid, "arrive", f)
            if local[0] != "ok" or local[4]:
                continue  # it breaks a property or delivers: expand as usual
            # H in this state: close the diamond with every other transition of d
            closed = self._closed
            left = truth[i][0]
            if left:
                choices = model.choices[i]
                options = ([choices[len(choices) - left]] if model.config.workload is not None
                           else choices)
                for dests in options:
                    if (i, sid, f, "send", dests) not in closed:
                        self._close(i, sid, f, "send", dests)
            if not fifo:
                others: Any = (f2 for d2, _, f2 in network if d2 == d and f2 != f)
            else:
                others = (queue[0] for (_, d2), queue in network
                          if d2 == d and queue[0] != f)
            for f2 in others:
                if (i, sid, f, "arrive", f2) not in closed:
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
        if x[0] != "ok":
            # x breaks a property: it must break the same one after the arrival
            if not (ax[0] == "violation" and ax[1] == x[1]):
                self._refute(i, frame, kind, arg, "the other step's outcome changes")
        else:
            xa = local(i, x[1], "arrive", frame)
            if ax[0] != "ok" or xa[0] != "ok":
                self._refute(i, frame, kind, arg, "one order breaks a property")
            if xa[4]:
                self._refute(i, frame, kind, arg, "the arrival delivers after the other step")
            if ax[1] != xa[1]:
                self._refute(i, frame, kind, arg, "the two orders end in different states")
            if ax[3] != x[3] or ax[4] != x[4]:
                self._refute(i, frame, kind, arg,
                             "the other step sends or delivers differently")
            if not _same_frames(a[2] + ax[2], x[2] + xa[2], model.config.fifo_network):
                self._refute(i, frame, kind, arg, "the two orders emit different frames")
        self._closed.add(key)

    def _refute(self, i: int, frame: bytes, kind: str, arg: Any, why: str) -> None:
        model = self.model
        what = self._kind(frame, model.names[i])
        other = (f"a send to {', '.join(arg)}" if kind == "send"
                 else "another arrival")
        raise CommutationError(
            f"--por: the {model.config.protocol} module declares that a {what!r} arrival "
            f"commutes with every other step of its receiver, but at {model.names[i]} it "
            f"does not commute with {other}: {why}")

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
        # acts alone on the frames in flight to it (None: not computed yet), as the bit
        # set reached by frames that are not declared-commuting controls (-1: anything)
        # and the declared-commuting controls it may emit
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
                best = subset
                break
        if best is None:
            return None
        self.reduced += 1
        return self._actor_sets[best]

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
        """Whether the processes of ``rest`` (bit set, none with sends left), acting alone
        on the frames in flight to them and on what they emit to each other, can never
        emit a frame to a member of ``subset`` other than a declared-commuting control:
        the ``(dest, frame)`` of those controls if so, None if not."""
        members = [i for i in range(self.n) if rest >> i & 1]
        key = (rest, subset, tuple((snaps[i], tuple(inputs[i])) for i in members))
        found = self._quiets.get(key, False)
        if found is False:
            found = self._fixpoint(rest, subset, members, snaps, inputs)
            self._quiets[key] = found
        return found

    def _fixpoint(self, rest: int, subset: int, members: list[int], snaps: tuple,
                  inputs: list[list[bytes]]) -> tuple[tuple[int, bytes], ...] | None:
        got = {i: set(inputs[i]) for i in members}
        names = self.model.names
        soft: set[tuple[int, bytes]] = set()
        changed = True
        while changed:
            changed = False
            for i in members:
                emitted = self._emissions(i, snaps[i], frozenset(got[i]))
                if emitted is None:
                    return None
                for k, frame in emitted:
                    if subset >> k & 1:
                        if self.commuting and self._kind(frame, names[k]) is not None:
                            soft.add((k, frame))  # a declared-commuting control (H)
                            continue
                        return None
                    if not rest >> k & 1:
                        return None
                    if frame not in got[k]:
                        got[k].add(frame)
                        changed = True
        return tuple(sorted(soft))

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
        cache = model.step_cache  # the model's memo of local steps
        index = model.index
        shared = self._shared
        out: set[tuple[int, bytes]] = set()
        for frame in frames:
            local = cache.get((i, snap_id, "arrive", frame))
            if local is None:
                local = model.local_step(i, snap_id, "arrive", frame)
            if local[0] != "ok":
                continue
            for _, dest, emitted in local[2]:
                out.add((index[dest], emitted))
            if len(frames) > 1:
                rest = frames - {frame}
                out |= self._emit(i, local[1], shared.setdefault(rest, rest))
        if out:
            result = frozenset(out)
            result = shared.setdefault(result, result)  # equal sets stored once (memory)
        else:
            result = _NOTHING
        self._emitted[key] = result
        return result


_NOTHING: frozenset[tuple[int, bytes]] = frozenset()


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
