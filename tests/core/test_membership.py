"""The session protocol as a pure state machine: notices, arrivals and time in, actions
out (no sockets, no threads, no clock)."""

from __future__ import annotations

import pytest

from groupcomm.core.member_ids import check_client_name, display_name, member_id, split_member
from groupcomm.core.messages import ReceivedMessage
from groupcomm.protocol.membership import (
    TRANSITIONS,
    Arrive,
    DropReturned,
    Incarnated,
    JoinDone,
    LeftSession,
    MemberJoined,
    MemberLeft,
    Membership,
    Phase,
    PhaseError,
    Reject,
    ResendReturned,
    SendCommand,
    ServerBack,
    ServerSilence,
)


def msg(sender: str, n: int = 1) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="s", user_message=f"m{n}",
                           message_id=f"{sender}#{n}", sender=sender, receiver="alice")


def joined(client: str, users: list[str]) -> dict:
    return {"op": "joined", "client": client, "application": "app", "session": "s",
            "is_new_session": False, "is_new_application": False, "all_users": users,
            "addresses": {}}


def welcome(incarnation: int) -> dict:
    return {"op": "welcome", "client": "carol", "server_id": "x", "incarnation": incarnation}


def started(name: str = "carol", users: tuple[str, ...] = ("alice", "bob")) -> Membership:
    m = Membership(name, heartbeat_interval=0.5, now=0.0)
    assert m.start("")[0] == SendCommand("join", {"address": "", "incarnation": 0})
    m.on_notice(welcome(1), 0.0)
    m.on_notice(joined(name, [*users, name]), 0.0)
    assert m.phase == "joined"
    return m


def test_member_ids_name_incarnations_after_the_first() -> None:
    assert member_id("carol", 1) == "carol"
    assert member_id("carol", 3) == "carol~3"
    assert split_member("carol~3") == ("carol", 3)
    assert split_member("carol") == ("carol", 1)
    assert split_member("a~b") == ("a~b", 1)  # not a number: not an incarnation
    assert display_name("carol~2") == "carol"
    with pytest.raises(ValueError, match="'~'"):
        check_client_name("car~ol")
    with pytest.raises(ValueError, match="'#'"):
        check_client_name("carol#1")


def test_first_join_reports_the_member_id_then_success() -> None:
    m = Membership("carol", heartbeat_interval=0.5, now=0.0)
    m.start("")
    assert m.on_notice(welcome(2), 0.0) == []
    actions = m.on_notice(joined("carol~2", ["alice", "carol~2"]), 0.0)
    join = MemberJoined("carol~2", False, False, ("alice", "carol~2"))
    assert actions == [Incarnated("carol~2", None, join), JoinDone()]
    assert m.resolve("carol") == "carol~2" and m.resolve("alice") == "alice"


def test_a_refused_first_join_is_reported() -> None:
    m = Membership("carol", heartbeat_interval=0.5, now=0.0)
    m.start("")
    actions = m.on_notice({"op": "error", "reason": "duplicate_name", "detail": "taken"}, 0.0)
    assert actions == [JoinDone("duplicate_name: taken")] and m.phase == "failed"


def test_a_name_back_under_a_new_incarnation_retires_its_predecessor() -> None:
    m = started("alice", ("carol",))
    actions = m.on_notice(joined("carol~2", ["alice", "carol~2"]), 1.0)
    assert actions == [MemberLeft("carol"),
                       MemberJoined("carol~2", False, False, ("alice", "carol~2"))]
    # the predecessor's frames that arrive late are refused and counted
    refused = m.admit(msg("carol", 9), 1.0)
    assert isinstance(refused[0], Reject) and refused[0].reason == "stale_incarnation"
    assert m.stats["stale_frames"] == 1
    # a late "left" for the retired incarnation changes nothing
    assert m.on_notice({"op": "left", "client": "carol", "application": "app",
                        "session": "s"}, 1.0) == []


def test_a_departed_incarnation_is_stale_before_its_successor_joins() -> None:
    m = started("alice", ("carol",))
    assert m.on_notice({"op": "left", "client": "carol", "application": "app",
                        "session": "s"}, 1.0) == [MemberLeft("carol")]
    assert m.admit(msg("carol"), 1.0)[0].reason == "stale_incarnation"
    # its successor's first frames may overtake its join notice: held, then handed over
    assert m.admit(msg("carol~2"), 1.0) == []
    actions = m.on_notice(joined("carol~2", ["alice", "carol~2"]), 1.5)
    assert actions[-1] == Arrive((msg("carol~2"),))


def test_early_messages_expire_with_a_count_and_are_bounded() -> None:
    m = Membership("alice", heartbeat_interval=0.5, now=0.0, early_wait=2.0, max_early=1)
    assert m.admit(msg("dave"), 0.0) == []
    assert m.admit(msg("dave", 2), 0.0)[0].reason == "unknown_peer"  # over the bound
    assert m.tick(1.0) == []
    assert [a.reason for a in m.tick(2.5)] == ["unknown_peer"]
    assert m.early == []


def test_a_leaver_stays_a_member_until_its_last_direct_frames_are_in() -> None:
    m = started("alice", ("bob",))
    m.on_direct_frame("bob")
    left = {"op": "left", "client": "bob", "application": "app", "session": "s",
            "direct_frames": 3}
    assert m.on_notice(left, 1.0) == []
    assert m.admit(msg("bob", 5), 1.0) == [Arrive((msg("bob", 5),))]
    assert m.on_direct_frame("bob") == []
    assert m.on_direct_frame("bob") == [MemberLeft("bob")]


def test_a_departure_wait_ends_with_the_missing_frames_counted() -> None:
    m = Membership("alice", heartbeat_interval=0.5, now=0.0, depart_wait=1.0)
    m.start("")
    m.on_notice(welcome(1), 0.0)
    m.on_notice(joined("alice", ["bob", "alice"]), 0.0)
    m.on_notice({"op": "left", "client": "bob", "application": "app", "session": "s",
                 "direct_frames": 2}, 0.0)
    assert m.tick(0.5) == []
    assert m.tick(1.5) == [MemberLeft("bob")]
    assert m.stats["departed_frames_missing"] == 2


def test_after_a_server_restart_nothing_is_relayed_until_the_rejoin_and_returned_frames_go_again(
) -> None:
    m = started()
    assert m.may_relay
    rejoin = m.on_returned(("alice",), b"frame-1", 5.0)
    # with the incarnations it has seen, so a restarted server never numbers a new
    # process under one of these names as one it has seen (its ids would be reused)
    assert rejoin == [SendCommand("join", {"address": "", "incarnation": 1,
                                           "known": {"alice": 1, "bob": 1, "carol": 1}})]
    assert not m.may_relay and m.phase == "rejoining"
    # a second returned frame and the heartbeat's error do not send a second join at once
    assert m.on_returned(("bob",), b"frame-2", 5.1) == []
    assert m.on_notice({"op": "error", "reason": "not_a_member", "detail": ""}, 5.2) == []
    assert m.on_notice(welcome(1), 5.3) == []
    actions = m.on_notice(joined("carol", ["carol"]), 5.3)
    assert actions[0] == Incarnated("carol", "carol", MemberJoined("carol", False, False,
                                                                   ("carol",)))
    assert actions[-1] == ResendReturned(((("alice",), b"frame-1"), (("bob",), b"frame-2")))
    assert m.may_relay
    # members that have not rejoined the restarted server yet are still members
    assert set(m.current) == {"alice", "bob", "carol"}


def test_a_client_declared_gone_comes_back_as_a_new_incarnation() -> None:
    m = started()
    m.on_returned(("alice",), b"old frame", 9.0)
    actions = m.on_notice(welcome(2), 9.1)
    assert actions == [DropReturned(1)]
    # bob left while carol was out: her own join notice no longer lists him
    actions = m.on_notice(joined("carol~2", ["alice", "carol~2"]), 9.1)
    assert MemberLeft("bob") in actions
    # her own predecessor is retired without a "left" (her node is replaced instead)
    assert MemberLeft("carol") not in actions and m.is_stale("carol")
    assert actions[-1] == Incarnated("carol~2", "carol", MemberJoined(
        "carol~2", False, False, ("alice", "carol~2")))
    assert m.stats["reincarnations"] == 1 and m.member == "carol~2"


def test_a_silent_server_is_reported_once() -> None:
    m = started()
    assert m.heartbeat(1.0) == [SendCommand("heartbeat")]
    assert m.heartbeat(3.0) == [ServerSilence(3.0), SendCommand("heartbeat")]
    assert m.heartbeat(3.5) == [SendCommand("heartbeat")]
    assert m.server_unreachable and m.stats["server_outages"] == 1
    assert m.on_notice({"op": "pong", "server_id": "x"}, 4.0) == [ServerBack()]
    assert not m.server_unreachable


def test_another_server_is_joined_as_a_restarted_one_and_its_silence_measured_anew(
        ) -> None:
    m = started()
    assert m.heartbeat(3.0)[0] == ServerSilence(3.0)
    actions = m.server_changed(3.1)  # failover: the next server in the session's order
    assert actions == [SendCommand("join", {"address": "", "incarnation": 1,
                                            "known": {"alice": 1, "bob": 1, "carol": 1}})]
    assert m.phase is Phase.REJOINING and not m.may_relay
    assert m.heartbeat(4.0) == [SendCommand("heartbeat")]  # measured from the move
    assert m.heartbeat(5.2) == [ServerSilence(2.1), SendCommand("heartbeat")]  # it too
    assert m.server_changed(5.3)[0].op == "join"  # a second move rejoins at once
    assert m.on_notice(joined("carol", ["alice", "bob", "carol"]), 5.5)[0] == ServerBack()
    assert m.phase is Phase.JOINED


def test_a_first_join_to_a_server_that_is_gone_goes_to_the_next() -> None:
    m = Membership("carol", heartbeat_interval=0.5, now=0.0)
    m.start("")
    assert m.server_changed(0.5) == [SendCommand("join", {"address": "", "incarnation": 0})]
    assert m.phase is Phase.JOINING


def test_the_phases_move_by_the_table_and_refuse_what_does_not_fit() -> None:
    m = started()
    assert m.phase is Phase.JOINED and m.may_relay
    m.on_notice({"op": "error", "reason": "not_a_member", "detail": "restarted"}, 1.0)
    assert m.phase is Phase.REJOINING and not m.may_relay and m.joined
    m.on_notice(joined("carol", ["alice", "bob", "carol"]), 1.0)
    assert m.phase is Phase.JOINED
    m.leave({})
    assert m.phase is Phase.LEAVING
    assert m.on_notice({"op": "left", "client": "carol", "application": "app",
                        "session": "s"}, 2.0) == [LeftSession()]
    assert m.phase is Phase.LEFT and TRANSITIONS[Phase.LEFT] == {}
    with pytest.raises(PhaseError, match="'leave' cannot happen in phase 'left'"):
        m.leave({})
    # a stalled client replaced by a new start of its name is out for good
    r = started()
    r.on_notice({"op": "error", "reason": "not_a_member", "detail": "gone"}, 1.0)
    assert r.on_notice({"op": "error", "reason": "replaced", "detail": "by carol~2"},
                       1.0) == [LeftSession("replaced")]
    assert r.phase is Phase.LEFT
