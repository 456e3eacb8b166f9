"""Two session servers sharing one PostgreSQL store (the test's own server): a session's
home server is killed with SIGKILL mid-typing, its members move to the other server and
end with every line exactly once, and a newcomer who joins after the move gets the
stored conversation from the new server once everyone has left (docs/deploy.md)."""

from __future__ import annotations

import pexpect
import pytest

from tests.apps.im_harness import drain, end_chats, received, shown, type_lines, wait_all
from tests.deploy.harness import chatting_at_home
from tests.deploy.test_failover import chat

pytest.importorskip("psycopg")


@pytest.mark.long
def test_a_newcomer_after_the_move_gets_the_stored_conversation(stored_servers) -> None:
    key, (first, second) = stored_servers
    people: list[pexpect.spawn] = []
    try:
        session, listed, alice, bob, typed = chatting_at_home((first, second), key, people)
        typed["alice"] += type_lines(alice, "a", 5, 3)
        typed["bob"] += type_lines(bob, "b", 5, 3)
        first.kill()
        typed["alice"] += type_lines(alice, "a", 8, 4)
        typed["bob"] += type_lines(bob, "b", 8, 4)
        alice.expect_exact("reconnected", timeout=30)
        bob.expect_exact("reconnected", timeout=30)
        typed["alice"] += type_lines(alice, "a", 12, 4)
        typed["bob"] += type_lines(bob, "b", 12, 4)
        for person, sender in ((bob, "alice"), (alice, "bob")):
            wait_all(person, sender, typed[sender], 60)
            drain(person)
            assert received(person, sender) == typed[sender]
        for person in (alice, bob):  # only the store holds the conversation now
            person.sendline("/quit")
            person.expect(pexpect.EOF, timeout=10)
        cleo = chat("cleo", session, listed, key, people)  # on the second server now
        # the history is shown before "up to date", which may come after the join line
        if "* up to date (" not in shown(cleo):
            cleo.expect_exact("* up to date (", timeout=30)
        wait_all(cleo, "alice", typed["alice"], 30)
        wait_all(cleo, "bob", typed["bob"], 30)
        drain(cleo)
        # each line once; the stored log keeps them in the order the servers relayed
        # them, where a line resent after the move follows later ones
        assert sorted(received(cleo, "alice")) == sorted(typed["alice"]), shown(cleo)
        assert sorted(received(cleo, "bob")) == sorted(typed["bob"]), shown(cleo)
    finally:
        end_chats(people)
