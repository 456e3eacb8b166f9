"""The search over :class:`~groupcomm.check.model.Model` s: breadth-first by default (the
first violation found has a shortest counterexample), depth-first on request; states
deduplicated on the whole state or (``reduce``) on a 64-bit digest, on a canonical key
with ``symmetry``, a persistent set expanded with ``por``, compact storage with
``compact`` (:mod:`groupcomm.check.levels`). How and why: docs/check_results.md, "How
the search is made fast".
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from groupcomm.check.churn import build_model
from groupcomm.check.config import CheckConfig, quiet_module_loggers
from groupcomm.check.levels import LevelSearch
from groupcomm.check.model import Model
from groupcomm.check.por import PersistentSets
from groupcomm.check.report import CheckResult, _complete, _texts
from groupcomm.check.state import Violation
from groupcomm.check.symmetry import Symmetry


def check(config: CheckConfig, keep: list | None = None) -> CheckResult:
    """Explore every interleaving within the bounds of ``config``. With ``reduce`` the
    search keeps no parent links (they would cost more memory than the digests): a
    violation found is searched for again with them, from the warm model (same order,
    so the same counterexample). The model and the visited states are appended to
    ``keep`` if given (a process about to exit need not free them)."""
    model = build_model(config)
    if keep is not None:
        keep.append(model)
    # the search allocates millions of long-lived tuples (frontier, memos) and makes no
    # reference cycles: the cyclic collector would only rescan them (measured: up to a
    # third of the CPU time at 3x3; same peak memory without it)
    collecting = gc.isenabled()
    gc.disable()
    try:
        # what the modules and the node log for a session (a departed member's held
        # messages, undeliverable reports) is noise repeated for every explored state
        with quiet_module_loggers(config.protocol):
            if not config.reduce:
                return search(model, config, keep_paths=True, keep=keep)
            result = search(model, config, keep_paths=False, keep=keep)
            if result.result == "violation":
                seconds = result.seconds
                result = search(model, config, keep_paths=True, keep=keep)
                result.seconds += seconds
            return result
    finally:
        if keep is not None:
            # what is kept stays: the collector need never scan it again (its first
            # pass over millions of young tuples would cost seconds)
            gc.freeze()
        if collecting:
            gc.enable()


def search(model: Model, config: CheckConfig, *, keep_paths: bool,
           keep: list | None = None) -> CheckResult:
    """The breadth-first (or depth-first) search of :func:`check` on ``model``; without
    ``keep_paths`` a violation is reported without its counterexample; the visited states
    are appended to ``keep`` if given."""
    result = CheckResult(
        result="ok", protocol=config.protocol, processes=model.n,
        messages=config.messages if config.workload is None else max(
            (len(v) for v in config.workload.values()), default=0),
        config={
            "fifo_network": config.fifo_network, "dfs": config.dfs, "reduce": config.reduce,
            "max_states": config.max_states, "workload": config.workload is not None,
            "destinations": config.destinations, "bypass_refusal": config.bypass_refusal,
            "symmetry": None, "por": config.por, "compact": config.compact,
            "join": list(config.late), "leave": list(config.leaving),
        },
    )
    start = time.perf_counter()
    last_report = start
    initial = model.initial_state
    reduce = config.reduce
    symmetry = Symmetry(model) if config.symmetry else None
    canon: Callable[[tuple], Any] | None = None
    if symmetry is not None:
        canon = symmetry.key
        result.config["symmetry"] = symmetry.describe()
        result.config["symmetry_group"] = symmetry.size
    sets = PersistentSets(model) if config.por else None
    persistent = sets.choose if sets is not None else None
    if config.compact and reduce and not keep_paths and not config.dfs \
            and not config.fifo_network:
        levels = LevelSearch(model, config, symmetry, sets)
        levels.run(result)
        _finish(result, sets, model, levels.found, None)
        return result
    first = canon(initial) if canon is not None else initial
    seen: set = {hash(first) if reduce else first}
    #: with symmetry: concrete states already generated (their keys are in ``seen``)
    known: set = set()
    if keep is not None:
        keep += (seen, known)
    # frontier entries: (state, depth, path) where path is (action, parent path); the
    # step texts are recomputed for the counterexample only (they cost memory)
    frontier: deque[Any] = deque([(initial, 0, None)])
    pop = frontier.pop if config.dfs else frontier.popleft
    states = 1
    transitions = 0
    max_depth = 0
    terminal = 0
    found: Violation | None = None
    found_path = None
    try:
        while frontier:
            state, depth, path = pop()
            steps, violation = model.expand(state, persistent(state) if persistent else None)
            for action, nxt, _ in steps:
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
                seen.add(key)  # (then the size tells whether it was new: one hash)
                if len(seen) == states:
                    continue
                states += 1
                if depth + 1 > max_depth:
                    max_depth = depth + 1
                frontier.append((nxt, depth + 1, (action, path) if keep_paths else None))
            if violation is not None:
                transitions += 1
                found, found_path = violation, (violation.action, path) if keep_paths else None
                break
            if not steps:
                terminal += 1
                found = model.liveness_violation(state)
                if found is not None:
                    found_path = path
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
    _finish(result, sets, model, found, found_path)
    return result


def _finish(result: CheckResult, sets: PersistentSets | None, model: Model,
            violation: Violation | None, path: tuple | None) -> None:
    """The verdict and counterexample part of ``result``: ``path`` is the search's
    parent links to ``violation`` (``None`` when it keeps none)."""
    if sets is not None:
        result.config["por_reduced_states"] = sets.reduced + sets.singletons
        result.config["por_commuting_states"] = sets.singletons
    if violation is not None:
        result.result = "violation"
        result.property = violation.prop
        result.detail = violation.detail
        while path is not None:
            action, path = path
            result.actions.append(action)
        result.actions.reverse()
        result.counterexample = _texts(model, result.actions, violation)
        if result.actions and violation.missing is not None:
            result.completion_actions, result.completion = _complete(
                model, result.actions, violation.missing)
    elif result.stopped is not None:
        result.result = "incomplete"
