"""The editor replica on its own: own edits through a send function, coalesced typing,
deliveries and their failures, cursors, collection, snapshots."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from groupcomm.core.messages import Tag
from groupcomm.replicated import EditorReplica, TextSequence
from groupcomm.replicated import editor as editor_module
from groupcomm.replicated.editor import is_presence, presence, presence_slot, touches


class Outbox:
    """A send function: the next id and the application clock of member ``me`` (its
    own entry counting sends and deliveries); what was sent and not delivered yet."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.sent: list[tuple[Any, str, dict[str, int]]] = []
        self.clock: dict[str, int] = {}
        self.count = 0
        self.refuse = False

    def __call__(self, payload: Any) -> tuple[str, Tag]:
        if self.refuse:
            raise ConnectionError("the network is down")
        self.count += 1
        self.clock[self.me] = self.clock.get(self.me, 0) + 1
        op_id = f"{self.me}#{self.count}"
        self.sent.append((payload, op_id, dict(self.clock)))
        return op_id, Tag(self.clock)

    def saw(self, clock: dict[str, int]) -> None:
        for member, count in clock.items():
            self.clock[member] = max(self.clock.get(member, 0), count)
        self.clock[self.me] = self.clock.get(self.me, 0) + 1


def editor(me: str = "a", **options: Any) -> tuple[EditorReplica, Outbox]:
    outbox = Outbox(me)
    return EditorReplica(me, outbox, members=["a", "b"], **options), outbox


def deliver_all(outbox: Outbox, to: EditorReplica, to_outbox: Outbox | None = None) -> None:
    for payload, op_id, clock in outbox.sent:
        if to_outbox is not None:
            to_outbox.saw(clock)
        to.delivered(outbox.me, payload, Tag(clock), op_id)
    outbox.sent.clear()


def test_own_edits_are_sent_applied_and_move_the_cursor() -> None:
    a, sent = editor()
    a.insert("hello")
    a.move_to(1)
    a.backspace()
    a.move_to(2, announce=False)
    a.delete()
    assert a.view() == ("elo", 2, {}) and a.applied == 3
    payloads = [payload for payload, _, _ in sent.sent]
    assert payloads == [("insert", None, "hello"), ("cursor", "a#1"), ("delete", "a#1"),
                        ("delete", "a#1+3")]
    assert list(a.own_ids) == ["a#1", "a#3", "a#4"]  # the presence is no operation
    b = EditorReplica("b", None, members=["a", "b"])
    deliver_all(sent, b)
    assert b.view() == ("elo", 0, {"a": 2}) and b.deliveries == 4


def test_typing_waits_in_a_run_until_flushed_and_backspace_takes_it_back() -> None:
    a, sent = editor(coalesce=True)
    assert a.insert("h") is True  # a run starts: the host flushes it later
    assert a.insert("x") is False
    a.backspace()
    a.insert("i")
    assert a.view()[:2] == ("hi", 2) and sent.sent == [] and a.text.value == ""
    a.flush()
    assert [p for p, _, _ in sent.sent] == [("insert", None, "hi")]
    a.insert("!")
    a.insert("\n")  # a newline goes at once, after the run
    assert [p for p, _, _ in sent.sent][1:] == [("insert", "a#1+1", "!"),
                                                 ("insert", "a#2", "\n")]
    assert a.view()[:2] == ("hi!\n", 4)


def test_a_run_that_cannot_be_sent_stays_pending() -> None:
    a, sent = editor(coalesce=True)
    a.insert("o")
    a.insert("k")
    sent.refuse = True
    with pytest.raises(ConnectionError):
        a.flush()
    assert a.pending is not None and a.view()[0] == "ok"
    sent.refuse = False
    a.flush()
    assert a.pending is None and a.text.value == "ok"


def test_a_long_paste_goes_as_several_operations(monkeypatch) -> None:
    monkeypatch.setattr(editor_module, "RUN_LIMIT", 4)
    a, sent = editor()
    a.insert("abcdefghij")
    assert [p[2] for p, _, _ in sent.sent] == ["abcd", "efgh", "ij"]
    assert a.view()[:2] == ("abcdefghij", 10)


def test_deliveries_move_cursors_and_a_failure_is_counted_and_said(caplog) -> None:
    a, _ = editor()
    b, b_sent = editor("b")
    b.insert("xyz")
    b.move_to(1)
    deliver_all(b_sent, a)
    assert a.view() == ("xyz", 0, {"b": 1})
    superseded = a.delivered("b", presence("b#1+2"), Tag({"b": 3}), "b#3", superseded=True)
    assert superseded is False and a.cursors["b"] == "b#1"
    a.own_ids.append("a#9")  # as if a made it (applied then)
    a.delivered("a", ("insert", None, "?"), Tag({"a": 9}), "a#9")  # its own copy
    assert a.text.value == "xyz"
    with caplog.at_level(logging.WARNING, logger="groupcomm.replicated.editor"):
        a.delivered("b", ("insert", "b#7", "!"), Tag({"b": 4}), "b#4")
    assert a.failures == 1 and a.text.value == "xyz"
    assert a.last_failure == "b#4 from b: insert after b#7, which has not been inserted here"
    assert a.last_failure in caplog.text
    assert a.deliveries == 5 and a.applied == 1


def test_an_operation_under_its_own_name_that_it_did_not_make_is_applied() -> None:
    """A new process started as ``a`` (before it learns it is ``a~2``) is handed by the
    store the operations ``a`` made before: they are not its own copies."""
    a, a_sent = editor()
    a.insert("k")
    fresh, _ = editor()
    deliver_all(a_sent, fresh)
    assert fresh.text.value == "k" and fresh.applied == 1


def test_an_edit_at_the_runs_place_asks_for_a_flush() -> None:
    a, _ = editor(coalesce=True)
    a.insert("q")
    assert a.delivered("b", ("insert", None, "B"), Tag({"b": 1}), "b#1") is True
    assert a.delivered("b", ("insert", "b#1", "C"), Tag({"b": 2}), "b#2") is False
    assert touches(("delete", ("b#1", "x")), "x") and not touches(("delete", "b#1"), None)


def test_stable_tombstones_are_collected_and_anchors_moved_off_them(monkeypatch) -> None:
    monkeypatch.setattr(editor_module, "COLLECT_EVERY", 4)
    a, a_out = editor()
    b, b_out = editor("b")
    a.insert("abc")
    deliver_all(a_out, b, b_out)
    b.move_to(2, announce=False)
    b.backspace()  # deletes "b"
    deliver_all(b_out, a, a_out)
    a.cursors["c"] = "a#1+1"  # someone's cursor on the tombstone of "b"
    a.move_to(2, announce=False)
    a.insert("d")  # the third operation a applied
    deliver_all(a_out, b, b_out)
    b.move_to(0, announce=False)
    b.insert("e")  # b has applied a's "d": its tag says so
    deliver_all(b_out, a, a_out)  # the fourth: a collects; "b" is stable
    assert a.collected == 1 and len(a.text) == a.text.visible_length() == 4
    assert a.text.position("a#1+1") is None  # gone
    assert a.cursors["c"] == "a#1"  # moved to the visible character before it first
    assert a.view() == ("eacd", 4, {"b": 1})


def test_snapshot_and_install_carry_text_and_cursors(caplog) -> None:
    a, sent = editor()
    a.insert("hey")
    a.move_to(1)
    a.cursors["b"] = "a#1+2"
    state = a.snapshot()
    assert state.reflects == ("a#1",)
    c = EditorReplica("c", None, members=["a", "b", "c"])
    assert c.install(state.state) is True
    assert c.view() == ("hey", 0, {"a": 1, "b": 3})
    with caplog.at_level(logging.WARNING):
        assert c.install({"items": {"version": 9, "runs": []}, "cursors": {}}) is False
    assert "unusable" in caplog.text and c.text.value == "hey"


def test_an_operation_made_elsewhere_is_checked_before_it_is_sent() -> None:
    a, _ = editor()
    a.insert("ab")
    a.check_own(("insert", "a#1+1", "c"))
    a.check_own(("delete", ("a#1", "a#1+1")))
    for bad, message in [(("insert", "z#9", "c"), "names 'z#9'"),
                         (("delete", ("a#1", "a#1+7")), "names 'a#1\\+7'"),
                         (("move", 3), "not a text operation")]:
        with pytest.raises(ValueError, match=message):
            a.check_own(bad)


def test_a_replica_without_send_refuses_own_edits_and_members_come_and_go() -> None:
    mirror = EditorReplica("m")
    with pytest.raises(RuntimeError, match="sends nothing of its own"):
        mirror.insert("x")
    mirror.joined("m~2", ["a", "m~2"])
    mirror.member_joined("b", ["a", "b", "m~2"])
    mirror.delivered("b", presence(None), Tag({"b": 1}), "b#1")
    assert mirror.members == ["a", "b", "m~2"] and mirror.cursors == {"b": None}
    mirror.member_left("b")
    assert mirror.members == ["a", "m~2"] and mirror.cursors == {}
    assert is_presence(("cursor", None)) and not is_presence(("cursor", 3))
    assert presence_slot(("cursor", "x")) == "cursor" and presence_slot(("insert",)) is None
    assert isinstance(mirror.text, TextSequence)


def test_a_selection_travels_as_presence_and_moves_the_cursor_only() -> None:
    """A browser tab's selection: ``("cursor", anchor, other)``; a terminal editor takes
    it as a cursor (the text is untouched, nothing fails) and it is volatile."""
    a, _ = editor()
    b, b_sent = editor("b")
    b.insert("xyz")
    deliver_all(b_sent, a)
    selection = presence("b#1", "b#1+2", selection=True)
    assert selection == ("cursor", "b#1", "b#1+2") and is_presence(selection)
    assert presence("b#1") == ("cursor", "b#1") and presence(None, None, True) == (
        "cursor", None, None)
    assert not is_presence(("cursor", "b#1", 3)) and not is_presence(("cursor",))
    assert presence_slot(selection) == "cursor"
    a.delivered("b", selection, Tag({"b": 2}), "b#2")
    assert a.cursors["b"] == "b#1" and a.text.value == "xyz" and a.failures == 0
