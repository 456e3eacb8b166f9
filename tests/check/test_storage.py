"""The compact storage of the checker against plain Python structures."""

from __future__ import annotations

import random

import numpy as np
import pytest

from groupcomm.check.storage import FingerprintSet, Frontier, collision_probability


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


def test_fingerprints_survive_save_and_load(tmp_path) -> None:
    found = FingerprintSet()
    found.add_new(np.arange(1000, dtype=np.uint64) * 7919)
    found.save(tmp_path / "visited.npy")
    loaded = FingerprintSet.load(tmp_path / "visited.npy")
    assert len(loaded) == 1000
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
