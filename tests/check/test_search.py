"""The search's options: hash compaction and depth-first search give the same verdicts,
the compact frontier changes nothing but memory."""

from __future__ import annotations

import pytest

from groupcomm.check import (
    CheckConfig,
    Model,
)
from tests.check.helpers import SMALL, random_states, run

# -- reductions -------------------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "n", "k"), SMALL)
def test_reduced_search_gives_the_same_verdict(protocol: str, n: int, k: int) -> None:
    plain = run(protocol, n, k)
    reduced = run(protocol, n, k, reduce=True)
    assert (reduced.result, reduced.property) == (plain.result, plain.property)
    assert reduced.states == plain.states  # hash compaction: no collision at this size
    assert len(reduced.counterexample) == len(plain.counterexample)


@pytest.mark.parametrize(("protocol", "n", "k"), [("fifo", 2, 2), ("mfss", 2, 2),
                                                   ("vector", 2, 2), ("matrix", 3, 1)])
def test_dfs_explores_the_same_states_when_ok(protocol: str, n: int, k: int) -> None:
    assert run(protocol, n, k).states == run(protocol, n, k, dfs=True).states


# -- compact storage (the default with --reduce) ----------------------------------------------------
ALL_PROTOCOLS = ["none", "fifo", "vector", "matrix", "matrix-delta", "ks", "mfss", "cykas",
                 "cykas-secret-sends", "scalar-id", "last-sender", "vector-forgets-joins"]
BOUNDS = {"vector-forgets-joins": (3, 1), "matrix": (3, 1), "scalar-id": (3, 1),
          "last-sender": (3, 1), "cykas-secret-sends": (3, 2), "fifo": (3, 2)}


def _same(one, other) -> None:
    ignore = {"seconds": 0, "states_per_second": 0, "config": {}}
    assert one.as_dict() | ignore == other.as_dict() | ignore


@pytest.mark.parametrize("protocol", ALL_PROTOCOLS)
def test_compact_storage_gives_the_counts_and_verdict_of_a_python_set(protocol) -> None:
    n, k = BOUNDS.get(protocol, (2, 2))
    options = {"destinations": "unicast"} if protocol == "vector" else {}
    plain = run(protocol, n, k, reduce=True, **options)
    # a frontier budget of about 500 bytes: every level goes through a file on disk
    compact = run(protocol, n, k, reduce=True, compact=True, memory_budget_gb=1e-6,
                  **options)
    _same(compact, plain)
    if compact.result == "ok":
        assert compact.config["visited_bytes"] == 8 * compact.states


@pytest.mark.parametrize(("protocol", "n", "k", "options"), [
    ("cykas", 3, 1, {}),
    ("mfss", 2, 2, {"symmetry": True, "por": True}),
    ("matrix", 3, 1, {"symmetry": True}),
    ("fifo", 3, 2, {"por": True}),
    ("cykas", 2, 2, {"fifo_network": True}),  # FIFO links: the plain search is kept
])
def test_compact_storage_with_the_reductions(protocol, n, k, options) -> None:
    plain = run(protocol, n, k, reduce=True, **options)
    compact = run(protocol, n, k, reduce=True, compact=True, **options)
    _same(compact, plain)


def test_compact_storage_reports_progress_by_level() -> None:
    seen: list[dict] = []
    result = run("cykas", 3, 1, reduce=True, compact=True, progress=seen.append,
                 progress_interval=0.0)
    assert result.result == "ok" and seen
    last = seen[-1]
    assert {"level", "level_done", "level_size", "next_level", "visited_bytes",
            "peak_rss_bytes", "collision_probability", "level_rate"} <= set(last)
    assert 0 < last["collision_probability"] < 1e-9
    assert last["level_rate"] * last["seconds_in_level"] == pytest.approx(last["level_done"])


# 20 s; resuming in the middle of a level ends as an uninterrupted search: test_storage
@pytest.mark.slow
def test_a_level_resumed_in_its_middle_is_timed_from_its_first_new_state(
        tmp_path, monkeypatch) -> None:
    """The states of a level expanded before its checkpoint are skipped in a moment on
    resuming; counted in the level's rate, they made the estimate of what is left far
    too short. The rate counts the states this process expanded itself."""
    import groupcomm.check.levels as levels

    monkeypatch.setattr(levels, "BATCH", 2000)  # checkpoints in the middle of levels
    # both searches run in this process, so they hash alike whatever its seed is; the
    # variable only lets the checkpoint be written (the command sets it for real)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    options = {"reduce": True, "compact": True, "symmetry": True, "checkpoint": tmp_path,
               "checkpoint_interval": 0.0}
    stopped = run("cykas", 3, 2, max_states=60_000, **options)
    assert stopped.result == "incomplete"
    seen: list[dict] = []
    resumed = run("cykas", 3, 2, progress=seen.append, progress_interval=0.0, **options)
    skipped = resumed.config["resumed_within_level"]
    assert skipped > 0
    first_level = [info for info in seen if info["level"] == resumed.config["resumed_at_level"]]
    assert first_level
    for info in first_level:
        expanded_here = info["level_done"] - skipped
        assert info["level_rate"] * info["seconds_in_level"] == pytest.approx(
            max(expanded_here, 0), abs=1e-6)


def test_packed_states_unpack_to_equal_states() -> None:
    model = Model(CheckConfig(protocol="cykas", processes=3, messages=2))
    for state in random_states(model, walks=4, seed=3):
        packed = model.pack(state)
        assert isinstance(packed, bytes) and len(packed) == 4 * (6 + len(state[1]))
        assert model.unpack(packed) == state
