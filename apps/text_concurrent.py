"""``groupcomm text-bench --trace`` on a concurrent trace (the editing-traces
repository's concurrent_traces format): one replica of the text per agent, each
transaction made at its agent's replica and delivered to the others in causal order,
replayed without collection and with it (BENCHMARKS.md, "Concurrent editing")."""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import time
from pathlib import Path
from typing import Any

from groupcomm.apps.text_trace import check_patch, say
from groupcomm.cli.args import CliError
from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from groupcomm.replicated.editor import COLLECT_EVERY

PROG = "groupcomm text-bench"
#: transactions between two progress lines
PROGRESS_EVERY = 5_000


def is_concurrent(data: Any) -> bool:
    """Whether a trace's JSON is in the concurrent format (transactions with parents and
    an agent)."""
    txns = data.get("txns") if isinstance(data, dict) else None
    return (isinstance(txns, list) and bool(txns) and isinstance(txns[0], dict)
            and "parents" in txns[0] and "agent" in txns[0])


class ConcurrentTrace:
    """A concurrent trace's transactions: ``(agent, parents, patches)`` each, in the
    file's (causal) order; a transaction's positions count in the document its
    parents (and their ancestors) make."""

    def __init__(self, name: str, end: str, agents: int,
                 txns: list[tuple[int, tuple[int, ...], list[tuple[int, int, str]]]]) -> None:
        self.name = name
        self.end = end
        self.agents = agents
        self.txns = txns

    def __len__(self) -> int:
        return len(self.txns)


def read_concurrent(data: dict[str, Any], path: str) -> ConcurrentTrace:
    """The transactions of a concurrent trace's JSON, checked; ``CliError`` naming the
    first that is wrong."""
    end, agents, txns = data.get("endContent"), data.get("numAgents"), data["txns"]
    if not isinstance(end, str) or not isinstance(agents, int) or agents < 1:
        raise CliError(f"{PROG}: {path}: a concurrent trace has endContent (a string) and "
                       "numAgents (an integer >= 1)")
    read: list[tuple[int, tuple[int, ...], list[tuple[int, int, str]]]] = []
    for number, txn in enumerate(txns):
        parents, agent = txn.get("parents"), txn.get("agent")
        patches = txn.get("patches")
        if (not isinstance(parents, list) or not all(
                isinstance(p, int) and 0 <= p < number for p in parents)
                or not isinstance(agent, int) or not 0 <= agent < agents
                or not isinstance(patches, list)):
            raise CliError(f"{PROG}: {path}: transaction {number}: expected parents (earlier "
                           f"transactions), an agent below numAgents and a list of patches")
        for patch in patches:
            check_patch(PROG, path, number, patch)
        read.append((agent, tuple(parents), [tuple(p) for p in patches]))
    return ConcurrentTrace(Path(path).name, end, agents, read)


class _Replicas:
    """One text and one stability per agent; what each agent made, and which of the
    other agents' transactions each replica has applied (per agent, a prefix of that
    agent's transactions: each agent's transactions follow one another)."""

    def __init__(self, trace: ConcurrentTrace, collect_every: int) -> None:
        n = trace.agents
        self.names = [f"a{k}" for k in range(n)]
        self.agent_of = [agent for agent, _, _ in trace.txns]
        self.texts = [TextSequence() for _ in range(n)]
        self.stability = [Stability(name, self.names) for name in self.names]
        self.clocks = [dict.fromkeys(self.names, 0) for _ in range(n)]
        self.collect_every = collect_every
        self.applied = [0] * n
        self.ops = 0
        #: per transaction, its operations: (op, tag, id)
        self.made: list[list[tuple[Any, Tag, str]]] = []
        #: per agent, its transactions' numbers in order
        self.of_agent: list[list[int]] = [[] for _ in range(n)]
        #: per replica, per agent, how many of that agent's transactions it applied
        self.has = [[0] * n for _ in range(n)]

    def apply(self, at: int, op: Any, tag: Tag, op_id: str, sender: str) -> None:
        self.texts[at].effect(op, tag, op_id, sender)
        self.stability[at].delivered(sender, tag)
        self.applied[at] += 1
        if self.collect_every and self.applied[at] % self.collect_every == 0:
            self.texts[at].collect(self.stability[at])

    def bring(self, at: int, wanted: list[int]) -> None:
        """Deliver to replica ``at`` every other agent's transactions up to ``wanted``
        (per agent, how many), in the trace's order, which is causal."""
        has = self.has[at]
        missing = [self.of_agent[s][has[s]:wanted[s]] for s in range(len(wanted))
                   if s != at and wanted[s] > has[s]]
        for number in heapq.merge(*missing):
            sender = self.names[self.agent_of[number]]
            for op, tag, op_id in self.made[number]:
                self.apply(at, op, tag, op_id, sender)
                self.clocks[at][sender] += 1
        for s in range(len(wanted)):
            if s != at:
                has[s] = max(has[s], wanted[s])

    def make(self, at: int, patches: list[tuple[int, int, str]]) -> list[tuple[Any, Tag, str]]:
        text, name, clock = self.texts[at], self.names[at], self.clocks[at]
        made = []
        for position, deleted, inserted in patches:
            for op in ([text.prepare_delete(position, deleted)] if deleted else []) + (
                    [text.prepare_insert(position, inserted)] if inserted else []):
                clock[name] += 1
                tag, op_id = Tag(clock), f"{name}#{clock[name]}"
                self.apply(at, op, tag, op_id, name)
                made.append((op, tag, op_id))
        self.ops += len(made)
        return made


def replay(trace: ConcurrentTrace, collect_every: int, label: str,
           deadline: float) -> dict[str, Any]:
    """Replay ``trace`` into one replica per agent, collecting every ``collect_every``
    operations each replica applies (0: never), then deliver everything everywhere."""
    replicas = _Replicas(trace, collect_every)
    n = trace.agents
    versions: list[list[int]] = []  # per transaction: per agent, its transactions it follows
    gc.collect()
    started = time.process_time()
    for number, (agent, parents, patches) in enumerate(trace.txns):
        wanted = [0] * n
        for parent in parents:
            wanted = [max(a, b) for a, b in zip(wanted, versions[parent], strict=True)]
        if wanted[agent] != len(replicas.of_agent[agent]):
            raise CliError(f"{PROG}: {trace.name}: transaction {number} of agent {agent} does "
                           f"not follow that agent's previous transaction: this replay "
                           f"keeps one replica per agent")
        replicas.bring(agent, wanted)
        try:
            replicas.made.append(replicas.make(agent, patches))
        except ValueError as error:
            raise CliError(f"{PROG}: {trace.name}: transaction {number}: {error}") from None
        replicas.of_agent[agent].append(number)
        wanted[agent] += 1
        versions.append(wanted)
        if number % PROGRESS_EVERY == PROGRESS_EVERY - 1:
            say(f"{label}: {number + 1:,} of {len(trace):,} transactions")
            if time.monotonic() > deadline:
                raise CliError(f"{PROG}: the replay took more than its --timeout")
    everything = [len(txns) for txns in replicas.of_agent]
    for at in range(n):
        replicas.bring(at, everything)
        if collect_every:
            replicas.texts[at].collect(replicas.stability[at])
    seconds = time.process_time() - started
    finals = [text.value for text in replicas.texts]
    return {"cpu_seconds": round(seconds, 3), "operations": replicas.ops,
            "applied": sum(replicas.applied),
            "exact": [final == trace.end for final in finals],
            "kept_characters": [len(text) for text in replicas.texts],
            "tombstones": [text.tombstones for text in replicas.texts]}


def run_concurrent(args: argparse.Namespace, data: dict[str, Any]) -> int:
    trace = read_concurrent(data, args.trace)
    every = COLLECT_EVERY if args.collect_every is None else args.collect_every
    if args.no_collect:
        every = 0
    runs = [("without collection", 0)] + ([(f"collecting every {every}", every)]
                                          if every else [])
    say(f"replaying {len(trace):,} transactions of {trace.name} ({trace.agents} agents, "
        f"one replica each), {' and '.join(label for label, _ in runs)}...")
    deadline = time.monotonic() + (args.timeout or 1800.0)
    results = {label: replay(trace, n, label, deadline) for label, n in runs}
    plain = results["without collection"]
    collected = results.get(runs[-1][0]) if every else None
    ratio = (round(collected["cpu_seconds"] / plain["cpu_seconds"], 2)
             if collected and plain["cpu_seconds"] else None)
    exact = all(all(r["exact"]) for r in results.values())
    if args.json:
        print(json.dumps({"trace": trace.name, "transactions": len(trace),
                          "agents": trace.agents, "operations": plain["operations"],
                          "collect_every": every, "without": plain, "collecting": collected,
                          "ratio": ratio, "exact": exact}))
        return 0 if exact else 1
    print(f"trace {trace.name}: {len(trace):,} transactions of {trace.agents} agents, "
          f"{plain['operations']:,} operations ({plain['applied']:,} applied over the "
          f"{trace.agents} replicas), final text {len(trace.end):,} characters")
    for label, result in results.items():
        kept, tombs = result["kept_characters"], result["tombstones"]
        print(f"{label}: {result['cpu_seconds']:.2f} s CPU; kept at the end "
              f"{min(kept):,}-{max(kept):,} characters, {min(tombs):,}-{max(tombs):,} "
              f"tombstones (per replica)")
    if ratio is not None:
        print(f"collecting / without: {ratio:.2f}x")
    wrong = [f"{label} a{k}" for label, r in results.items()
             for k, ok in enumerate(r["exact"]) if not ok]
    print("final text: " + ("exact at every replica" if not wrong else
                            "DIFFERENT at " + ", ".join(wrong)))
    return 0 if exact else 1
