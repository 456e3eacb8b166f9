"""The model checker on ``ks``: ok with multicasts mixed with unicasts, and each of its
pruning rules is load-bearing (taken away or made too eager, the checker finds the
violation)."""

from __future__ import annotations

import pytest

import groupcomm.filters.ks as ks
from groupcomm.check.config import CheckConfig, load_workload
from groupcomm.check.search import check
from groupcomm.core.messages import SentMessage, with_header_unchecked

#: four processes, multicasts to two of three others between unicasts
MIXED = load_workload({"sends": {
    "p1": [["p2", "p3"], ["p4"]],
    "p2": [["p4"], ["p1", "p3"]],
    "p3": [["p4", "p1"]],
    "p4": [["p2"]],
}})


def test_symmetry_and_por_keep_the_verdict_at_three_by_two() -> None:
    reduced = check(CheckConfig(protocol="ks", processes=3, messages=2, reduce=True,
                                symmetry=True, por=True))
    assert (reduced.result, reduced.states) == ("ok", 12_727)
    assert reduced.config["symmetry_group"] == 6


def test_ks_is_causal_and_live_with_multicasts_and_unicasts_mixed() -> None:
    result = check(CheckConfig(protocol="ks", workload=MIXED, reduce=True))
    assert result.result == "ok", (result.property, result.counterexample)
    assert result.states == 42_557


ORIGINAL_MERGE = ks.KsManager._merge
ORIGINAL_STAMP = ks.KsManager.stamp_copies


def forgets_what_others_said(self: ks.KsManager, carried: ks.Log, me: str) -> None:
    """Too eager: keeps only the sender's own entries of what a message carried."""
    ORIGINAL_MERGE(self, {s: v for s, v in carried.items() if s == self.host.name}, me)


def drops_the_destination_too(self: ks.KsManager, message: SentMessage) -> list[SentMessage]:
    """Too eager: the copy for d no longer says what waits at d."""
    copies = []
    for copy in ORIGINAL_STAMP(self, message):
        clock, entries = ks.decode_log(copy)
        dest = copy.destinations[0]
        pruned = {s: {t: d - {dest} for t, d in sends.items()} for s, sends in entries.items()}
        copies.append(with_header_unchecked(copy, ks.STAMP, ks.encode_log(clock, pruned)))
    return copies


@pytest.mark.parametrize("reductions", [{}, {"symmetry": True, "por": True}])
@pytest.mark.parametrize(("method", "broken"), [
    ("_merge", forgets_what_others_said),
    ("stamp_copies", drops_the_destination_too),
])
def test_a_broken_rule_is_caught(monkeypatch, method, broken, reductions) -> None:
    monkeypatch.setattr(ks.KsManager, method, broken)
    result = check(CheckConfig(protocol="ks", processes=3, messages=2, reduce=True,
                               **reductions))
    assert result.result == "violation"
    assert result.property in ("causal", "fifo")
