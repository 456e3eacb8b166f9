"""What every store backend must do (run against each backend of conftest.BACKENDS)."""

from __future__ import annotations

import pytest

from groupcomm.store.backend import StoredMessage, StoredSnapshot, StoreError, open_store


def _messages(*ids: str) -> list[StoredMessage]:
    return [StoredMessage(i, i.split("#")[0], 3, i.encode(), vc=((i.split("#")[0], 1),))
            for i in ids]


def test_a_new_store_is_empty_and_a_session_starts_empty(store):
    assert store.sessions() == []
    assert store.load("im", "room") is None
    store.create_session("im", "room", "g1", 100.0)
    store.commit()
    [info] = store.sessions()
    assert (info.application, info.session, info.generation, info.created_at) == (
        "im", "room", "g1", 100.0)
    assert (info.snapshot_size, info.snapshot_at, info.messages) == (None, None, 0)
    loaded = store.load("im", "room")
    assert loaded.snapshot is None and loaded.messages == []


def test_a_session_is_created_once(store):
    store.create_session("im", "room", "g1", 1.0)
    store.commit()
    with pytest.raises(StoreError):
        store.create_session("im", "room", "g2", 2.0)
    assert store.load("im", "room").info.generation == "g1"


def test_messages_keep_their_order_ids_and_bytes_and_none_is_kept_twice(store):
    store.create_session("ed", "doc", "g", 0.0)
    added = store.append("ed", "doc", _messages("a~1#1", "b~1#1", "a~1#2"))
    assert [m.message_id for m in added] == ["a~1#1", "b~1#1", "a~1#2"]
    assert added[0].seq < added[1].seq < added[2].seq
    again = store.append("ed", "doc", _messages("b~1#1", "b~1#2"))
    assert [m.message_id for m in again] == ["b~1#2"]
    store.commit()
    loaded = store.load("ed", "doc")
    assert all(m.vc == ((m.sender, 1),) for m in loaded.messages)
    assert [(m.message_id, m.sender, m.fmt, m.payload) for m in loaded.messages] == [
        ("a~1#1", "a~1", 3, b"a~1#1"), ("b~1#1", "b~1", 3, b"b~1#1"),
        ("a~1#2", "a~1", 3, b"a~1#2"), ("b~1#2", "b~1", 3, b"b~1#2")]
    assert loaded.info.messages == 4


def test_sessions_are_apart(store):
    store.create_session("ed", "doc", "g", 0.0)
    store.create_session("im", "doc", "h", 0.0)
    store.append("ed", "doc", _messages("a#1"))
    store.append("im", "doc", _messages("a#1", "a#2"))
    store.commit()
    assert [(i.application, i.messages) for i in store.sessions()] == [("ed", 1), ("im", 2)]


def test_a_snapshot_replaces_the_last_and_drops_the_messages_it_covers(store):
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", _messages("a#1", "b#1", "a#2"))
    first = StoredSnapshot(0, b"state1", ("a#1",), (("a", 1),), 10.0, "a")
    assert store.put_snapshot("ed", "doc", first, {"a#1", "zz#9"}) == 1
    second = StoredSnapshot(0, b"state2" * 1000, ("a#1", "a#2"), (("a", 2), ("b", 0)), 20.0,
                            "b")
    assert store.put_snapshot("ed", "doc", second, ["a#2"]) == 1
    store.commit()
    loaded = store.load("ed", "doc")
    assert loaded.snapshot == second
    assert [m.message_id for m in loaded.messages] == ["b#1"]
    [info] = store.sessions()
    assert (info.snapshot_size, info.snapshot_at, info.messages) == (6000, 20.0, 1)


def test_a_large_covered_set(store):
    store.create_session("ed", "doc", "g", 0.0)
    ids = [f"a#{n}" for n in range(2500)]
    store.append("ed", "doc", _messages(*ids))
    assert store.put_snapshot("ed", "doc", StoredSnapshot(0, b""), ids[:2400]) == 2400
    store.commit()
    assert [m.message_id for m in store.load("ed", "doc").messages] == ids[2400:]


def test_rollback_forgets_uncommitted_writes(store):
    store.create_session("ed", "doc", "g", 0.0)
    store.append("ed", "doc", _messages("a#1"))
    store.commit()
    store.append("ed", "doc", _messages("a#2"))
    store.put_snapshot("ed", "doc", StoredSnapshot(0, b"x"), ["a#1"])
    store.create_session("ed", "other", "g", 0.0)
    store.rollback()
    loaded = store.load("ed", "doc")
    assert [m.message_id for m in loaded.messages] == ["a#1"] and loaded.snapshot is None
    assert store.load("ed", "other") is None


def test_drop_forgets_a_session_and_nothing_else(store):
    for name in ("one", "two"):
        store.create_session("ed", name, "g", 0.0)
        store.append("ed", name, _messages("a#1"))
        store.put_snapshot("ed", name, StoredSnapshot(0, b"s"), [])
    store.commit()
    assert store.drop("ed", "one") is True
    assert store.drop("ed", "one") is False
    store.commit()
    assert store.load("ed", "one") is None
    assert len(store.load("ed", "two").messages) == 1
    store.create_session("ed", "one", "g2", 5.0)  # and may come back, empty
    store.commit()
    assert store.load("ed", "one").messages == []


def test_what_is_committed_survives_reopening_and_the_rest_does_not(store_location):
    first = open_store(store_location)
    first.create_session("ed", "doc", "gen", 1.5)
    first.append("ed", "doc", _messages("a#1"))
    first.put_snapshot("ed", "doc", StoredSnapshot(3, b"snap", ("x#1",), (("x", 1),), 2.0,
                                                   "x"), [])
    first.commit()
    first.append("ed", "doc", _messages("a#2"))  # never committed
    first.close()
    second = open_store(store_location, create=False)
    try:
        loaded = second.load("ed", "doc")
        assert loaded.info.generation == "gen"
        assert [m.message_id for m in loaded.messages] == ["a#1"]
        assert loaded.snapshot == StoredSnapshot(3, b"snap", ("x#1",), (("x", 1),), 2.0, "x")
    finally:
        second.close()


def test_a_new_session_starts_empty_even_after_writes_to_a_dropped_one(store):
    """A server that kept writing to a session dropped under it leaves rows behind; the
    session created again under that name does not inherit them."""
    store.create_session("ed", "doc", "g1", 0.0)
    store.commit()
    store.drop("ed", "doc")
    store.commit()
    store.append("ed", "doc", _messages("a#1"))
    store.put_snapshot("ed", "doc", StoredSnapshot(0, b"old"), [])
    store.commit()
    assert store.load("ed", "doc") is None and store.sessions() == []
    store.create_session("ed", "doc", "g2", 1.0)
    store.commit()
    loaded = store.load("ed", "doc")
    assert loaded.info.generation == "g2" and loaded.snapshot is None
    assert loaded.messages == []


def test_a_session_is_marked_behind_and_whole_again_at_commit(store_location):
    first = open_store(store_location)
    try:
        first.create_session("ed", "doc", "g", 0.0)
        first.create_session("im", "room", "g2", 0.0)
        first.commit()
        assert first.behind() == set()
        first.set_behind("ed", "doc", True)
        first.commit()
        first.set_behind("im", "room", True)
        first.rollback()  # not committed: not behind
        assert first.behind() == {("ed", "doc")}
    finally:
        first.close()
    second = open_store(store_location, create=False)
    try:
        assert second.behind() == {("ed", "doc")}  # the mark outlives the server
        second.put_snapshot("ed", "doc", StoredSnapshot(3, b"s"), [])
        second.set_behind("ed", "doc", False)
        second.commit()
        assert second.behind() == set()
    finally:
        second.close()
