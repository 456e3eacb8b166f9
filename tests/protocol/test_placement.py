"""Rendezvous placement of sessions over session servers, and one client's failover walk
(groupcomm.protocol.placement; docs/deploy.md)."""

from __future__ import annotations

from collections import Counter

import pytest

from groupcomm.protocol.placement import Failover, rendezvous_order, session_home

SERVERS = [f"tcp://10.0.0.{i}:5555" for i in range(1, 5)]
NAMES = [f"session-{i}" for i in range(1000)]


def test_order_is_stable_and_ignores_list_order_and_duplicates():
    order = rendezvous_order("class-3", SERVERS)
    assert sorted(order) == sorted(SERVERS)
    assert rendezvous_order("class-3", list(reversed(SERVERS))) == order
    assert rendezvous_order("class-3", SERVERS + SERVERS[:2]) == order
    # a fixed value: the same in every process and every Python (no hash seed)
    assert session_home("class-3", SERVERS) == order[0]
    assert rendezvous_order("class-3", SERVERS) == order


def test_sessions_spread_evenly_over_servers():
    homes = Counter(session_home(name, SERVERS) for name in NAMES)
    assert set(homes) == set(SERVERS)
    # 250 each on average; a binomial's spread at 1,000 names stays well within 20%
    assert all(200 <= count <= 300 for count in homes.values()), homes


def test_removing_a_server_moves_only_its_sessions_to_their_next_server():
    before = {name: rendezvous_order(name, SERVERS) for name in NAMES}
    gone = SERVERS[1]
    rest = [s for s in SERVERS if s != gone]
    moved = 0
    for name in NAMES:
        after = session_home(name, rest)
        if before[name][0] == gone:
            moved += 1
            assert after == before[name][1]  # its failover server is its new home
        else:
            assert after == before[name][0]
    assert 200 <= moved <= 300


def test_adding_a_server_takes_sessions_only_from_others():
    grown = [*SERVERS, "tcp://10.0.0.9:5555"]
    for name in NAMES:
        home = session_home(name, grown)
        assert home in (session_home(name, SERVERS), "tcp://10.0.0.9:5555")


def test_no_server_is_an_error():
    with pytest.raises(ValueError, match="no session server"):
        rendezvous_order("s", [])
    with pytest.raises(ValueError, match="no session server"):
        Failover(())
    with pytest.raises(ValueError, match="probe_every"):
        Failover(("a",), probe_every=0)


def test_failover_walks_the_order_and_wraps():
    walk = Failover(("a", "b", "c"), now=0.0)
    assert walk.current == "a"
    assert walk.silent(1.0) == "b"
    assert walk.silent(2.0) == "c"
    assert walk.silent(3.0) == "a"
    assert walk.moves["silent"] == 3


def test_a_single_server_has_nowhere_to_go():
    walk = Failover(("a",))
    assert walk.silent(1.0) is None
    assert walk.current == "a"
    assert walk.probes_due(100.0) == ()


def test_probes_ask_the_servers_ranked_before_and_move_back_to_the_first_that_answers():
    walk = Failover(("a", "b", "c"), probe_every=5.0, now=0.0)
    assert walk.probes_due(1.0) == ()  # on the home server: nothing to ask
    walk.silent(1.0)
    walk.silent(2.0)
    assert walk.current == "c"
    assert walk.probes_due(3.0) == ()  # not yet: probe_every after the move
    assert walk.probes_due(7.0) == ("a", "b")
    assert walk.probes_due(8.0) == ()
    assert walk.answered("c") is None  # the one in use
    assert walk.answered("b") == "b"
    assert walk.answered("b") is None
    assert walk.answered("a") == "a"
    assert walk.moves["preferred"] == 2
    assert walk.probes_due(100.0) == ()


def test_members_with_the_same_view_converge():
    # two members of one session, one moved on a silence the other noticed later: once
    # both heard the same answers they use the same server
    order = rendezvous_order("team", SERVERS)
    first, second = Failover(order), Failover(order)
    first.silent(1.0)
    second.silent(3.0)
    assert first.current == second.current == order[1]
    first.probes_due(10.0)
    second.probes_due(10.0)
    assert first.answered(order[0]) == second.answered(order[0]) == order[0]
