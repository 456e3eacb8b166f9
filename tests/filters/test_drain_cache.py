"""Draining a buffer re-checks first what held each message at the last look
(``first_deliverable`` in groupcomm/module_kit/drain.py): it must deliver exactly what a full scan
delivers, in the same order, for vector, matrix, matrix-delta and ks."""

from __future__ import annotations

import random

import pytest

from groupcomm.module_kit import drain
from groupcomm.tools.localnet import LocalNetwork

NAMES = ["a", "b", "c", "d", "e"]


def _full_scan(buffer, held_by, holder, still_held):  # noqa: ANN001, ANN202 (the signature)
    """first_deliverable without its cache: every entry checked in full."""
    for index, entry in enumerate(buffer):
        if holder(entry) is None:
            return index
    return None


def _run(module: str, seed: int, cached: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """Random traffic with many frames in flight (arrivals far out of order, a slow link
    from a to b), a member joining half-way for vector; what each member delivered, in
    order, and its state; and how often the cache spared a full check."""
    spared = [0]
    if cached:
        original = drain.first_deliverable

        def counting(buffer, held_by, holder, still_held):  # noqa: ANN001, ANN202
            def counted_still_held(entry, what):  # noqa: ANN001, ANN202
                held = still_held(entry, what)
                spared[0] += held
                return held
            return original(buffer, held_by, holder, counted_still_held)

        replacement = counting
    else:
        replacement = _full_scan
    # take_first_deliverable, which the modules call, finds it in module_kit.drain
    monkeypatch.setattr(drain, "first_deliverable", replacement)
    rng = random.Random(seed)
    net = LocalNetwork(NAMES[:4] if module == "vector" else NAMES, module, trace=False)
    for i in range(250):
        if module == "vector" and i == 120:
            net.join("e")
        members = list(net.nodes)
        sender = rng.choice(members)
        others = [n for n in members if n != sender]
        dests = others if module == "vector" else rng.sample(others, rng.choice([1, 1, 2, 3]))
        net.send(sender, f"{sender}{i}", dests)
        for _ in range(rng.randrange(3)):
            slow = [k for k in net.arrivable()
                    if not (net.in_flight[k].source == "a" and net.in_flight[k].dest == "b")]
            if slow:
                net.deliver(rng.choice(slow))
    net.run(rng)
    return ({n: net.delivered_ids(n) for n in net.nodes},
            {n: net.manager(n).snapshot() for n in net.nodes}, spared[0])


@pytest.mark.parametrize("module", ["vector", "matrix", "matrix-delta", "ks"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_cached_drain_delivers_what_a_full_scan_delivers(
        module: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _run(module, seed, False, monkeypatch)
    monkeypatch.undo()
    cached = _run(module, seed, True, monkeypatch)
    assert cached[:2] == full[:2]
    assert sum(len(delivered) for delivered in full[0].values()) > 300
    assert cached[2] > 50, cached[2]  # the cache really spared full checks


def test_first_deliverable_rechecks_the_cached_holder_first() -> None:
    class Message:
        def __init__(self, message_id: str) -> None:
            self.message_id = message_id

    waiting = {"m1": "x", "m2": "y", "m3": None}  # what holds each message now
    calls: list[str] = []

    def holder(entry: tuple) -> str | None:
        calls.append(f"full {entry[0].message_id}")
        return waiting[entry[0].message_id]

    def still_held(entry: tuple, what: str) -> bool:
        calls.append(f"recheck {entry[0].message_id}")
        return waiting[entry[0].message_id] == what

    buffer = [(Message("m1"),), (Message("m2"),), (Message("m3"),)]
    held_by: dict = {}
    assert drain.first_deliverable(buffer, held_by, holder, still_held) == 2
    assert held_by == {"m1": "x", "m2": "y"}
    assert calls == ["full m1", "full m2", "full m3"]
    calls.clear()
    waiting["m2"] = None  # m2's holder was delivered meanwhile
    assert drain.first_deliverable(buffer, held_by, holder, still_held) == 1
    assert calls == ["recheck m1", "recheck m2", "full m2"]
    assert held_by == {"m1": "x"}  # a deliverable message leaves the cache
