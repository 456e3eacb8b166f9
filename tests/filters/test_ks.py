"""``ks``: what its stamps carry and what they leave out (its causal delivery is tested
with the other causal modules in test_modules.py and by the model checker)."""

from __future__ import annotations

import random

from groupcomm.core.oracle import check_records
from groupcomm.filters.ks import decode_log, encode_log
from groupcomm.tools.localnet import LocalNetwork
from groupcomm.tools.overhead import measure_overhead
from groupcomm.wire.envelopes import decode_received


def entries_in_flight(net: LocalNetwork, source: str, dest: str) -> dict:
    """The entries the last frame in flight from ``source`` to ``dest`` carries."""
    frame = [f for f in net.in_flight if (f.source, f.dest) == (source, dest)][-1]
    return decode_log(decode_received(frame.frame, dest))[1]


def arrive(net: LocalNetwork, source: str, dest: str) -> None:
    net.deliver(next(i for i, f in enumerate(net.in_flight) if (f.source, f.dest) == (source, dest)))


def test_the_encoding_round_trips_and_is_canonical() -> None:
    entries = {"b": {1: frozenset({"c"}), 3: frozenset()}, "a": {2: frozenset({"c", "b"})}}
    clock, names, newest, flat = encode_log(2, entries)
    assert names == ("a", "b", "c")
    assert newest == (2, 3, 0)  # b's send 3 is a marker: its clock alone
    assert flat == (0, 2, 2, 1, 2, 1, 1, 1, 2)
    net = LocalNetwork(["a", "b"], "ks")
    net.send("a", "x", ["b"])
    message = decode_received(net.in_flight[0].frame, "b")
    assert decode_log(message) == (1, {"a": {1: frozenset()}})


def test_a_multicast_tells_each_copy_where_the_others_went() -> None:
    net = LocalNetwork(["a", "b", "c"], "ks")
    net.send("a", "to both", ["b", "c"])
    assert entries_in_flight(net, "a", "b") == {"a": {1: frozenset({"c"})}}
    assert entries_in_flight(net, "a", "c") == {"a": {1: frozenset({"b"})}}


def test_a_pending_message_travels_until_a_later_message_to_its_destination_covers_it() -> None:
    net = LocalNetwork(["a", "b", "c", "d"], "ks")
    net.send("b", "m1", ["c"])  # stays in flight
    net.send("b", "m2", ["a"])
    arrive(net, "b", "a")
    net.send("a", "m3", ["c"])
    # m3 must wait for m1 at c: the entry goes with it
    assert entries_in_flight(net, "a", "c")["b"][1] == frozenset({"c"})
    net.send("a", "m4", ["d"])
    carried = entries_in_flight(net, "a", "d")
    # m1's wait is covered by m3 (anything after m4 that reaches c waits for m3 there)
    assert all(not dests for dests in carried["b"].values())
    assert carried["a"][1] == frozenset({"c"})  # ...so it is m3's entry that travels
    net.run(random.Random(1))
    assert net.delivered_payloads("c") == ["m1", "m3"]
    assert check_records(net.records).ok


def test_what_a_destination_delivered_is_forgotten() -> None:
    net = LocalNetwork(["a", "b", "c"], "ks")
    net.send("a", "m1", ["b"])
    arrive(net, "a", "b")
    net.send("b", "m2", ["c"])
    # b delivered m1: nobody waits for it any more, only the marker of a's send travels
    assert entries_in_flight(net, "b", "c")["a"] == {1: frozenset()}
    arrive(net, "b", "c")
    net.send("a", "m3", ["c"])
    arrive(net, "a", "c")
    # c knows a's send 1 from b's message and delivered a's send 2: nothing waits
    assert net.manager("c").log["a"] == {2: frozenset()}
    assert net.manager("c").held() == []


def test_stamps_at_fifty_members_are_a_fraction_of_matrix() -> None:
    matrix = measure_overhead("matrix", 50, 20)
    ks = measure_overhead("ks", 50, 20)
    assert ks["held_at_end"] == 0
    assert ks["meta_bytes_per_message"] < 0.45 * matrix["meta_bytes_per_message"]
