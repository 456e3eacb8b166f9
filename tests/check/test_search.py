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


# -- compact frontier (--compact) -----------------------------------------------------------------
@pytest.mark.parametrize(("protocol", "n", "k", "options"), [
    ("cykas", 3, 1, {}),
    ("mfss", 2, 2, {"symmetry": True, "por": True}),
    ("matrix", 3, 1, {"symmetry": True}),
    ("cykas-secret-sends", 3, 2, {}),
    ("fifo", 3, 2, {"por": True}),
    ("cykas", 2, 2, {"fifo_network": True}),  # FIFO links: the plain frontier is kept
])
def test_compact_frontier_changes_nothing_but_memory(protocol, n, k, options) -> None:
    plain = run(protocol, n, k, reduce=True, **options)
    compact = run(protocol, n, k, reduce=True, compact=True, **options)
    assert compact.as_dict() | {"seconds": 0, "states_per_second": 0, "config": {}} == \
        plain.as_dict() | {"seconds": 0, "states_per_second": 0, "config": {}}


def test_packed_states_unpack_to_equal_states() -> None:
    model = Model(CheckConfig(protocol="cykas", processes=3, messages=2))
    for state in random_states(model, walks=4, seed=3):
        packed = model.pack(state)
        assert isinstance(packed, bytes) and len(packed) == 4 * (6 + len(state[1]))
        assert model.unpack(packed) == state
