"""What happens to messages held on a member that left: held and exposed (the default), or
released after a delay (``release_after``). Real sockets and a real server."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Delivery
from tests.helpers import wait_until


def _scenario(group: ProcessGroup, release_after: float | None,
              before_traffic: Any = None) -> tuple[Communicator, list, Communicator]:
    """carol's message to bob is delayed for a minute; alice answers carol's message to
    her in one to bob, which depends on it; carol leaves before hers reaches bob."""
    assert group.server is not None
    common: dict[str, Any] = dict(server=group.server.address, key_file=str(group.key_file),
                                  causality="matrix")
    got: list = []
    lock = threading.Lock()

    def record(message: Any) -> None:
        with lock:
            got.append(message.user_message)

    alice = Communicator("alice", "s", **common)
    bob = Communicator(
        "bob", "s", **common, delivery=Delivery(release_after=release_after))
    bob.add_message_listener(record)
    if before_traffic is not None:
        before_traffic(bob)
    carol = Communicator("carol", "s", **common)
    answered = threading.Event()
    alice.add_message_listener(lambda m: (alice.to_user("bob", "carol asks about lunch"),
                                          answered.set()))
    wait_until(lambda: len(bob.members) == 3 and len(alice.members) == 3, what="joins")
    carol.set_minimum_delay_to_peer("bob", 60_000)
    carol.to_user("bob", "lost on the way")
    carol.to_user("alice", "lunch?")
    assert answered.wait(10)
    wait_until(lambda: len(bob.held()) == 1, what="alice's message held at bob")
    carol.close(timeout=0.2)  # leaves with its message to bob still delayed: lost
    wait_until(lambda: "carol" not in bob.members, what="carol's departure at bob")
    return bob, got, alice


@pytest.mark.parametrize("release_after", [None, 0.5])
def test_messages_held_on_a_departed_member_follow_the_policy(
    group: ProcessGroup, release_after: float | None
) -> None:
    bob, got, alice = _scenario(group, release_after)
    try:
        if release_after is None:
            # held and exposed until the application decides
            assert [m.user_message for m in bob.held()] == ["carol asks about lunch"]
            assert "carol" in next(iter(bob.waiting_for().values()))
            assert got == []
            assert bob.release_waiting_on("carol")
        else:
            wait_until(lambda: got == ["carol asks about lunch"], what="the release")
            assert bob.counters()["released_after_departure"] == 1
        wait_until(lambda: got == ["carol asks about lunch"], what="the delivery")
        assert bob.held() == []
    finally:
        bob.close()
        alice.close()


def test_release_after_must_not_be_negative(group: ProcessGroup) -> None:
    assert group.server is not None
    with pytest.raises(ValueError, match="release_after must be >= 0"):
        Communicator(
            "bob", "s", server=group.server.address, key_file=str(group.key_file),
            delivery=Delivery(release_after=-1))


def test_a_held_message_is_told_as_an_event_with_whom_it_waits_on(group: ProcessGroup) -> None:
    """``MessageHeld`` comes on bob's thread when his module holds alice's answer, with
    the member it waits on; the release is its delivery."""
    from groupcomm.protocol.session_events import MessageHeld

    events: list[MessageHeld] = []
    bob_events = threading.Event()

    def listen(bob: Communicator) -> None:
        def on_event(event: Any) -> None:
            if isinstance(event, MessageHeld):
                events.append(event)
                bob_events.set()
        bob.add_event_listener(on_event)

    bob, got, alice = _scenario(group, None, before_traffic=listen)
    try:
        assert bob_events.wait(10)
        [held] = events
        assert held.message.user_message == "carol asks about lunch"
        assert held.message.sender == "alice" and held.waiting_on == ("carol",)
        assert held.member == bob.member_id
    finally:
        bob.close()
        alice.close()
