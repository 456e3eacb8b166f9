"""``groupcomm text-bench --trace`` on a concurrent trace: one replica per agent, each
transaction made at its agent's replica with exactly its ancestors applied there, then
everything delivered everywhere; the final text checked at every replica, with and
without collection. A synthetic trace made here; the editing-traces repository's
clownschool trace when it is on this machine (it is not part of the repository)."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groupcomm.apps.text_concurrent import is_concurrent, read_concurrent, replay
from groupcomm.cli.args import CliError

ROOT = Path(__file__).resolve().parents[2]
#: the editing-traces files (CC BY 4.0) are used from next to the repository, never copied
TRACES = next((found for parent in ROOT.parents
               if (found := parent / "shared" / "editing_traces").is_dir()), None)


def synthetic_concurrent_trace(txns: int, agents: int = 3, seed: int = 1) -> dict:
    """A trace in the concurrent_traces format whose end does not depend on how
    concurrent inserts at one place are ordered: agent ``k`` edits only its own part of
    the text, between the markers ``<k>`` and ``<k+1>`` the first transaction writes, so
    no two agents ever insert after the same character. Each transaction follows its
    agent's previous one and, often, another agent's transaction made earlier; its
    positions count in the text of its ancestors."""
    rng = random.Random(seed)
    frame = [f"<{k}>" for k in range(agents)]
    #: per agent, its part of the text after each of its transactions
    parts: list[list[str]] = [[""] for _ in range(agents)]
    versions = [[0] * agents]  # per transaction: per agent, its transactions included
    out = [{"parents": [], "agent": 0, "patches": [[0, 0, "".join(frame)]]}]
    versions[0][0] = 0  # the frame is no agent's part: version 0 of every part
    last = dict.fromkeys(range(agents), 0)  # each agent's last transaction
    for number in range(1, txns):
        agent = rng.randrange(agents)
        parents = [last[agent]]
        if rng.random() < 0.4:
            parents.append(rng.randrange(number))
        view = [max(versions[p][j] for p in parents) for j in range(agents)]
        offset = sum(len(frame[j]) + len(parts[j][view[j]]) for j in range(agent))
        offset += len(frame[agent])
        text = parts[agent][view[agent]]
        patches = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            roll = rng.random()
            if text and roll < 0.3:
                at = rng.randrange(len(text))
                count = rng.randint(1, min(4, len(text) - at))
                patch = [at, count, "" if roll < 0.22 else rng.choice(["X", "yz"])]
            else:
                at = rng.randint(0, len(text))
                patch = [at, 0, rng.choice(["a", "b", "c", " ", "\n", "word "])]
            text = text[:patch[0]] + patch[2] + text[patch[0] + patch[1]:]
            patches.append([patch[0] + offset, patch[1], patch[2]])
        parts[agent].append(text)
        view[agent] = len(parts[agent]) - 1
        versions.append(view)
        last[agent] = number
        out.append({"parents": sorted(set(parents)), "agent": agent, "patches": patches})
    end = "".join(frame[k] + parts[k][-1] for k in range(agents))
    return {"kind": "concurrent", "endContent": end, "numAgents": agents, "txns": out}


def test_a_synthetic_concurrent_history_gives_the_end_at_every_replica_with_and_without_collection(
        ) -> None:
    data = synthetic_concurrent_trace(1500)
    assert is_concurrent(data)
    trace = read_concurrent(data, "synthetic.json")
    deadline = time.monotonic() + 120
    plain = replay(trace, 0, "without", deadline)
    collected = replay(trace, 8, "collecting", deadline)
    for result in (plain, collected):
        assert result["exact"] == [True, True, True]
        assert result["operations"] == plain["operations"] > 1500
        assert result["applied"] == 3 * result["operations"]
    # collection forgot tombstones, and no replica kept more than without it
    assert max(collected["tombstones"]) < min(plain["tombstones"])
    assert all(c <= p for c, p in zip(collected["kept_characters"],
                                      plain["kept_characters"], strict=True))


def test_a_transaction_that_does_not_follow_its_agents_previous_one_is_refused() -> None:
    data = {"kind": "concurrent", "endContent": "ab", "numAgents": 2, "txns": [
        {"parents": [], "agent": 0, "patches": [[0, 0, "a"]]},
        {"parents": [], "agent": 0, "patches": [[0, 0, "b"]]}]}
    with pytest.raises(CliError, match="does not follow that agent's previous transaction"):
        replay(read_concurrent(data, "t.json"), 0, "x", time.monotonic() + 60)
    data["txns"][1]["agent"] = 5
    with pytest.raises(CliError, match="transaction 1: expected parents"):
        read_concurrent(data, "t.json")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "text-bench", *args],
                          capture_output=True, text=True, timeout=600)


def test_the_command_prints_both_times_their_ratio_and_the_check(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_concurrent_trace(400)).encode()))
    done = run("--trace", str(path), "--collect-every", "8")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("trace synthetic.json.gz: 400 transactions of 3 agents")
    assert lines[1].startswith("without collection: ")
    assert lines[2].startswith("collecting every 8: ")
    assert lines[3].startswith("collecting / without: ")
    assert lines[4] == "final text: exact at every replica"
    done = run("--trace", str(path), "--json", "--collect-every", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["collecting"] is None and result["ratio"] is None and result["exact"]
    # a wrong end is said, and the exit code says it too
    data = synthetic_concurrent_trace(50)
    data["endContent"] += "?"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    done = run("--trace", str(path))
    assert done.returncode == 1
    assert "final text: DIFFERENT at without collection a0" in done.stdout


@pytest.mark.long
@pytest.mark.skipif(TRACES is None or not (TRACES / "clownschool.json.gz").is_file(),
                    reason="the editing-traces files are not next to the repository "
                    "(../shared/editing_traces): they are CC BY 4.0 data, not part of it")
def test_the_clownschool_trace_collecting_costs_little_more_than_not_collecting() -> None:
    done = run("--trace", str(TRACES / "clownschool.json.gz"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["exact"] and result["transactions"] == 23_136
    # a generous bound on a shared machine (BENCHMARKS.md gives the measured ratio)
    assert result["ratio"] < 2.5, result
