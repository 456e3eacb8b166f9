"""The compact storage of the checker against plain Python structures."""

from __future__ import annotations

import random

import numpy as np
import pytest

from groupcomm.check.storage import (
    FingerprintSet,
    Frontier,
    collision_probability,
    merge_into,
)


def test_fingerprints_behave_like_a_python_set() -> None:
    rng = random.Random(5)
    found, plain = FingerprintSet(), set()
    for _ in range(60):
        batch = [rng.getrandbits(64) if rng.random() < 0.6 else rng.choice([0, 2**64 - 1, 7])
                 for _ in range(rng.randint(0, 400))]
        batch += batch[: len(batch) // 3]  # repeats inside a batch
        fresh = found.add_new(np.array(batch, dtype=np.uint64))
        expected = []
        for position, key in enumerate(batch):
            if key not in plain:
                plain.add(key)
                expected.append(position)
        assert fresh.tolist() == expected
    assert len(found) == len(plain) and found.nbytes == 8 * len(plain)
    assert all(key in found for key in list(plain)[:50]) and 12345 not in found



@pytest.mark.parametrize("seed", range(40))
def test_a_run_merged_in_place_is_the_sorted_union(seed: int) -> None:
    """The merge writes into the first run's (grown) memory from the back, a few values
    at a time: any sizes, any interleaving, the value 0, chunks of one value."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64 - 1, int(rng.integers(0, 300)), dtype=np.uint64,
                          endpoint=True)
    if seed % 4 == 0:
        values = np.append(values, np.uint64(0))
    if seed % 5 == 0:  # one run entirely above the other
        values = np.arange(int(rng.integers(1, 50)), dtype=np.uint64) * 3
    values = np.unique(values)
    rng.shuffle(values)
    cut = int(rng.integers(0, len(values) + 1))
    run, other = np.sort(values[:cut]), np.sort(values[cut:])
    if seed % 3 == 0:
        run = run[::-1][::-1]  # a view, not owning its memory: copied first
    merged = merge_into(run, other, chunk=int(rng.integers(1, 12)))
    assert merged.tolist() == sorted(values.tolist())


_PEAK_OF_A_MERGE = """
import sys
from pathlib import Path
import numpy as np
from groupcomm.check.storage import FingerprintSet, merge_into

def kb(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])

FingerprintSet()  # the set's process settings, as in a search
run = np.arange(0, 16_000_000, 2, dtype=np.uint64)   # 8M even values, 64 MB
other = np.arange(1, 8_000_000, 2, dtype=np.uint64)  # 4M odd values among them, 32 MB
Path("/proc/self/clear_refs").write_text("5")  # the kernel's peak := the current RSS
before = kb("VmRSS")
merged = merge_into(run, other, chunk=1 << 18)
ordered = bool(np.all(merged[1:] > merged[:-1]))
print((kb("VmHWM") - before) / 1024, len(merged), ordered)
"""


def test_a_big_merge_needs_no_more_than_the_result_and_the_smaller_run() -> None:
    """Merging a run of 8M fingerprints (64 MB) with one of 4M (32 MB) grows the first in
    place: the peak rises by the growth (32 MB) and two chunks, not by a concatenated
    copy of both (96 MB; 91 MB measured with concatenate-and-sort). A fresh process, so
    that no freed memory of another test is reused and hides a copy."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PEAK_OF_A_MERGE], capture_output=True,
                          text=True, timeout=120, check=True)
    grown_mb, size, ordered = done.stdout.split()
    assert (int(size), ordered) == (12_000_000, "True")
    assert float(grown_mb) < 56, f"the peak grew by {grown_mb} MB"

def test_fingerprints_survive_save_and_load(tmp_path) -> None:
    found = FingerprintSet()
    found.add_new(np.arange(1000, dtype=np.uint64) * 7919)
    for start in range(1, 4):  # several runs: saved as one
        found.add_new(np.arange(start * 10**7, start * 10**7 + 50, dtype=np.uint64))
    found.save(tmp_path / "visited.npy")
    assert len(found) == 1150 and 3 * 10**7 + 49 in found and 7919 in found
    loaded = FingerprintSet.load(tmp_path / "visited.npy")
    assert len(loaded) == 1150 and 10**7 + 3 in loaded
    assert loaded.add_new(np.array([7919, 3], dtype=np.uint64)).tolist() == [1]


@pytest.mark.parametrize("budget", [10, 10**9])
def test_the_frontier_gives_back_every_state_in_order_from_memory_or_disk(
        tmp_path, budget) -> None:
    frontier = Frontier(budget, tmp_path)
    states = [bytes(random.Random(k).randbytes(k % 50)) for k in range(2000)]
    for state in states:
        frontier.append(state)
    assert len(frontier) == 2000
    assert (frontier.spilled_bytes > 0) is (budget == 10)
    copy = tmp_path / "copy.bin"
    frontier.write_to(copy)
    assert list(frontier.drain()) == states and len(frontier) == 0
    assert list(tmp_path.glob("frontier-*")) == []  # the spill file is gone
    assert list(Frontier.read_from(copy, budget, tmp_path).drain()) == states


def test_collision_probability_is_n_squared_over_2_to_the_65() -> None:
    assert collision_probability(1) == 0
    assert collision_probability(10**7) == pytest.approx(10**14 / 2**65, rel=1e-6)
    assert collision_probability(2**40) == 1.0


def _check(*args: str) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "groupcomm.cli", "check", "--protocol",
                           "cykas", "--processes", "3", "--messages", "2", "--reduce",
                           "--symmetry", "--json", "-q", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 3), done.stderr[-2000:]
    return json.loads(done.stdout)


# 25 s; the default suite resumes in the middle of a level, the harder case (below)
@pytest.mark.slow
def test_a_search_resumed_from_its_checkpoint_ends_as_an_uninterrupted_one(tmp_path) -> None:
    """Three processes: an uninterrupted run; a run stopped after 100,000 classes (its
    checkpoint is the last level it completed); the same command again, which resumes
    there in a new process (with its own interning, hashing and symmetry tables rebuilt
    from the checkpoint) and must end with the same counts."""
    whole = _check()
    stopped = _check("--checkpoint", str(tmp_path), "--checkpoint-every", "0",
                     "--max-states", "100000")
    assert stopped["result"] == "incomplete"
    assert stopped["config"]["checkpoints_written"] >= 5
    resumed = _check("--checkpoint", str(tmp_path), "--checkpoint-every", "0")
    assert resumed["config"]["resumed_at_level"] >= 5
    for field in ("result", "states", "transitions", "max_depth", "terminal_states"):
        assert resumed[field] == whole[field], field
    import subprocess
    import sys

    other = subprocess.run([sys.executable, "-m", "groupcomm.cli", "check", "--protocol",
                            "cykas", "--processes", "3", "--messages", "2", "--reduce",
                            "--checkpoint", str(tmp_path)], capture_output=True, text=True,
                           timeout=120)
    assert other.returncode == 2
    assert "checkpoint of another run (differs in: symmetry)" in other.stderr


def _check_in_small_batches(*args: str) -> dict:
    """``groupcomm check`` with successors asked of the visited set 2,000 at a time, so
    that checkpoints fall in the middle of levels (the command's batch is 65,536)."""
    import json
    import os
    import subprocess
    import sys

    script = ("import sys, groupcomm.check.levels as levels; levels.BATCH = 2000; "
              "from groupcomm.cli.check import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, "--protocol", "cykas",
                           "--processes", "3", "--messages", "2", "--reduce", "--symmetry",
                           "--json", "-q", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert done.returncode in (0, 3), done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.long
def test_a_search_resumed_in_the_middle_of_a_level_ends_as_an_uninterrupted_one(
        tmp_path) -> None:
    """A checkpoint taken in the middle of a level holds the whole level, how many of its
    states were expanded and the next level so far; the search resumed from it (in a new
    process) skips those states and ends with the uninterrupted counts."""
    whole = _check_in_small_batches()
    stopped = _check_in_small_batches("--checkpoint", str(tmp_path), "--checkpoint-every",
                                      "0", "--max-states", "150000")
    assert stopped["result"] == "incomplete"
    resumed = _check_in_small_batches("--checkpoint", str(tmp_path))
    assert resumed["config"]["resumed_within_level"] > 0
    for field in ("result", "states", "transitions", "max_depth", "terminal_states"):
        assert resumed[field] == whole[field], field


def test_a_checkpoint_of_the_first_format_still_loads(tmp_path) -> None:
    """Checkpoints written before levels could be saved in their middle (format 1: the
    start of a level, no next level) load as the start of their level."""
    import json

    from groupcomm.check.storage import load_checkpoint, save_checkpoint

    visited = FingerprintSet()
    visited.add_new(np.array([3, 1, 2], dtype=np.uint64))
    level = Frontier(1 << 20)
    for packed in (b"a", b"bb", b"ccc"):
        level.append(packed)
    save_checkpoint(tmp_path, identity={"protocol": "x"}, counters={
        "level": 4, "states": 3, "transitions": 9, "terminal": 0, "max_depth": 4,
        "seconds": 1.0}, visited=visited, frontier=level, tables={"t": 1})
    meta_path = tmp_path / "current" / "checkpoint.json"
    meta = json.loads(meta_path.read_text())
    meta["version"] = 1
    meta_path.write_text(json.dumps(meta))
    loaded = load_checkpoint(tmp_path, {"protocol": "x"}, 1 << 20, None)
    assert loaded is not None
    assert loaded["counters"]["done"] == 0 and loaded["counters"]["level"] == 4
    assert list(loaded["frontier"].drain()) == [b"a", b"bb", b"ccc"]
    assert len(loaded["following"]) == 0
    assert [key in loaded["visited"] for key in (1, 2, 3, 4)] == [True, True, True, False]


@pytest.mark.long  # two full checks, 7-11 s each
@pytest.mark.parametrize("protocol", ["mfss", "matrix"])
def test_a_small_memo_limit_changes_time_not_counts(protocol: str) -> None:
    """Memos are pure caches: emptied every few dozen entries, the search finds the same
    classes, transitions, depth and terminal states."""
    from groupcomm.check import CheckConfig, check

    def run(limit: int):
        result = check(CheckConfig(protocol=protocol, processes=3, messages=2, reduce=True,
                                   symmetry=True, por=True, compact=True, memo_limit=limit))
        return (result.result, result.states, result.transitions, result.max_depth,
                result.terminal_states)

    assert run(40) == run(500_000)
