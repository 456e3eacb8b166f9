"""Symmetry reduction for the model checker (``--symmetry``): states that differ only in
the names of the processes (and in the numbering of control messages) are explored once,
under a canonical key (:meth:`Symmetry.key`). What is renamed, the group of permutations
used and why it is sound: docs/check_results.md, "Symmetry reduction"; the values
themselves are renamed by :mod:`groupcomm.check.renaming`.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

from groupcomm.check.model import Model
from groupcomm.check.renaming import Renaming, SymmetryError, declared_headers, supported_modules
from groupcomm.check.state import exact


class Symmetry:
    """The symmetry group of a model's configuration and the canonical key of states."""

    def __init__(self, model: Model) -> None:
        self.model = model
        names = model.names
        self.n = n = len(names)
        module = model.module
        headers = declared_headers(module)
        if headers is None:
            raise SymmetryError(
                f"--symmetry supports the modules that declare how to rename their headers "
                f"and snapshots ({', '.join(supported_modules())}), not "
                f"{model.config.protocol!r}")
        self.headers = headers
        if model.config.bypass_refusal:
            raise SymmetryError("--symmetry cannot be combined with --bypass-refusal")
        self.order = model.index
        self.fifo = model.config.fifo_network
        self.perms: list[tuple[int, ...]] = []
        self.inverses: list[tuple[int, ...]] = []
        self._renamings: list[Renaming] = []
        # per permutation: per process: snapshot id -> key id; frames; truth entries
        self._snap_keys: list[list[dict[int, int]]] = []
        self._frames: list[dict[Any, Any]] = []
        self._truths: list[list[dict[tuple, tuple]]] = []
        self._key_ids: dict[Any, int] = {}
        #: renamed truth entries and network entries -> small ids (the key is a tuple of
        #: ints: cheap to hash and compare; equal values get equal ids, so the minimum
        #: over a class's candidates is still one canonical key)
        self._truth_ids: dict[tuple, int] = {}
        self._hash_truths = model.config.reduce
        self._entry_ids: dict[Any, int] = {}
        #: truth entry (by identity) -> its part of the signature
        self._sigs: dict[int, tuple] = {}
        #: objects whose id() keys a memo (kept alive so that no id is reused)
        self._alive: list[Any] = []
        #: why permutations were dropped (for the user)
        self.notes: list[str] = []
        candidates = list(permutations(range(n)))  # the identity first
        self._install(candidates[0])
        initial_key = self._candidate(0, model.initial_state)
        choices_dropped = state_dropped = 0
        for perm in candidates[1:]:
            if not self._fixes_choices(perm):
                choices_dropped += 1
                continue
            index = self._install(perm)
            if self._candidate(index, model.initial_state) != initial_key:
                self._uninstall()
                state_dropped += 1
        if choices_dropped:
            why = ("the workload gives processes different sends" if model.config.workload
                   is not None else "multicasts are split into unicasts in name order")
            self.notes.append(f"{choices_dropped} permutation(s) dropped: {why}")
        if state_dropped:
            self.notes.append(f"{state_dropped} permutation(s) dropped: the initial state "
                              "is not symmetric (the module's join messages depend on the "
                              "join order)")
        self.size = len(self.perms)
        self.full = self.size == len(candidates)
        self._by_inverse = {inverse: index for index, inverse in enumerate(self.inverses)}

    def _install(self, perm: tuple[int, ...]) -> int:
        names = self.model.names
        mapping = {names[i]: names[perm[i]] for i in range(self.n)}
        self.perms.append(perm)
        self.inverses.append(_inverse(perm))
        self._renamings.append(Renaming(mapping, self.order, True, self.headers))
        self._snap_keys.append([{} for _ in range(self.n)])
        self._frames.append({})
        self._truths.append([{} for _ in range(self.n)])
        return len(self.perms) - 1

    def _uninstall(self) -> None:
        for table in (self.perms, self.inverses, self._renamings, self._snap_keys,
                      self._frames, self._truths):
            table.pop()

    def _fixes_choices(self, perm: tuple[int, ...]) -> bool:
        model = self.model
        names = model.names
        ordered = model.module.unicast_events  # the split order of a multicast matters
        for i in range(self.n):
            mine = [tuple(names[perm[self.order[d]]] for d in dests)
                    for dests in model.choices[i]]
            theirs = list(model.choices[perm[i]])
            if not ordered:
                mine = [tuple(sorted(d)) for d in mine]
                theirs = [tuple(sorted(d)) for d in theirs]
            if model.config.workload is None:
                mine, theirs = sorted(mine), sorted(theirs)  # a set of options
            if mine != theirs:
                return False
        return True

    def _snapshot(self, renaming: Renaming, i: int, snap: tuple, *,
                  zero_controls: bool) -> tuple:
        """The snapshot of process ``i`` renamed, restored into the real node of its new
        name and snapshotted again (the module re-applies its canonical order)."""
        model = self.model
        clock, next_id, _members, managers = renaming.value(snap)
        node = model.nodes[self.order[renaming.name(model.names[i])]]
        node.restore((clock, next_id, tuple(model.names), managers))
        if zero_controls or renaming.relabel is not None:
            count = 0 if zero_controls else renaming.relabel[model.names[i]][0]
            for manager in node._shared.values():
                if hasattr(manager, "control_count"):
                    manager.control_count = count
        return node.snapshot()

    def _snap_key(self, index: int, i: int, snap_id: int) -> int:
        table = self._snap_keys[index][i]
        found = table.get(snap_id)
        if found is None:
            snap = self._snapshot(self._renamings[index], i, self.model.snapshots[i][snap_id],
                                  zero_controls=True)
            value = (self.perms[index][i], exact(snap))
            found = self._key_ids.get(value)
            if found is None:
                found = len(self._key_ids)
                self._key_ids[self.model.pool.share(value)] = found
            table[snap_id] = found
        return found

    def _truth(self, index: int, i: int, entry: tuple) -> int:
        """The id of truth entry ``entry`` of process ``i`` renamed by permutation
        ``index`` (memoized by the entry's identity: the model shares equal entries)."""
        table = self._truths[index][i]
        found = table.get(id(entry))
        if found is None:
            renamed = self._rename_truth(self.perms[index], self._renamings[index], entry)
            if self._hash_truths:
                # hash-compacted search: the renamed entry's hash instead of an id, so no
                # table grows with every truth entry (a collision is as likely as one
                # of the state fingerprints)
                found = hash(renamed)
            else:
                found = self._truth_ids.setdefault(renamed, len(self._truth_ids))
            table[id(entry)] = found
            self._alive.append(entry)
        return found

    def _rename_truth(self, perm: tuple[int, ...], renaming: Renaming, entry: tuple) -> tuple:
        inverse = _inverse(perm)
        left, vc, sent, delivered = entry
        return (
            left,
            tuple(vc[inverse[j]] for j in range(self.n)),
            tuple((renaming.names(dests), tuple(c[inverse[j]] for j in range(self.n)))
                  for dests, c in sent),
            frozenset((perm[j], k) for j, k in delivered),
        )

    def _candidate(self, index: int, state: tuple) -> tuple:
        snaps, network, truth = state
        snap_tables = self._snap_keys[index]
        truth_tables = self._truths[index]
        out_snaps = []
        out_truth = []
        for i in self.inverses[index]:
            sid = snaps[i]
            found = snap_tables[i].get(sid)
            if found is None:
                found = self._snap_key(index, i, sid)
            out_snaps.append(found)
            entry = truth[i]
            renamed = truth_tables[i].get(id(entry))
            if renamed is None:
                renamed = self._truth(index, i, entry)
            out_truth.append(renamed)
        get = self._frames[index].get
        if not self.fifo:
            entries = [get(e) or self._frame_entry(index, e) for e in network]
        else:
            entries = [(get(pair) or self._frame_entry(index, pair),
                        tuple([get(f) or self._frame_entry(index, f) for f in queue]))
                       for pair, queue in network]
        entries.sort()
        # one flat tuple of ints: n snapshot keys, n truth ids, then the network
        return (*out_snaps, *out_truth, *entries)

    def _frame_entry(self, index: int, entry: Any) -> int:
        """Memo miss: a network entry ``(dest, source, frame)``, a FIFO channel
        ``(source, dest)`` or a frame, renamed and normalised, as an id (from 1: the
        memo is read with ``or``)."""
        renaming = self._renamings[index]
        if type(entry) is bytes:
            found: Any = renaming.frame(entry)
        elif len(entry) == 2:
            found = (renaming.name(entry[0]), renaming.name(entry[1]))
        else:
            d, s, f = entry
            found = (renaming.name(d), renaming.name(s), renaming.frame(f))
        ids = self._entry_ids
        number = ids.setdefault(found, len(ids) + 1)
        self._frames[index][entry] = number
        return number

    def signature(self, state: tuple) -> list[tuple]:
        """Per process, values that do not change under renaming (see :meth:`key`)."""
        _, network, truth = state
        order = self.order
        n = self.n
        out_frames = [0] * n
        in_frames = [0] * n
        if not self.fifo:
            for d, s, _ in network:
                out_frames[order[s]] += 1
                in_frames[order[d]] += 1
        else:
            for (s, d), queue in network:
                out_frames[order[s]] += len(queue)
                in_frames[order[d]] += len(queue)
        sigs = self._sigs
        out = []
        for i, entry in enumerate(truth):
            part = sigs.get(id(entry))
            if part is None:
                left, vc, sent, delivered = entry
                part = (left, len(sent), len(delivered), sum(vc))
                sigs[id(entry)] = part
                self._alive.append(entry)
            out.append((*part, out_frames[i], in_frames[i]))
        return out

    def trim(self, limit: int) -> None:
        """Empty the renaming memos (keyed by value or by identity, with the objects
        kept alive for the latter) once they hold more than ``limit`` entries; the id
        tables that keys are made of stay."""
        memos = [*self._frames, *(memo for table in self._truths for memo in table), self._sigs]
        if len(self._alive) + sum(len(memo) for memo in memos) > limit:
            for memo in memos:
                memo.clear()
            self._alive.clear()

    def tables(self) -> dict[str, Any]:
        """The id tables canonical keys are made of (ids are given in discovery order,
        so a resumed search needs the same ones; see :meth:`Model.tables`)."""
        return {"key_ids": self._key_ids, "truth_ids": self._truth_ids,
                "entry_ids": self._entry_ids, "snap_keys": self._snap_keys}

    def restore_tables(self, tables: dict[str, Any]) -> None:
        share = self.model.pool.share  # (after the model's tables: one pool for both)
        self._key_ids = {share(value): k for value, k in tables["key_ids"].items()}
        self._truth_ids = tables["truth_ids"]
        self._entry_ids = tables["entry_ids"]
        self._snap_keys = tables["snap_keys"]

    def key(self, state: tuple) -> tuple:
        """The canonical key: equal for two states iff one is a renaming of the other
        (up to control-message numbering), as far as the group allows. A flat tuple of
        ids (see :meth:`_candidate`)."""
        if self.size == 1:
            return self._candidate(0, state)
        sig = self.signature(state)
        if self.full and len(set(sig)) == self.n:
            # the whole symmetric group and distinct signatures: the one permutation
            # that sorts them
            order = sorted(range(self.n), key=sig.__getitem__)
            return self._candidate(self._by_inverse[tuple(order)], state)
        # the permutations that order the signatures least
        best_sig = None
        chosen = []
        for index, inverse in enumerate(self.inverses):
            seq = [sig[i] for i in inverse]
            if best_sig is None or seq < best_sig:
                best_sig = seq
                chosen = [index]
            elif seq == best_sig:
                chosen.append(index)
        return min(self._candidate(index, state) for index in chosen)

    def describe(self) -> str:
        text = (f"{self.size} permutations of the process names" if self.size > 1
                else "no process symmetry (control-message numbering still abstracted)")
        return text + (f"; {'; '.join(self.notes)}" if self.notes else "")


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes ``perm``."""
    return tuple(sorted(range(len(perm)), key=perm.__getitem__))
