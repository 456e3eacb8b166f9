"""After a restart of a server without a store, a new process under a name the session
had is numbered above every incarnation of that name the members back have seen: its
message ids are never its predecessor's, which the members would skip as seen (a real
``groupcomm serve`` process, stopped and started on the same address; communicators
over ZeroMQ)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners
from tests.helpers import wait_until


class Inbox:
    def __init__(self) -> None:
        self.got: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()

    def on_message(self, message: Any) -> None:
        with self.lock:
            self.got.append((message.sender, message.app_message_id, message.user_message))

    def texts(self) -> list[Any]:
        with self.lock:
            return [text for _, _, text in self.got]


def _member(group: ProcessGroup, name: str, inbox: Inbox) -> Communicator:
    assert group.server is not None
    return Communicator(name, "s", server=group.server.address, key_file=str(group.key_file),
                        causality="matrix", listeners=Listeners(message=inbox.on_message))


def test_a_new_process_after_a_restart_without_a_store_does_not_reuse_old_ids(
        tmp_path: Path) -> None:
    with ProcessGroup(tmp_path, server_extra=["--heartbeat-timeout", "1.5"]) as group:
        bob_inbox, old_inbox, new_inbox = Inbox(), Inbox(), Inbox()
        bob = _member(group, "bob", bob_inbox)
        old = _member(group, "alice", old_inbox)
        new: Communicator | None = None
        try:
            wait_until(lambda: len(bob.members) == 2, what="alice and bob")
            for i in range(5):
                old.to_others(f"old {i}")
            wait_until(lambda: len(bob_inbox.got) == 5, what="the old alice's lines")
            assert {sender for sender, _, _ in bob_inbox.got} == {"alice"}
            old.close()
            wait_until(lambda: len(bob.members) == 1, what="alice's leave")
            rejoins = bob.counters().get("rejoins", 0)
            group.stop_server()
            group.start_server()  # same address, nothing remembered
            # bob comes back and tells the server the incarnations it has seen
            wait_until(lambda: bob.counters().get("rejoins", 0) > rejoins, what="bob's rejoin")
            wait_until(lambda: bob.members == ["bob"] and not bob.server_unreachable,
                       what="bob a member again")
            new = _member(group, "alice", new_inbox)
            wait_until(lambda: len(bob.members) == 2, what="the new alice")
            assert new.member_id == "alice~2"
            for i in range(5):
                new.to_others(f"new {i}")
            wait_until(lambda: len(bob_inbox.got) == 10, what="the new alice's lines at bob")
            assert bob_inbox.texts() == [f"old {i}" for i in range(5)] + [
                f"new {i}" for i in range(5)]
            assert len({mid for _, mid, _ in bob_inbox.got}) == 10
        finally:
            bob.close()
            if new is not None:
                new.close()
