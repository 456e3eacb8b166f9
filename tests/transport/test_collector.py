"""The collector of a gateway or server: the startup's objects frozen, collections
timed per generation."""

from __future__ import annotations

import gc

from groupcomm.transport import collector


def test_settle_freezes_what_startup_made_and_times_later_collections() -> None:
    before = collector.report()
    try:
        frozen = collector.settle()
        assert frozen == gc.get_freeze_count() > 1_000
        garbage = []
        for _ in range(1_000):  # cycles, so that a collection has work
            cycle: list = []
            cycle.append(cycle)
            garbage.append(cycle)
        del garbage, cycle
        gc.collect()
        after = collector.report()
        assert after["frozen"] == frozen == gc.get_freeze_count()
        full = after["generations"][2]
        assert full["collections"] > before["generations"][2]["collections"]
        assert full["paused_ms"] >= full["longest_ms"] > 0
        # settling again keeps one clock: a collection is counted once
        collector.settle()
        counted = collector.report()["generations"][2]["collections"]
        gc.collect()
        assert collector.report()["generations"][2]["collections"] == counted + 1
    finally:
        gc.unfreeze()  # the rest of the test run collects as usual


def test_a_clock_adds_each_generations_pauses() -> None:
    clock = collector.CollectionClock()
    for generation in (0, 0, 2):
        clock("start", {"generation": generation})
        clock("stop", {"generation": generation})
    report = clock.report()
    assert [g["collections"] for g in report] == [2, 0, 1]
    assert report[1] == {"collections": 0, "paused_ms": 0.0, "longest_ms": 0.0}
