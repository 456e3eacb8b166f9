"""Two session servers sharing one store: a join to a session the other server created
after this one started is followed from the store, its generation kept (a session
moved from a dead server goes on, docs/deploy.md)."""

from __future__ import annotations

from pathlib import Path

from groupcomm.protocol.registry import SessionRegistry
from groupcomm.protocol.registry_events import Join
from groupcomm.store.backend import open_store
from groupcomm.transport.store_host import StoreHost


def host(path: Path) -> StoreHost:
    return StoreHost(open_store(str(path)), SessionRegistry(server_id="s", now=0.0),
                     max_frame=1 << 20, now=0.0)


def join(session: str) -> Join:
    return Join(conn=b"c", client="ann", application="im", session=session, now=1.0)


def test_a_session_kept_by_another_server_is_followed_with_its_generation(
        tmp_path: Path) -> None:
    later = host(tmp_path / "shared.db")  # started before the session existed
    first = host(tmp_path / "shared.db")
    first.backend.create_session("im", "room", "g-first", 0.0)
    first.backend.commit()
    assert ("im", "room") not in later.rules.sessions
    assert later.refuse(join("room")) is None
    assert later.rules.sessions[("im", "room")].generation == "g-first"
    assert later.counters()["store_sessions_taken_over"] == 1
    later.refuse(join("room"))  # followed now: not looked up again
    assert later.counters()["store_sessions_taken_over"] == 1
    later.refuse(join("unknown"))  # in no store: made at the join, as before
    assert ("im", "unknown") not in later.rules.sessions
    for each in (later, first):
        each.backend.close()
