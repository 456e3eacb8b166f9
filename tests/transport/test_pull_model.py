"""Tagged delivery in the threads model (001): the application's clock advances only
when receive() hands it a message, so messages waiting in the inbox are not in the
tag of a send made meanwhile."""

from __future__ import annotations

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from tests.helpers import wait_until


def test_pull_model_tags_reflect_what_the_application_saw(group: ProcessGroup) -> None:
    assert group.server is not None
    with Communicator("alice", "s", server=group.server.address,
                      key_file=str(group.key_file)) as alice:
        bob = group.start_peer("bob")
        carol = group.start_peer("carol")
        group.wait_members(["bob", "carol"])
        wait_until(lambda: {"bob", "carol"} <= set(alice.members))
        bob.command(op="send", to=["alice"], payload="m1")
        wait_until(lambda: alice.counters().get("delivered", 0) == 1)
        carol.command(op="send", to=["alice"], payload="m2")
        wait_until(lambda: alice.counters().get("delivered", 0) == 2)
        m1 = alice.receive(timeout=5)
        assert m1 is not None and m1.user_message == "m1"
        reply = alice.to_user("carol", "reply")  # m2 is delivered to the inbox, not seen
        m2 = alice.receive(timeout=5)
        assert m2 is not None and m2.user_message == "m2"
        from groupcomm.core.messages import Tag

        assert m1.tag.happened_before(Tag(reply.vc))
        assert m2.tag.concurrent_with(Tag(reply.vc))
        got = carol.wait_for(lambda e: e.get("payload") == "reply")
        assert got["tag"] == {"alice": 2, "bob": 1}
        assert alice.receive(timeout=0.05) is None
