"""Breadth-first search on several cores (``--workers N``).

Each worker is a forked process with its own :class:`~groupcomm.check.model.Model`
(real filter objects, memo of local steps, interned snapshots) and owns one partition
of the state space: the states whose key (the state, its symmetry-canonical form, or
the 64-bit digest of either) hashes to it. The search is level-synchronous: every
worker expands its share of the current breadth-first level, keeps the successors it
owns that it has not seen, and batches the others for their owners (one pickled list
per peer and level, each state sent at most once by each worker); then the workers
swap batches over pipes, deduplicate what they received, and report to the
coordinator, which starts the next level or stops.

Counterexamples: a violation stops the search at the end of its level; its shortest
counterexample (with its texts and trace completion) is then derived by the sequential
search, which finds it at the same depth. Only the verdict and the statistics of the
exhaustive part come from the workers.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import threading
import time
from dataclasses import replace
from typing import Any

from groupcomm.check.model import CheckConfig, CheckResult, Model, Violation, search

_PROGRESS_EVERY = 2.0


def _owner(key: Any, workers: int) -> int:
    value = key if type(key) is int else hash(key)
    # mix the digest so the partition does not follow its low bits
    return ((value * 0x9E3779B97F4A7C15) >> 17) % workers


def _worker(me: int, workers: int, config: CheckConfig, ctrl: Any, peers: dict[int, Any]) -> None:
    try:
        _work(me, workers, config, ctrl, peers)
    except (KeyboardInterrupt, EOFError, BrokenPipeError, ConnectionResetError):
        pass  # interrupted, or the coordinator is gone: nothing to report to
    finally:
        ctrl.close()
        for conn in peers.values():
            conn.close()


def _work(me: int, workers: int, config: CheckConfig, ctrl: Any, peers: dict[int, Any]) -> None:
    model = Model(config, content_ids=True)
    symmetry = None
    if config.symmetry:
        from groupcomm.check.symmetry import Symmetry

        symmetry = Symmetry(model)
    reduce = config.reduce

    def key_of(state: tuple, signature: list | None = None) -> Any:
        key = symmetry.key(state, signature) if symmetry is not None else state
        return hash(key) if reduce else key

    def owner_of(signature: list) -> int:
        # with symmetry the owner follows the sorted per-process signatures, which do not
        # change under renaming: the owner (not the sender) computes the canonical key,
        # and the two orders of a diamond of steps meet at the same worker
        return _owner(hash(tuple(sorted(signature))), workers)

    seen: set = set()
    #: what this worker already handed to other workers: keys, or with symmetry the
    #: concrete states (their keys are computed by the owner)
    sent: set = set()
    known: set = set()  # with symmetry: concrete states already generated or received
    #: per peer: the (process, snapshot id) and entry digests it was sent
    shipped: dict[int, set] = {peer: set() for peer in peers}
    received: dict[int, Any] = {}  # digest -> network or truth entry from a peer
    snaps = model._snaps  # noqa: SLF001
    frontier: list[tuple] = []
    initial = model.initial_state
    first = key_of(initial)
    if (owner_of(symmetry.signature(initial)) if symmetry is not None
            else _owner(first, workers)) == me:
        seen.add(first)
        frontier.append(initial)
    transitions = 0
    terminal = 0
    last_report = time.perf_counter()
    while True:
        command = ctrl.recv()
        if command[0] == "stop":
            return
        budget = command[1]  # unique states this worker may still add (None: no limit)
        limit = None if budget is None else len(seen) + budget
        outboxes: list[list[tuple]] = [[] for _ in range(workers)]
        level: list[tuple] = []
        found = None
        capped = False
        for state in frontier:
            any_enabled = False
            try:
                for _action, nxt, _text in model.successors(state):
                    any_enabled = True
                    transitions += 1
                    if symmetry is not None:
                        concrete = hash(nxt) if reduce else nxt
                        if concrete in known:
                            continue  # generated before: its key was handled then
                        known.add(concrete)
                        signature = symmetry.signature(nxt)
                        owner = owner_of(signature)
                        if owner != me:
                            outboxes[owner].append((None, nxt))
                            continue
                        key = key_of(nxt, signature)
                    else:
                        key = key_of(nxt)
                        owner = _owner(key, workers)
                        if owner != me:
                            if key not in sent:
                                sent.add(key)
                                outboxes[owner].append((key, nxt))
                            continue
                    if key not in seen:
                        seen.add(key)
                        level.append(nxt)
            except Violation as violation:
                transitions += 1
                found = (violation.prop, violation.detail)
                break
            if not any_enabled:
                terminal += 1
                missing = model.undelivered(state)
                if missing:
                    found = ("liveness", f"terminal state with {len(missing)} undelivered")
                    break
            if limit is not None and len(seen) >= limit:
                capped = True
                break
            now = time.perf_counter()
            if now - last_report >= _PROGRESS_EVERY:
                last_report = now
                ctrl.send(("progress", me, len(seen), transitions))
        # swap batches with every peer (a thread sends while this one receives). A state
        # travels as ids: its snapshot ids, and digests of its network entries and truth
        # entries; each snapshot and entry value goes to a peer once
        blobs = {}
        for peer in peers:
            ship = shipped[peer]
            values = []
            objects = []
            batch = []
            for key, state in outboxes[peer]:
                state_snaps, network, truth = state
                for i, sid in enumerate(state_snaps):
                    if (i, sid) not in ship:
                        ship.add((i, sid))
                        values.append((i, sid, snaps[i][sid]))
                ids = []
                for part in (network, truth):
                    part_ids = []
                    for element in part:
                        h = hash(element)
                        if h not in ship:
                            ship.add(h)
                            objects.append((h, element))
                        part_ids.append(h)
                    ids.append(tuple(part_ids))
                batch.append((key, state_snaps, ids[0], ids[1]))
            blobs[peer] = pickle.dumps((values, objects, batch),
                                       protocol=pickle.HIGHEST_PROTOCOL)
        del outboxes
        sender = threading.Thread(target=_send_all, args=(peers, blobs), daemon=True)
        sender.start()
        for peer in sorted(peers):
            values, objects, batch = pickle.loads(peers[peer].recv_bytes())
            for i, sid, snap in values:
                model.adopt_snapshot(i, sid, snap)
            for h, element in objects:
                old = received.setdefault(h, element)
                if old is not element and old != element:
                    raise RuntimeError("digest collision between two network or truth entries")
            for key, state_snaps, network_ids, truth_ids in batch:
                state = (state_snaps, tuple([received[h] for h in network_ids]),
                         tuple([received[h] for h in truth_ids]))
                if key is None:  # symmetry: a concrete state, keyed here
                    concrete = hash(state) if reduce else state
                    if concrete in known:
                        continue
                    known.add(concrete)
                    key = key_of(state)
                if key not in seen:
                    seen.add(key)
                    level.append(state)
        sender.join()
        del blobs
        frontier = level
        ctrl.send(("level", me, len(seen), transitions, terminal, len(frontier), found,
                   capped))


def _send_all(peers: dict[int, Any], blobs: dict[int, bytes]) -> None:
    for peer, blob in blobs.items():
        peers[peer].send_bytes(blob)


def check_parallel(config: CheckConfig) -> CheckResult:
    """:func:`~groupcomm.check.model.check` on ``config.workers`` processes (see the
    module doc). Breadth-first only."""
    workers = config.workers
    model = Model(config)  # validates the configuration here, not in the workers
    symmetry = None
    if config.symmetry:
        from groupcomm.check.symmetry import Symmetry

        symmetry = Symmetry(model)
    del model
    context = multiprocessing.get_context("fork")
    links: dict[tuple[int, int], Any] = {}
    for a in range(workers):
        for b in range(a + 1, workers):
            links[(a, b)], links[(b, a)] = context.Pipe(duplex=True)
    controls = []
    processes = []
    for me in range(workers):
        parent_end, child_end = context.Pipe(duplex=True)
        peers = {b: links[(me, b)] for b in range(workers) if b != me}
        process = context.Process(target=_worker, args=(me, workers, config, child_end, peers),
                                  name=f"check-worker-{me}", daemon=True)
        process.start()
        child_end.close()
        controls.append(parent_end)
        processes.append(process)
    for conn in links.values():
        conn.close()
    start = time.perf_counter()
    last_report = start
    states = [0] * workers
    moves = [0] * workers
    terminal = [0] * workers
    frontier = 1
    depth = 0
    found = None
    stopped = None
    try:
        while True:
            total = sum(states)
            budget = None
            if config.max_states is not None:
                budget = max(0, config.max_states - max(total, 1)) // workers + 1
            for conn in controls:
                conn.send(("level", budget))
            pending = set(range(workers))
            frontiers = [0] * workers
            capped = False
            while pending:
                for conn in multiprocessing.connection.wait(controls):
                    message = conn.recv()
                    me = message[1]
                    states[me], moves[me] = message[2], message[3]
                    if message[0] == "level":
                        terminal[me], frontiers[me] = message[4], message[5]
                        found = found or message[6]
                        capped = capped or message[7]
                        pending.discard(me)
                now = time.perf_counter()
                if config.progress is not None and now - last_report >= config.progress_interval:
                    last_report = now
                    config.progress({"states": sum(states), "transitions": sum(moves),
                                     "depth": depth, "frontier": frontier,
                                     "seconds": now - start,
                                     "rate": sum(states) / (now - start)})
            frontier = sum(frontiers)
            if frontier:
                depth += 1
            if found is not None:
                break
            if capped or (config.max_states is not None and sum(states) >= config.max_states):
                stopped = f"max_states {config.max_states} reached"
                break
            if not frontier:
                break
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        for conn in controls:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        for conn in controls:
            conn.close()
    seconds = time.perf_counter() - start
    if found is not None:
        # the shortest counterexample, texts and completion from the sequential search
        sequential = replace(config, workers=1)
        result = search(Model(sequential), sequential, keep_paths=True)
        result.seconds += seconds
        result.config["workers"] = workers
        result.config["parallel"] = (f"violation found by {workers} workers at depth "
                                     f"{depth}; counterexample re-derived sequentially")
        return result
    result = CheckResult(
        result="ok" if stopped is None else "incomplete", protocol=config.protocol,
        processes=len(config.names()),
        messages=config.messages if config.workload is None else max(
            (len(v) for v in config.workload.values()), default=0),
        states=sum(states), transitions=sum(moves), max_depth=depth, seconds=seconds,
        terminal_states=sum(terminal), stopped=stopped,
        config={
            "fifo_network": config.fifo_network, "dfs": False, "reduce": config.reduce,
            "max_states": config.max_states, "workload": config.workload is not None,
            "destinations": config.destinations, "bypass_refusal": config.bypass_refusal,
            "symmetry": symmetry.describe() if symmetry is not None else None,
            "symmetry_group": symmetry.size if symmetry is not None else None,
            "workers": workers,
        },
    )
    return result

