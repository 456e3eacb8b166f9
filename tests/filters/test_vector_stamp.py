"""vector keeps its stamp's names between sends (``VectorManager._encoded_clock``): every
stamp it sends must equal the clock encoded afresh, through joins (bases of 0 leave zero
entries), late bases, deliveries, skips and departures."""

from __future__ import annotations

import random

from groupcomm.module_kit import encode_clock
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.wire.envelopes import decode_received


def _send_and_check(net: LocalNetwork, sender: str, label: str) -> int:
    others = [n for n in net.nodes[sender].members if n != sender]
    if not others:
        return 0
    before = len(net.in_flight)
    net.send(sender, label, others)
    expected = encode_clock(net.manager(sender).clock)
    stamps = [decode_received(f.frame, f.dest).headers["v"]
              for f in net.in_flight[before:] if not f.control]
    assert stamps and all(stamp == expected for stamp in stamps), (label, stamps, expected)
    return len(stamps)


def test_every_stamp_sent_equals_the_clock_encoded_afresh() -> None:
    checked = 0
    for seed in range(40):
        rng = random.Random(seed)
        net = LocalNetwork(["a", "b"], "vector")
        names = iter("cdefgh")
        for step in range(40):
            roll = rng.random()
            if roll < 0.1:
                newcomer = next(names, None)
                if newcomer is not None:
                    told = [m for m in net.nodes if rng.random() < 0.7]
                    net.join(newcomer, told=told)
                    for member in net.nodes:
                        if member != newcomer and member not in told:
                            net.tell_join(member, newcomer)
            elif roll < 0.13 and len(net.nodes) > 2:
                net.leave(rng.choice(sorted(net.nodes)))
            elif roll < 0.6:
                checked += _send_and_check(net, rng.choice(sorted(net.nodes)), f"m{step}")
            for _ in range(rng.randint(0, 4)):
                candidates = net.arrivable()
                if candidates:
                    net.deliver(rng.choice(candidates))
    assert checked > 500
