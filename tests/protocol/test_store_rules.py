"""The session store's rules (groupcomm.protocol.store_rules), without I/O."""

from __future__ import annotations

import itertools

import pytest

from groupcomm.protocol.store_rules import Candidate, StorePolicy, StoreRules


def _rules(every: int = 3, seconds: float = 10.0) -> StoreRules:
    ids = (f"gen{n}" for n in itertools.count(1))
    return StoreRules(StorePolicy(every, seconds, answer_timeout=5.0), lambda: next(ids))


def _msg(mid: str, dests: tuple[str, ...], grouped: bool = False) -> Candidate:
    return Candidate(mid, mid.split("#")[0], dests, 0, b"", (), grouped)


def test_the_policy_refuses_nonsense():
    with pytest.raises(ValueError):
        StorePolicy(0, 1.0)
    with pytest.raises(ValueError):
        StorePolicy(1, 0.0)


def test_a_first_join_creates_a_generation_and_a_newcomer_alone_gets_the_state():
    rules = _rules()
    first = rules.admitted("ed", "doc", "a~1", others=[], wants_state=True,
                           has_state=False, generation="", now=0.0)
    assert first.create and first.generation == "gen1" and not first.send_state
    rules.stored("ed", "doc", 2)
    rules.member_left("ed", "doc", "a~1")
    again = rules.admitted("ed", "doc", "b~1", others=[], wants_state=True,
                           has_state=False, generation="", now=1.0)
    assert (again.create, again.send_state, again.changed) == (False, True, False)
    with_holder = rules.admitted("ed", "doc", "c~1", others=["b~1"], wants_state=True,
                                 has_state=False, generation="", now=1.0)
    assert not with_holder.send_state  # b holds the state: it answers


def test_newcomers_joining_together_each_get_the_stored_state():
    """Nobody present holds the state (the others wait for theirs): the store answers
    each one, and a newcomer that a member answers is no holder until it says so."""
    rules = _rules()
    rules.loaded("ed", "doc", "g", messages=5, has_snapshot=True, now=0.0)
    first = rules.admitted("ed", "doc", "a~1", others=["w~1"], wants_state=True,
                           has_state=False, generation="", now=1.0)
    second = rules.admitted("ed", "doc", "b~1", others=["w~1", "a~1"], wants_state=True,
                            has_state=False, generation="", now=1.0)
    assert first.send_state and not second.send_state  # a holds it once it is sent
    rules.member_left("ed", "doc", "a~1")
    third = rules.admitted("ed", "doc", "c~1", others=["w~1", "b~1"], wants_state=True,
                           has_state=False, generation="", now=2.0)
    assert third.send_state  # b never said it installed a state: the store answers
    rules.state_held("ed", "doc", "b~1")
    fourth = rules.admitted("ed", "doc", "d~1", others=["b~1"], wants_state=True,
                            has_state=False, generation="", now=2.0)
    assert not fourth.send_state


def test_a_new_process_under_a_known_name_gets_the_stored_state():
    rules = _rules()
    rules.loaded("ed", "doc", "g", messages=5, has_snapshot=True, now=0.0)
    # ann~2: the registry remembers ann~1, yet this process holds nothing
    verdict = rules.admitted("ed", "doc", "ann~2", others=[], wants_state=True,
                             has_state=False, generation="", now=1.0)
    assert verdict.send_state


def test_a_rejoin_of_the_same_generation_gets_nothing_and_another_generation_is_told():
    rules = _rules()
    rules.loaded("ed", "doc", "stored-gen", messages=4, has_snapshot=True, now=0.0)
    same = rules.admitted("ed", "doc", "a~1", others=[], wants_state=True,
                          has_state=True, generation="stored-gen", now=1.0)
    assert (same.send_state, same.changed) == (False, False)
    assert rules.holds("ed", "doc", "a~1")
    rules.member_left("ed", "doc", "a~1")
    other = rules.admitted("ed", "doc", "b~1", others=[], wants_state=True,
                           has_state=True, generation="old-gen", now=1.0)
    assert (other.generation, other.send_state, other.changed) == ("stored-gen", True, True)
    # the store was dropped: a new generation, and the member is told its state is
    # of another one
    rules.dropped("ed", "doc")
    fresh = rules.admitted("ed", "doc", "b~2", others=[], wants_state=True,
                           has_state=True, generation="stored-gen", now=2.0)
    assert fresh.create and fresh.changed and fresh.generation == "gen1"


def test_a_member_without_the_state_is_never_asked_and_its_snapshot_never_kept():
    rules = _rules()
    rules.loaded("ed", "doc", "g", messages=5, has_snapshot=True, now=0.0)
    members = {("ed", "doc"): ["w~1", "n~1"]}

    def members_of(app, session):
        return members.get((app, session), [])

    # w joined without wanting state (it has none of the kept history), n is a
    # newcomer a member answers: neither holds the state
    rules.admitted("ed", "doc", "w~1", others=[], wants_state=False, has_state=False,
                   generation="", now=0.0)
    rules.admitted("ed", "doc", "h~1", others=["w~1"], wants_state=True, has_state=False,
                   generation="", now=0.0)  # gets the stored state: a holder
    rules.admitted("ed", "doc", "n~1", others=["w~1", "h~1"], wants_state=True,
                   has_state=False, generation="", now=0.0)
    assert rules.due(100.0, members_of) == []  # h is not in the session list here
    members[("ed", "doc")].append("h~1")
    [ask] = rules.due(100.0, members_of)
    assert ask.member == "h~1"
    # an answer from someone else for that request is not kept, even when it claims it
    assert not rules.answered("ed", "doc", "w~1", ask.request, available=True, now=100.0)
    # a request that reached a member who lost its holding (guard in answered)
    kept = rules.sessions[("ed", "doc")]
    kept.holders.discard("h~1")
    assert not rules.answered("ed", "doc", "h~1", ask.request, available=True, now=100.0)
    assert rules.due(101.0, members_of) == []
    rules.state_held("ed", "doc", "n~1")
    assert [a.member for a in rules.due(102.0, members_of)] == ["n~1"]


def test_only_messages_to_every_other_member_are_kept():
    rules = _rules()
    rules.admitted("im", "o", "a", others=[], wants_state=True, has_state=False,
                   generation="", now=0.0)
    members = ["a", "b", "c"]
    kept = rules.keep("im", "o", members, [
        _msg("a#1", ("b", "c")), _msg("a#2", ("b",)), _msg("a#3", ("a", "b", "c"))])
    assert [c.message_id for c in kept] == ["a#1", "a#3"]
    assert rules.keep("other", "session", members, [_msg("a#1", ("b", "c"))]) == []
    assert rules.keep("im", "o", ["a"], [_msg("a#4", ("a",))]) == []  # to itself
    # after a server restart, before b is back: its frame waits for it, and is kept
    assert [c.message_id for c in rules.keep("im", "o", ["a"], [_msg("a#5", ("b",))])] == [
        "a#5"]


def test_copies_of_a_split_send_are_kept_once_when_they_cover_everyone():
    rules = _rules()
    rules.admitted("im", "o", "a", others=[], wants_state=True, has_state=False,
                   generation="", now=0.0)
    members = ["a", "b", "c"]
    assert rules.keep("im", "o", members, [_msg("a#1", ("b",), grouped=True)]) == []
    kept = rules.keep("im", "o", members, [_msg("a#1", ("c",), grouped=True)])
    assert [c.message_id for c in kept] == ["a#1"]
    assert rules.keep("im", "o", members, [_msg("a#1", ("b",), grouped=True)]) == []


def test_snapshots_are_asked_for_at_once_then_by_count_and_time_from_the_next_member():
    rules = _rules(every=3, seconds=10.0)
    rules.admitted("ed", "doc", "a~1", others=[], wants_state=True, has_state=False,
                   generation="", now=0.0)
    rules.admitted("ed", "doc", "b~1", others=["a~1"], wants_state=True, has_state=False,
                   generation="", now=0.0)
    rules.state_held("ed", "doc", "b~1")
    members = {("ed", "doc"): ["a~1", "b~1"]}

    def members_of(app, session):
        return members.get((app, session), [])

    [ask] = rules.due(0.0, members_of)
    assert (ask.member, ask.request) == ("a~1", 1)
    assert rules.due(1.0, members_of) == []  # one request at a time
    assert not rules.answered("ed", "doc", "a~1", 1, available=False, now=1.0)
    [ask] = rules.due(1.0, members_of)  # a had none: b is asked
    assert ask.member == "b~1"
    assert not rules.answered("ed", "doc", "a~1", ask.request, available=True, now=1.5)
    assert rules.answered("ed", "doc", "b~1", ask.request, available=True, now=1.5)
    rules.snapshot_kept("ed", "doc", dropped=0, now=1.5)
    assert rules.due(2.0, members_of) == []
    rules.stored("ed", "doc", 2)
    assert rules.due(3.0, members_of) == []
    rules.stored("ed", "doc", 1)
    [ask] = rules.due(3.0, members_of)  # three kept since
    assert ask.member == "a~1"
    assert rules.due(8.1, members_of)[0].member == "b~1"  # a did not answer in 5 s
    rules.answered("ed", "doc", "b~1", ask.request + 1, available=True, now=8.2)
    rules.snapshot_kept("ed", "doc", dropped=3, now=8.2)
    rules.stored("ed", "doc", 1)
    assert rules.due(10.0, members_of) == []
    assert [a.member for a in rules.due(18.3, members_of)] == ["a~1"]  # 10 s later


def test_the_replay_leaves_out_what_the_snapshot_reflects_in_arrival_order():
    assert StoreRules.replayed({"a#1", "b#2"}, ["b#1", "a#1", "b#2", "a#2"]) == [0, 3]


def test_direct_routing_is_refused():
    assert StoreRules.refuse_join("tcp://127.0.0.1:4000") is not None
    assert StoreRules.refuse_join("") is None


def test_a_session_found_at_the_start_asks_a_member_back_with_the_state_at_once():
    """What was relayed while no server (or no store) kept it is in no snapshot: the
    first member back holding the state gives one, whatever the policy's count."""
    rules = _rules(every=1000, seconds=1000.0)
    rules.loaded("ed", "doc", "g", messages=1, has_snapshot=True, now=0.0)

    def members_of(app, session):
        return ["n~1", "a~1"]

    rules.admitted("ed", "doc", "n~1", others=[], wants_state=False, has_state=False,
                   generation="", now=0.0)
    rules.admitted("ed", "doc", "a~1", others=["n~1"], wants_state=True, has_state=True,
                   generation="g", now=0.0)
    [ask] = rules.due(1.0, members_of)
    assert ask.member == "a~1"  # n holds nothing of it
    assert rules.answered("ed", "doc", "a~1", ask.request, available=True, now=1.0)
    rules.snapshot_kept("ed", "doc", dropped=1, now=1.0)
    assert rules.due(2.0, members_of) == []


def test_a_store_that_failed_leaves_every_session_behind_until_a_holder_snapshot():
    """While the store fails nothing is asked; holders are still followed; once it works
    again each session asks a holder at once, a newcomer with no holder present is
    refused, and the kept snapshot makes the session whole."""
    rules = _rules(every=1000, seconds=1000.0)
    present = {("ed", "doc"): ["a~1"], ("im", "new"): []}

    def members_of(app, session):
        return present[(app, session)]

    rules.admitted("ed", "doc", "a~1", others=[], wants_state=True, has_state=False,
                   generation="", now=0.0)
    rules.stored("ed", "doc", 3)
    rules.store_down()
    assert rules.due(100.0, members_of) == [] and rules.behind() == [("ed", "doc")]
    # b joins while the store fails, a present: it asks a, and holds once it says so
    present[("ed", "doc")] = ["a~1", "b~1"]
    assert not rules.admitted("ed", "doc", "b~1", others=["a~1"], wants_state=True,
                              has_state=False, generation="", now=1.0).refused
    rules.state_held("ed", "doc", "b~1")
    # a session begun meanwhile is made in the store later, and is behind from its start
    born = rules.admitted("im", "new", "z~1", others=[], wants_state=True,
                          has_state=False, generation="", now=1.0)
    assert not born.create and not rules.sessions[("im", "new")].created
    rules.member_left("im", "new", "z~1")
    rules.member_left("ed", "doc", "a~1")
    present[("ed", "doc")] = ["b~1"]
    rules.store_up({("ed", "doc"): ("gen1", 3, False), ("im", "new"): (born.generation, 0,
                                                                        False)}, now=2.0)
    assert sorted(rules.behind()) == [("ed", "doc"), ("im", "new")]
    # nobody in im/new holds its state: a newcomer gets nothing rather than a hole
    refused = rules.admitted("im", "new", "y~1", others=[], wants_state=True,
                             has_state=False, generation="", now=2.0)
    assert refused.refused and not refused.send_state
    assert not rules.holds("im", "new", "y~1")
    [ask] = rules.due(2.0, members_of)
    assert (ask.session, ask.member) == ("doc", "b~1")  # at once, from a holder
    assert rules.answered("ed", "doc", "b~1", ask.request, available=True, now=2.5)
    rules.snapshot_kept("ed", "doc", dropped=3, now=2.5)
    assert rules.behind() == [("im", "new")]
    rules.member_left("ed", "doc", "b~1")
    whole = rules.admitted("ed", "doc", "c~1", others=[], wants_state=True,
                           has_state=False, generation="", now=3.0)
    assert whole.send_state and not whole.refused
