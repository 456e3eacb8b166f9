"""The breadth-first search level by level on compact storage (``reduce`` with
``compact``; :mod:`groupcomm.check.storage`): each level's states are unpacked and
expanded one by one, their successors' fingerprints asked of the visited set a batch at
a time, and the new ones packed into the next level. Counts are those of the
one-state-at-a-time search; only memory and the order inside a level differ.
"""

from __future__ import annotations

import os
import resource
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from groupcomm.check.config import CheckConfig
from groupcomm.check.model import Model
from groupcomm.check.por import PersistentSets
from groupcomm.check.report import CheckResult
from groupcomm.check.state import Violation
from groupcomm.check.storage import (
    FingerprintSet,
    Frontier,
    collision_probability,
    load_checkpoint,
    save_checkpoint,
)
from groupcomm.check.symmetry import Symmetry

#: successors asked of the visited set at once
BATCH = 65_536
#: the frontier's share of the memory budget before it goes to disk
FRONTIER_SHARE = 0.5
MASK = 0xFFFF_FFFF_FFFF_FFFF
#: the counts a checkpoint keeps and a resumed search goes on from
COUNTERS = ("states", "transitions", "terminal", "max_depth")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class LevelSearch:
    """One compact breadth-first search; :meth:`run` fills a :class:`CheckResult`."""

    def __init__(self, model: Model, config: CheckConfig, symmetry: Symmetry | None,
                 sets: PersistentSets | None) -> None:
        self.model = model
        self.config = config
        self.symmetry = symmetry
        self.sets = sets
        self.canon = symmetry.key if symmetry is not None else None
        self.persistent = sets.choose if sets is not None else None
        self.frontier_budget = int((config.memory_budget_gb or 4.0) * 2 ** 30 * FRONTIER_SHARE)
        self.spill_dir = config.spill_dir
        self.visited = FingerprintSet()
        self.known: set[int] = set()
        self.states = self.transitions = self.terminal = self.max_depth = 0
        self.level = 0
        self.found: Violation | None = None
        self.stopped: str | None = None
        #: seconds spent before the checkpoint this search resumed from
        self.earlier_seconds = 0.0
        self.checkpoints = 0
        self._last_checkpoint = self._start = self._last_report = self._level_start = 0.0
        self._level_skipped = 0  # states of this level expanded before a checkpoint
        self._states_at_start = 0

    def run(self, result: CheckResult) -> None:
        model = self.model
        start = self._start = self._last_report = time.perf_counter()
        resumed = self._resume(result)
        following: Frontier | None = None
        done = 0
        if resumed is None:
            initial = model.initial_state
            first = self.canon(initial) if self.canon is not None else initial
            self.visited.add_new(np.array([hash(first) & MASK], dtype=np.uint64))
            self.states = 1
            frontier = Frontier(self.frontier_budget, self.spill_dir)
            frontier.append(model.pack(initial))
        else:
            frontier, following, done = resumed
        self._states_at_start = self.states
        self._last_checkpoint = time.perf_counter()
        try:
            while len(frontier) and self.found is None and self.stopped is None:
                frontier = self._expand_level(frontier, following, done)
                following, done = None, 0
                if (self.found is None and self.stopped is None and len(frontier)
                        and self._checkpoint_due()):
                    self._checkpoint(frontier)
        except KeyboardInterrupt:
            self.stopped = "interrupted"
        finally:
            frontier.close()
            if following is not None:
                following.close()
        result.seconds = time.perf_counter() - start + self.earlier_seconds
        result.config["checkpoints_written"] = self.checkpoints
        result.config["visited_bytes"] = self.visited.nbytes
        result.states, result.transitions, result.terminal_states, result.max_depth = (
            getattr(self, name) for name in COUNTERS)
        result.config["collision_probability"] = collision_probability(self.states)
        result.stopped = self.stopped

    def _identity(self) -> dict[str, Any]:
        config = self.config
        seed = os.environ.get("PYTHONHASHSEED")
        if seed is None or seed == "random":
            raise ValueError("checkpoints need a fixed PYTHONHASHSEED (state fingerprints "
                             "are Python hashes; groupcomm check sets it)")
        return {"protocol": config.protocol, "processes": config.processes,
                "messages": config.messages, "symmetry": config.symmetry,
                "por": config.por, "workload": config.workload,
                "destinations": config.destinations, "join": list(config.late),
                "leave": list(config.leaving), "bypass_refusal": config.bypass_refusal,
                "hash_seed": seed}

    def _checkpoint_due(self) -> bool:
        return (self.config.checkpoint is not None
                and time.perf_counter() - self._last_checkpoint
                >= self.config.checkpoint_interval)

    def _checkpoint(self, frontier: Frontier, following: Frontier | None = None,
                    done: int = 0) -> None:
        """Save the search: at the start of a level (``frontier`` is the level), or in
        its middle (the whole level, the first ``done`` states of it expanded, and
        ``following``, the next level so far): a level can outlast a stop."""
        directory = self.config.checkpoint
        assert directory is not None
        counters = {name: getattr(self, name) for name in COUNTERS}
        counters.update(level=self.level, done=done, seconds=self.earlier_seconds
                        + time.perf_counter() - self._start)
        tables = {"model": self.model.tables(),
                  "symmetry": self.symmetry.tables() if self.symmetry is not None else None}
        save_checkpoint(Path(directory), identity=self._identity(), counters=counters,
                        visited=self.visited, frontier=frontier, tables=tables,
                        following=following)
        self.checkpoints += 1
        self._last_checkpoint = time.perf_counter()

    def _resume(self, result: CheckResult) -> tuple[Frontier, Frontier, int] | None:
        """The level, its next level so far and how many of its states were expanded,
        from the checkpoint to resume from (noted in ``result``), or None."""
        directory = self.config.checkpoint
        if directory is None:
            return None
        loaded = load_checkpoint(Path(directory), self._identity(), self.frontier_budget,
                                 self.spill_dir)
        if loaded is None:
            return None
        tables = loaded["tables"]
        self.model.restore_tables(tables["model"])
        if self.symmetry is not None and tables["symmetry"] is not None:
            self.symmetry.restore_tables(tables["symmetry"])
        counters = loaded["counters"]
        for name in COUNTERS:
            setattr(self, name, counters[name])
        self.level = result.config["resumed_at_level"] = counters["level"]
        self.earlier_seconds = counters["seconds"]
        self.visited = loaded["visited"]
        result.config["resumed_within_level"] = counters["done"]
        return loaded["frontier"], loaded["following"], counters["done"]

    def _expand_level(self, frontier: Frontier, following: Frontier | None = None,
                      skip: int = 0) -> Frontier:
        """Expand one level; ``skip`` of its first states were expanded before a
        checkpoint, whose next level so far is ``following``."""
        model, config = self.model, self.config
        unpack = model.unpack
        if following is None:
            following = Frontier(self.frontier_budget, self.spill_dir)
        keys = array("Q")
        pending: list[tuple] = []  # successors waiting for their fingerprints' answer
        level_size = len(frontier)
        done = 0
        self._level_start = time.perf_counter()
        self._level_skipped = skip
        for record in frontier.drain():
            if done < skip:  # expanded before the checkpoint this search resumed from
                done += 1
                if done == skip:  # the level's rate counts this process's work only
                    self._level_start = time.perf_counter()
                continue
            state = unpack(record)
            done += 1
            steps, violation = model.expand(
                state, self.persistent(state) if self.persistent else None)
            for _action, nxt, _text in steps:
                self.transitions += 1
                if self.canon is not None:
                    # the same concrete state again (a diamond of independent steps):
                    # its key was asked already
                    concrete = hash(nxt)
                    known = self.known
                    if concrete in known:
                        continue
                    if len(known) >= config.memo_limit:
                        known.clear()
                    known.add(concrete)
                    keys.append(hash(self.canon(nxt)) & MASK)
                else:
                    keys.append(hash(nxt) & MASK)
                pending.append(nxt)
            if violation is not None:
                self.transitions += 1
                self.found = violation
                return following
            if not steps:
                self.terminal += 1
                self.found = model.liveness_violation(state)
                if self.found is not None:
                    return following
            if len(keys) >= BATCH:
                self._admit(keys, pending, following)
                keys, pending = array("Q"), []
                self._trim_memos()
                if self._at_max_states():
                    return following
                if self._checkpoint_due():
                    # every successor of the first `done` states is in visited and in
                    # the next level: a consistent point in the middle of the level
                    self._checkpoint(frontier, following, done)
            if config.progress is not None:
                self._report(level_size, done, len(following))
        self._admit(keys, pending, following)
        self._at_max_states()
        self.level += 1
        self._trim_memos()
        return following

    def _admit(self, keys: array, pending: list[tuple], following: Frontier) -> None:
        if not keys:
            return
        fresh = self.visited.add_new(np.frombuffer(keys, dtype=np.uint64))
        pack = self.model.pack
        for position in fresh.tolist():
            following.append(pack(pending[position]))
        if len(fresh):
            self.states += len(fresh)
            self.max_depth = max(self.max_depth, self.level + 1)

    def _at_max_states(self) -> bool:
        """Whether the search stops here, having found ``max_states`` states."""
        limit = self.config.max_states
        if limit is not None and self.states >= limit:
            self.stopped = f"max_states {limit} reached"
        return self.stopped is not None

    def _trim_memos(self) -> None:
        model, limit = self.model, self.config.memo_limit
        if len(model.step_cache) > limit:
            model.step_cache.clear()
        if self.symmetry is not None:
            self.symmetry.trim(limit)
        if self.sets is not None:
            self.sets.trim(limit)

    def _report(self, level_size: int, done: int, queued: int) -> None:
        now = time.perf_counter()
        if now - self._last_report < self.config.progress_interval:
            return
        self._last_report = now
        elapsed = now - self._start
        assert self.config.progress is not None
        self.config.progress({
            "states": self.states, "transitions": self.transitions, "depth": self.level,
            "level": self.level, "level_done": done, "level_size": level_size,
            "frontier": level_size - done + queued, "next_level": queued,
            # the rate of this process (a resumed search counts the restored classes)
            "seconds": elapsed,
            "rate": (self.states - self._states_at_start) / elapsed if elapsed else 0.0,
            "seconds_in_level": now - self._level_start,
            # states of the level expanded per second by this process (a resumed level's
            # states skipped up to its checkpoint are not counted: they cost nothing)
            "level_rate": max(done - self._level_skipped, 0) / max(now - self._level_start,
                                                                   1e-9),
            "visited_bytes": self.visited.nbytes, "peak_rss_bytes": peak_rss_bytes(),
            "collision_probability": collision_probability(self.states)})
