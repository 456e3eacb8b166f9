"""The session server's rules, driven without sockets: typed inputs in, actions out."""

from __future__ import annotations

import pytest

from groupcomm.protocol.registry import (
    PROBE,
    Forward,
    Heartbeat,
    Join,
    Leave,
    Notify,
    Rejected,
    Relay,
    Return,
    SessionRegistry,
    Tick,
)
from groupcomm.protocol.registry_events import BadCommand, command_input, routed_input

APP, SESSION = "a", "s"


def registry(**options: object) -> SessionRegistry:
    return SessionRegistry(server_id="test", now=0.0, heartbeat_timeout=10.0, **options)


def join(conn: str, client: str | None = None, now: float = 0.0, **fields: object) -> Join:
    return Join(conn, client or conn, APP, SESSION, now, **fields)


def notices(actions: list, op: str) -> list[tuple[object, dict]]:
    return [(a.conn, dict(a.fields)) for a in actions
            if isinstance(a, Notify) and a.op == op]


def test_every_member_hears_each_join_in_one_order_and_the_newcomer_last() -> None:
    r = registry()
    r.handle(join("alice"))
    actions = r.handle(join("bob"))
    assert [(type(a).__name__, a.conn, a.op) for a in actions] == [
        ("Notify", "bob", "welcome"), ("Notify", "alice", "joined"), ("Notify", "bob", "joined")]
    assert notices(actions, "joined")[0][1]["all_users"] == ["alice", "bob"]
    assert r.members_of(APP, SESSION) == ["alice", "bob"]


def test_a_name_that_comes_back_is_its_next_incarnation_and_a_restart_keeps_it() -> None:
    r = registry()
    r.handle(join("c1", "carol"))
    r.handle(Leave("c1", "carol", APP, SESSION, 1.0))
    assert notices(r.handle(join("c2", "carol")), "welcome")[0][1]["incarnation"] == 2
    r.handle(Leave("c2", "carol", APP, SESSION, 2.0))
    # a proposal at or below the last incarnation given here: removed meanwhile
    assert notices(r.handle(join("c3", "carol", incarnation=2)), "welcome")[0][1][
        "incarnation"] == 3
    restarted = registry()  # a new server that never met carol keeps what she had
    assert notices(restarted.handle(join("c4", "carol", incarnation=7)), "welcome")[0][1][
        "incarnation"] == 7


def test_a_name_held_by_a_silent_connection_is_taken_over_after_the_probe_wait() -> None:
    r = registry()
    r.handle(join("alice"))
    r.handle(join("old", "bob"))
    asked = r.handle(join("new", "bob", now=1.0))
    assert asked == [Notify("old", PROBE, {"probe": 1})]
    assert r.next_deadline() == pytest.approx(1.0 + r.takeover_wait)
    assert r.handle(join("new", "bob", now=1.5)) == []  # a retried join waits too
    assert r.handle(Tick(1.0 + r.takeover_wait / 2, 1.0 + r.takeover_wait / 2)) == []
    actions = r.handle(Tick(1.0 + r.takeover_wait, 1.0 + r.takeover_wait))
    assert [(a.conn, a.op, a.fields.get("client")) for a in actions
            if isinstance(a, Notify)] == [
        ("alice", "left", "bob"), ("new", "welcome", "bob"), ("alice", "joined", "bob~2"),
        ("new", "joined", "bob~2")]
    assert r.members_of(APP, SESSION) == ["alice", "bob~2"]
    assert r.next_deadline() is None


def test_a_holder_that_answers_the_probe_keeps_its_name() -> None:
    r = registry()
    r.handle(join("old", "bob"))
    r.handle(join("new", "bob", now=1.0))
    # a heartbeat that does not echo the probe (sent before it) proves nothing
    assert notices(r.handle(Heartbeat("old", "bob", APP, SESSION, 1.1)), "error") == []
    answered = r.handle(Heartbeat("old", "bob", APP, SESSION, 1.2, probe=1))
    refused = notices(answered, "error")
    assert refused[0][0] == "new" and refused[0][1]["reason"] == "duplicate_name"
    assert "is running" in refused[0][1]["detail"]
    assert notices(r.handle(Tick(5.0, 5.0)), "welcome") == []  # nothing pending any more
    assert r.members_of(APP, SESSION) == ["bob"]


def test_a_holder_that_leaves_while_asked_hands_its_name_over_at_once() -> None:
    r = registry()
    r.handle(join("old", "bob"))
    r.handle(join("new", "bob", now=1.0))
    actions = r.handle(Leave("old", "bob", APP, SESSION, 1.1))
    assert notices(actions, "welcome") == [("new", {"client": "bob", "server_id": "test",
                                                    "incarnation": 2})]


def test_a_second_newcomer_for_a_name_being_taken_over_is_refused() -> None:
    r = registry()
    r.handle(join("old", "bob"))
    r.handle(join("new", "bob", now=1.0))
    refused = notices(r.handle(join("third", "bob", now=1.1)), "error")
    assert refused[0][0] == "third" and "taking it over" in refused[0][1]["detail"]


def test_frames_reach_only_current_members_and_come_back_to_strangers() -> None:
    r = registry()
    r.handle(join("alice"))
    r.handle(join("bob"))
    # past the window in which a new server keeps frames for names it has not met
    relay = Relay("alice", "alice", APP, SESSION, 100.0, dests=("bob", "bob~2", "zed"),
                  frame=b"f")
    actions = r.handle(relay)
    assert Forward("bob", b"f", "alice") in actions
    assert [a.reason for a in actions if isinstance(a, Rejected)] == ["unknown_peer"] * 2
    stranger = Relay("mallory", "mallory", APP, SESSION, 1.0, dests=("bob",), frame=b"g")
    assert Return("mallory", b"g", ("bob",)) in r.handle(stranger)


def test_a_routed_frame_is_relayed_as_the_member_its_connection_joined_as() -> None:
    r = registry()
    r.handle(join("alice"))
    r.handle(join("bob"))
    relay = routed_input(r.by_conn, "alice", 1.0, ("bob",), b"f")
    assert (relay.client, relay.application, relay.session) == ("alice", APP, SESSION)
    assert Forward("bob", b"f", "alice") in r.handle(relay)
    # a connection that joined as nobody asks as nobody: its frame comes back
    stranger = routed_input(r.by_conn, "mallory", 1.0, ("bob",), b"g")
    assert Return("mallory", b"g", ("bob",)) in r.handle(stranger)


def test_a_new_server_keeps_frames_for_names_it_has_not_met_until_they_join() -> None:
    r = registry()
    r.handle(join("alice", incarnation=4))
    r.handle(Relay("alice", "alice", APP, SESSION, 1.0, dests=("carol~2",), frame=b"f"))
    actions = r.handle(join("carol", incarnation=2, now=2.0))
    # her join notice reaches her before the frame kept for her
    kinds = [(type(a).__name__, a.conn) for a in actions]
    assert kinds.index(("Notify", "carol")) < kinds.index(("Forward", "carol"))
    assert Forward("carol", b"f", "alice~4") in actions


def test_silence_is_judged_up_to_the_moment_the_host_caught_up() -> None:
    r = registry()
    r.handle(join("alice"))
    assert r.handle(Tick(now=20.0, caught_up_at=5.0)) == []  # behind: not silent yet
    assert notices(r.handle(Tick(now=20.0, caught_up_at=20.0)), "left") == []
    assert r.members_of(APP, SESSION) == []


def test_commands_are_validated_into_typed_inputs() -> None:
    base = {"client": "alice", "application": APP, "session": SESSION}
    assert isinstance(command_input({"op": "join", **base, "address": ""}, b"c", 0.0), Join)
    with pytest.raises(BadCommand, match="client must be a non-empty string"):
        command_input({"op": "join", **base, "client": ""}, b"c", 0.0)
    for op in ("relay", "pong"):  # messages are routed frames, not commands
        with pytest.raises(BadCommand, match="not a client's command"):
            command_input({"op": op, **base, "dests": ["bob"]}, b"c", 0.0)
    leave = command_input({"op": "leave", **base, "direct_frames": {"bob": -1}}, b"c", 0.0)
    assert isinstance(leave, Leave) and not leave.counts_valid


def test_a_join_under_another_keys_name_is_refused_with_keys() -> None:
    r = registry(authenticated=True)
    actions = r.handle(join("c", "alice", user="mallory"))
    assert [a.reason for a in actions if isinstance(a, Rejected)] == ["name_not_authenticated"]
    assert r.members_of(APP, SESSION) == []


def stalling_registry() -> SessionRegistry:
    """A registry whose host ticks every 0.25 s while it runs (timeout 1 s)."""
    return SessionRegistry(server_id="test", now=0.0, heartbeat_timeout=1.0,
                           notice_stalls=True)


def ticks(r: SessionRegistry, start: float, end: float) -> list:
    """The host ticking every 0.25 s from ``start`` to ``end``; the actions."""
    out: list = []
    now = start
    while now <= end + 1e-9:
        out += r.handle(Tick(now, now))
        now += 0.25
    return out


def test_a_resumed_server_whose_members_moved_on_forgets_the_session_quietly() -> None:
    r = stalling_registry()
    r.handle(join("a1", "alice"))
    r.handle(join("b1", "bob"))
    r.handle(Leave("b1", "bob", APP, SESSION, 0.1))
    r.handle(join("b2", "bob", now=0.2))  # bob~2: a name that comes back is numbered on
    ticks(r, 0.25, 0.75)
    # stopped for 5 s; what waited in the connections arrives at once on resuming
    r.handle(Heartbeat("a1", "alice", APP, SESSION, 5.8))
    held = ticks(r, 5.75, 6.5)  # silence does not count for a timeout after the stall
    assert r.members_of(APP, SESSION) == ["alice", "bob~2"] and held == []
    decided = ticks(r, 6.75, 7.0)
    # nobody kept sending: the session is forgotten without a departure notice
    assert decided == [] and r.members_of(APP, SESSION) == [] and r.stepped_aside == 1
    # the members that moved come back under their ids, from new connections
    assert notices(r.handle(join("a2", "alice", now=8.0, incarnation=1)), "welcome")[0][1][
        "incarnation"] == 1
    assert notices(r.handle(join("b3", "bob", now=8.0, incarnation=2)), "welcome")[0][1][
        "incarnation"] == 2
    assert r.members_of(APP, SESSION) == ["alice", "bob~2"]
    # a new process under a name it had is still numbered above it
    r.handle(Leave("a2", "alice", APP, SESSION, 8.1))
    assert notices(r.handle(join("a3", "alice", now=8.2)), "welcome")[0][1][
        "incarnation"] == 2


def test_a_resumed_server_keeps_a_session_whose_members_are_still_attached() -> None:
    r = stalling_registry()
    r.handle(join("a1", "alice"))
    r.handle(join("b1", "bob"))
    ticks(r, 0.25, 0.5)
    now = 3.0  # after a stall of 2.5 s, alice's heartbeats go on; bob's stopped
    actions: list = []
    while now <= 6.0:
        r.handle(Heartbeat("a1", "alice", APP, SESSION, now))
        actions += r.handle(Tick(now, now))
        now += 0.25
    assert r.stepped_aside == 0 and r.members_of(APP, SESSION) == ["alice"]
    assert [(a.conn, a.op, a.fields["client"]) for a in actions
            if isinstance(a, Notify)] == [("a1", "left", "bob")]


def test_without_notice_of_stalls_a_late_tick_times_members_out() -> None:
    r = SessionRegistry(server_id="test", now=0.0, heartbeat_timeout=1.0)
    r.handle(join("a1", "alice"))
    r.handle(Tick(0.25, 0.25))
    r.handle(Tick(5.0, 5.0))
    assert r.members_of(APP, SESSION) == []


def test_a_member_back_during_the_wait_after_a_stall_keeps_its_id() -> None:
    r = stalling_registry()
    r.handle(join("a1", "alice"))
    r.handle(join("b1", "bob"))
    ticks(r, 0.25, 0.5)
    r.handle(Tick(4.0, 4.0))  # stopped for 3.5 s; bob's probe brings him back at once
    actions = r.handle(join("b2", "bob", now=4.1, incarnation=1))
    assert notices(actions, "welcome")[0][1]["incarnation"] == 1
    assert notices(actions, "left") == [] and r.members_of(APP, SESSION) == ["alice", "bob"]
    # bob's new connection is the member now and goes on; alice stays silent
    left: list = []
    now = 4.25
    while now <= 6.0:
        r.handle(Heartbeat("b2", "bob", APP, SESSION, now))
        left += r.handle(Tick(now, now))
        now += 0.25
    # once the wait is over, the session has bob: alice is reported gone to him
    assert [(a.conn, a.op, a.fields["client"]) for a in left
            if isinstance(a, Notify)] == [("b2", "left", "alice")]
    # outside the wait, the same incarnation from a new connection asks the holder
    assert r.handle(join("b3", "bob", now=6.1, incarnation=1)) == [
        Notify("b2", PROBE, {"probe": 1})]
