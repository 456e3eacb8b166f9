"""The typed session events a communicator gives its application: joins and leaves, a
server that falls silent and comes back, a rejoin, state transfer, messages that could
not be sent (named by id). Real communicators over ZeroMQ, one server process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from groupcomm.protocol.session_events import (
    MessagesLost,
    PeerJoined,
    PeerLeft,
    Rejoined,
    ServerAnswers,
    ServerSilent,
    SessionEvent,
    StateInstalled,
    StateRequested,
)
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection, Listeners, StateTransfer
from tests.helpers import wait_until


class Events:
    """An event listener keeping what it was told (on the I/O thread)."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.lock = threading.Lock()

    def __call__(self, event: SessionEvent) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


def test_joins_leaves_and_state_transfer_come_as_events(group: ProcessGroup) -> None:
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality="matrix")
    alice_events, carol_events = Events(), Events()
    with Communicator(
        "alice", "s", **common, listeners=Listeners(event=alice_events),
        state=StateTransfer(provider=lambda: "alice's state")) as alice:
        installed: list[Any] = []
        with Communicator(
            "carol", "s", **common, listeners=Listeners(event=carol_events),
            state=StateTransfer(consumer=installed.append)) as carol:
            assert carol.wait_for_state(10) and installed == ["alice's state"]
            wait_until(lambda: alice_events.of(PeerJoined), what="carol's join at alice")
            [joined] = alice_events.of(PeerJoined)
            assert (joined.member, joined.peer, joined.members) == (
                "alice", "carol", ("alice", "carol"))
            assert [e.asked for e in carol_events.of(StateRequested)] == ["alice"]
            assert [e.source for e in carol_events.of(StateInstalled)] == ["alice"]
        wait_until(lambda: alice_events.of(PeerLeft), what="carol's leave at alice")
        assert alice_events.of(PeerLeft)[0].peer == "carol"
        assert alice.members == ["alice"]


def test_a_server_restart_is_silence_an_answer_and_a_rejoin_under_the_same_id(
        tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "6"]) as group:
        assert group.server is not None
        events = Events()
        with Communicator(
            "alice", "s", server=group.server.address, key_file=str(group.key_file),
            connection=Connection(heartbeat_interval=0.2),
            listeners=Listeners(event=events)) as alice:
            group.stop_server()
            wait_until(lambda: events.of(ServerSilent), what="the server's silence")
            assert alice.server_unreachable
            assert events.of(ServerSilent)[0].silent_for > 0.2
            group.start_server()
            wait_until(lambda: events.of(Rejoined), what="the rejoin")
            [rejoined] = events.of(Rejoined)
            assert rejoined.server_restarted and rejoined.member == "alice"
            assert events.of(ServerAnswers) and not alice.server_unreachable
            assert not events.of(MessagesLost)


def test_what_a_member_taken_for_gone_had_not_sent_is_named_by_id(group: ProcessGroup) -> None:
    """alice's loop stalls (a long listener, a stopped process) past the server's
    heartbeat timeout; what her application sent meanwhile cannot leave as the new
    member's, and the event names exactly those messages."""
    import time

    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file))
    events = Events()
    with Communicator("bob", "s", **common) as bob, \
            Communicator("alice", "s", **common, listeners=Listeners(event=events)) as alice:
        wait_until(lambda: "alice" in bob.members, what="alice at bob")
        before = alice.to_user("bob", "before the stall")
        assert alice.flush(10)
        stalled = threading.Event()
        alice._loop.call_soon(lambda: (stalled.set(), time.sleep(3.5)))  # noqa: SLF001
        assert stalled.wait(5)
        during = [alice.to_user("bob", f"during the stall {i}") for i in range(3)]
        wait_until(lambda: events.of(Rejoined), timeout=30, what="alice back")
        [rejoined] = events.of(Rejoined)
        assert not rejoined.server_restarted and rejoined.previous == "alice"
        wait_until(lambda: {m.message_id for m in during}
                   <= {i for e in events.of(MessagesLost) for i in e.ids},
                   what="the stalled sends named")
        lost = {i for e in events.of(MessagesLost) for i in e.ids}
        assert before.message_id not in lost
        assert set(alice.undeliverable()) >= {m.message_id for m in during}
