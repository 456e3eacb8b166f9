"""The newcomer's side of state transfer as a pure state machine."""

from __future__ import annotations

from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.session_messages import StateReply
from groupcomm.protocol.state_transfer import STORE, Ask, Install, NewcomerState


def msg(mid: str) -> ReceivedMessage:
    return ReceivedMessage(application_name="a", session_name="s", user_message=mid,
                           message_id=mid, sender=mid.split("#")[0], receiver="carol")


def test_alone_there_is_nothing_to_ask() -> None:
    state = NewcomerState()
    [install] = state.joined("carol", ["carol"], 0.0)
    assert isinstance(install, Install) and install.reply is None
    assert not state.waiting and state.deliver(msg("a#1")) == "deliver"


def test_deliveries_wait_for_the_snapshot_and_what_it_reflects_is_skipped() -> None:
    state = NewcomerState()
    assert state.joined("carol", ["alice", "bob", "carol"], 0.0) == [Ask("alice")]
    assert state.deliver(msg("bob#4")) == "hold"
    assert state.deliver(msg("alice#7")) == "hold"
    # an answer from someone not asked is ignored
    assert state.reply("bob", StateReply(True, "x", ("bob#4",)), 0.1) == []
    [install] = state.reply("alice", StateReply(True, ["..."], ("bob#4", "bob#3")), 0.2)
    assert install.reply.state == ["..."]
    assert [m.message_id for m in install.release] == ["alice#7"]
    assert [m.message_id for m in install.skipped] == ["bob#4"]
    # a copy the snapshot reflects that arrives later is skipped too
    assert state.deliver(msg("bob#3")) == "skip"
    assert state.deliver(msg("bob#5")) == "deliver"


def test_the_next_member_is_asked_when_one_cannot_answer() -> None:
    state = NewcomerState(timeout=2.0)
    assert state.joined("carol", ["alice", "bob", "dave", "carol"], 0.0) == [Ask("alice")]
    assert state.reply("alice", StateReply(False), 0.5) == [Ask("bob")]
    assert state.tick(1.0) == []
    assert state.tick(2.6) == [Ask("dave")]          # bob did not answer in time
    assert state.member_left("bob", 2.7) == []       # no longer the one asked
    [install] = state.member_left("dave", 2.8)       # nobody left to ask
    assert install.reply is None and not state.waiting


def test_a_request_waits_for_the_marker_of_every_member_there_at_the_join() -> None:
    from groupcomm.protocol.state_transfer import Cuts

    cuts = Cuts()
    cuts.newcomer("carol", ["alice", "bob", "dave", "carol"])
    assert cuts.request("carol") is False            # alice, bob and dave still to mark
    assert cuts.marker("carol", "alice") == []
    assert cuts.marker("carol", "bob") == []
    assert cuts.member_left("dave") == ["carol"]      # dave's marker will not come
    assert cuts.request("carol") is True              # nothing awaited any more
    # a newcomer that did not ask for state (or one this member never saw) is answered
    assert cuts.request("erin") is True


def test_a_newcomer_that_leaves_is_forgotten() -> None:
    from groupcomm.protocol.state_transfer import Cuts

    cuts = Cuts()
    cuts.newcomer("carol", ["alice", "carol"])
    assert cuts.request("carol") is False
    assert cuts.member_left("carol") == []
    assert cuts.deferred == []


def test_told_the_store_answers_a_newcomer_waits_for_it_beside_other_members() -> None:
    """The others are newcomers waiting for their own state: asking them would get an
    empty one; the store's state is awaited instead."""
    state = NewcomerState(timeout=2.0)
    assert state.joined("carol", ["dan", "carol"], 0.0, stored=True) == []
    assert state.waiting and state.asked == STORE
    [install] = state.stored(StateReply(True, ["x"], ()), [])
    assert install.source == STORE and install.reply.state == ["x"]


def test_after_a_server_restart_the_store_is_awaited_again_or_the_members_asked() -> None:
    state = NewcomerState(timeout=2.0)
    state.joined("carol", ["carol"], 0.0, stored=True)
    assert state.server_restarted("carol", ["carol", "alice"], 1.0, stored=True) == []
    assert state.asked == STORE  # the new server sends it again
    # the new server does not send it (a member back holds the state): ask that one
    assert state.server_restarted("carol", ["alice", "carol"], 2.0) == [Ask("alice")]
