"""``ks``: what its stamps carry and what they leave out (its causal delivery is tested
with the other causal modules in test_modules.py and by the model checker)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.messages import ReceivedMessage
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


@pytest.mark.long  # a long session replayed: about 10 s
def test_stamps_stay_small_as_the_session_goes_on() -> None:
    # matrix's stamps fill up with the n x n counters as a session goes on; ks carries
    # only what a destination may still wait for, so its share falls (BENCHMARKS.md)
    matrix = measure_overhead("matrix", 50, 50)
    ks = measure_overhead("ks", 50, 50)
    assert ks["held_at_end"] == 0 and ks["app_messages"] == 2500
    assert ks["meta_bytes_per_message"] < 0.25 * matrix["meta_bytes_per_message"]


_ATOMS = st.one_of(st.integers(-3, 9), st.sampled_from(["a", "b", "", "c"]), st.none(),
                   st.booleans(), st.binary(max_size=2))
_VALUES = st.recursive(_ATOMS, lambda inner: st.tuples(inner) | st.lists(inner, max_size=6)
                       .map(tuple), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES | st.tuples(st.integers(0, 4), st.tuples(st.sampled_from("abc")),
                                 st.tuples(st.integers(0, 4)),
                                 st.lists(st.integers(0, 4), max_size=9).map(tuple)))
def test_any_stamp_is_decoded_or_refused_with_a_protocol_violation(value) -> None:
    message = ReceivedMessage(application_name="app", session_name="session",
                              user_message="x", message_id="a#1", sender="a",
                              headers={"K": value}, receiver="b")
    try:
        clock, entries = decode_log(message)
    except ProtocolViolation as error:
        assert str(error).startswith("ks: ")
        return
    assert max(entries["a"]) == clock  # accepted: the message's own entry is there
    for sends in entries.values():
        assert all(type(t) is int and t >= 1 and isinstance(d, frozenset)
                   for t, d in sends.items())
