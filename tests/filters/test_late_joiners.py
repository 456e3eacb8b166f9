"""A member that joins while traffic flows, under every causal module (in-process network,
real filters, random interleavings): it delivers, in causal order (``fifo``: in
each sender's order), every message addressed to it after it joined, never waits for one sent before, and nothing stays
held. Members learn of the join at different moments, as from a real server."""

from __future__ import annotations

import random

import pytest

from groupcomm.core.oracle import check_records
from groupcomm.tools.localnet import LocalNetwork

CAUSAL = ["fifo", "vector", "matrix", "matrix-delta", "ks", "mfss", "cykas"]


def _send_random(net: LocalNetwork, rng: random.Random, sender: str, label: str) -> None:
    others = [n for n in net.nodes[sender].members if n != sender]
    if not others:
        return
    if net.module.broadcast_only:
        net.send(sender, label, others)
    else:
        net.send(sender, label, rng.sample(others, rng.randint(1, len(others))))


def _step(net: LocalNetwork, rng: random.Random, count: int) -> None:
    for _ in range(count):
        candidates = net.arrivable()
        if not candidates:
            return
        net.deliver(rng.choice(candidates))


@pytest.mark.parametrize("module", CAUSAL)
def test_a_late_joiner_delivers_what_is_addressed_to_it_in_causal_order(module: str) -> None:
    for seed in range(30):
        rng = random.Random(seed)
        net = LocalNetwork(["a", "b", "d"], module)
        for i in range(6):  # traffic before the join, some of it still in flight
            _send_random(net, rng, rng.choice("abd"), f"pre{i}")
            _step(net, rng, rng.randint(0, 3))
        late = rng.sample(["a", "b", "d"], rng.randint(0, 2))
        net.join("c", told=[m for m in "abd" if m not in late])
        for i in range(10):
            if late and rng.random() < 0.3:
                net.tell_join(late.pop(), "c")
            _send_random(net, rng, rng.choice("abd"), f"post{i}")
            _step(net, rng, rng.randint(0, 3))
        for member in late:
            net.tell_join(member, "c")
        for i in range(4):
            _send_random(net, rng, rng.choice("abcd"), f"last{i}")
            _step(net, rng, rng.randint(0, 2))
        net.run(rng)
        for name in net.nodes:
            assert net.manager(name).held() == [], (seed, name, net.manager(name).held())
        verdict = check_records(net.records)
        if module == "fifo":  # per-sender order only: causal order is not its promise
            assert not (verdict.fifo_violations or verdict.undelivered
                        or verdict.duplicates or verdict.unexpected), (seed, verdict)
        else:
            assert verdict.ok, (seed, verdict)
        to_c = [r["msg"] for r in net.records if r["event"] == "send" and "c" in r["dests"]]
        assert sorted(net.delivered_ids("c")) == sorted(to_c), seed
        assert not any(str(p).startswith("pre") for p in net.delivered_payloads("c")), seed
