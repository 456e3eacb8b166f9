"""Own edits carried onto a received text (groupcomm.replicated.reapply and
EditorReplica.install/resend): hypothesis drives random concurrent histories in which
one member is cut off, its last edits partly lost, and it comes back as a new member
with another member's text; every character typed is then present exactly once at
every member, and the texts agree."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcomm.core.messages import Tag
from groupcomm.replicated import EditorReplica
from groupcomm.replicated.reapply import OwnOperation, rebase
from groupcomm.replicated.text import TextSequence


class Net:
    """Members with vector clocks; a message is delivered where and when the test says,
    and only in causal order (the test never asks otherwise)."""

    def __init__(self) -> None:
        self.clocks: dict[str, dict[str, int]] = {}
        self.replicas: dict[str, EditorReplica] = {}
        #: every message sent: (sender, payload, tag, id)
        self.sent: list[tuple[str, Any, Tag, str]] = []
        self.letters = (chr(0x4E00 + k) for k in itertools.count())
        #: character id -> its letter, for every character ever sent
        self.letter_of: dict[str, str] = {}

    def add(self, name: str, members: list[str], clock: dict[str, int] | None = None
            ) -> EditorReplica:
        self.clocks[name] = dict(clock or {})
        replica = EditorReplica(name, lambda payload, n=name: self._send(n, payload),
                                members=members)
        self.replicas[name] = replica
        return replica

    def _send(self, name: str, payload: Any) -> tuple[str, Tag]:
        clock = self.clocks[name]
        clock[name] = clock.get(name, 0) + 1
        tag = Tag(clock)
        message = (name, payload, tag, f"{name}#{clock[name]}")
        if payload[0] == "insert":
            for k, letter in enumerate(payload[2]):
                self.letter_of[message[3] if k == 0 else f"{message[3]}+{k}"] = letter
        self.sent.append(message)
        return message[3], tag

    def deliver(self, to: str, message: tuple[str, Any, Tag, str]) -> None:
        sender, payload, tag, op_id = message
        clock = self.clocks[to]
        for member, count in tag.clock.items():
            clock[member] = max(clock.get(member, 0), count)
        assert self.replicas[to].failures == 0
        self.replicas[to].delivered(sender, payload, tag, op_id)

    def edit(self, name: str, choice: int, where: int) -> None:
        """One edit at ``name``: type one to three new letters, or delete a character."""
        replica = self.replicas[name]
        length = replica.text.visible_length()
        if length and choice % 3 == 0:
            replica.move_to(where % length, announce=False)
            replica.delete()
        else:
            replica.move_to(where % (length + 1), announce=False)
            replica.insert("".join(next(self.letters) for _ in range(1 + choice % 3)))


edits = st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 99), st.integers(0, 999)),
                 max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=edits, during=edits, through=st.integers(0, 30), offline=st.integers(0, 6),
       seen_known=st.booleans(), data=st.data())
def test_every_letter_typed_is_once_at_every_member_after_a_return(
        before, during, through, offline, seen_known, data) -> None:
    net = Net()
    for name in "ABC":
        net.add(name, list("ABC"))
    # everyone's edits reach everyone
    for name, choice, where in before:
        net.edit(name, choice, where)
        for other in "ABC":
            if other != name:
                net.deliver(other, net.sent[-1])
    # A is cut off: its first ``through`` edits still reach B and C, the rest none; it
    # receives B's and C's edits up to a point, then nothing
    a_sent = 0
    pending_to_a: list[tuple[str, Any, Tag, str]] = []
    a_cut = False
    for name, choice, where in during:
        if name == "A":
            net.edit("A", choice, where)
            a_sent += 1
            if a_sent <= through:
                for other in "BC":
                    net.deliver(other, net.sent[-1])
            else:
                a_cut = True
            continue
        net.edit(name, choice, where)
        message = net.sent[-1]
        net.deliver("C" if name == "B" else "B", message)
        pending_to_a.append(message)
        if not a_cut and data.draw(st.booleans(), label="reaches A"):
            for queued in pending_to_a:
                net.deliver("A", queued)
            pending_to_a.clear()
    a = net.replicas["A"]
    # back as A~2, typing before the text arrives, then the text from B
    a.joined("A~2", ["B", "C", "A~2"])
    net.clocks["A~2"] = dict(net.clocks["B"])
    net.replicas["A~2"] = a
    a.send = lambda payload: net._send("A~2", payload)
    a.offline = True
    for k in range(offline):
        net.edit("A~2", k, k * 7)
    intended = visible_letters(a)
    # B and C see A leave, and forget the tombstones causal stability then lets go
    # (it no longer waits for A), before A~2 joins
    for name in "BC":
        net.replicas[name].member_left("A")
        net.replicas[name]._collect()
        net.replicas[name].member_joined("A~2")
    state = net.replicas["B"].snapshot().state
    if not seen_known:
        state = {key: value for key, value in state.items() if key != "seen"}
    lost_before = set(net.sent)
    own_ids = set(a.unconfirmed)
    assert a.install(state)
    carried = a.resend()
    if carried is not None:  # only own operations, own characters
        assert set(carried.held) | set(carried.void) <= own_ids
        assert all(ident.startswith(("A#", "A~2@"))
                   for sources in carried.sources for ident in sources)
    for message in net.sent:
        if message not in lost_before:
            for other in "BC":
                net.deliver(other, message)
    texts = {name: net.replicas[name].text.value for name in "ABC"}
    assert len(set(texts.values())) == 1, texts
    final = texts["A"]
    assert len(final) == len(set(final))  # no letter twice
    # what A saw (its own edits included) is there, and what B and C typed meanwhile
    # unless one of them deleted it
    deleted_by_bc = deleted_letters(net, "BC")
    assert set(final) >= intended - deleted_by_bc
    assert set(final) >= visible_letters(net.replicas["B"]) - deleted_letters(net, "A")
    if seen_known:
        # what B or C deleted stays deleted, even once forgotten (without the clock, an
        # own insert whose characters the others deleted and forgot counts as lost)
        assert not set(final) & deleted_by_bc


def visible_letters(replica: EditorReplica) -> set[str]:
    return set(replica.text.value)


def deleted_letters(net: Net, senders: str) -> set[str]:
    letters = net.letter_of
    out = set()
    for sender, payload, _, _ in net.sent:
        if sender[0] in senders and payload[0] == "delete":
            ids = (payload[1],) if isinstance(payload[1], str) else payload[1]
            out.update(letters[i] for i in ids if i in letters)
    return out


def test_an_insert_the_received_text_holds_is_not_sent_again() -> None:
    old = TextSequence()
    old.effect(("insert", None, "ab"), Tag({"A": 1}), "A#1", "A")
    old.effect(("insert", "A#1+1", "cd"), Tag({"A": 2}), "A#2", "A")
    received = TextSequence.from_state(old.state())
    received.effect(("delete", "A#2"), Tag({"A": 2, "B": 1}), "B#1", "B")
    own = [OwnOperation("A#1", ("insert", None, "ab"), "A", Tag({"A": 1})),
           OwnOperation("A#2", ("insert", "A#1+1", "cd"), "A", Tag({"A": 2}))]
    done = rebase(old, received, own, seen={"A": 2, "B": 1})
    assert done.ops == [] and done.held == ["A#1", "A#2"]
    # without the clock, by the characters: the same
    assert rebase(old, received, own).ops == []


def test_a_lost_run_goes_after_the_nearest_character_the_received_text_has() -> None:
    old = TextSequence()
    old.effect(("insert", None, "xy"), Tag({"B": 1}), "B#1", "B")
    old.effect(("insert", "B#1", "123"), Tag({"A": 1, "B": 1}), "A#1", "A")   # x123y
    old.effect(("delete", "A#1+1"), Tag({"A": 2, "B": 1}), "A#2", "A")        # x13y
    received = TextSequence()
    received.effect(("insert", None, "xy"), Tag({"B": 1}), "B#1", "B")
    own = [OwnOperation("A#1", ("insert", "B#1", "123"), "A", Tag({"A": 1, "B": 1})),
           OwnOperation("A#2", ("delete", "A#1+1"), "A", Tag({"A": 2, "B": 1}))]
    done = rebase(old, received, own, seen={"B": 1})
    assert done.ops == [("insert", "B#1", "13")] and done.sources == [("A#1", "A#1+2")]
    assert done.void == ["A#2"]
    moved = done.moved(["A~2#1"])
    assert moved == {"A#1": "A~2#1", "A#1+2": "A~2#1+1"}
    # the cursor after the erased "2" lands after the "1" carried again
    assert done.place("A#1+1", moved) == "A~2#1"
    assert done.place("B#1+1", moved) == "B#1+1"


def test_a_delete_of_what_the_received_text_no_longer_shows_is_void() -> None:
    old = TextSequence()
    old.effect(("insert", None, "qr"), Tag({"C": 1}), "C#1", "C")
    old.effect(("delete", "C#1"), Tag({"A": 1, "C": 1}), "A#1", "A")
    old.effect(("delete", "C#1+1"), Tag({"A": 2, "C": 1}), "A#2", "A")
    received = TextSequence()  # C's "q" forgotten there, its "r" deleted by B
    received.effect(("insert", None, "qr"), Tag({"C": 1}), "C#1", "C")
    received.effect(("delete", ("C#1", "C#1+1")), Tag({"B": 1, "C": 1}), "B#1", "B")
    own = [OwnOperation("A#1", ("delete", "C#1"), "A", Tag({"A": 1, "C": 1})),
           OwnOperation("A#2", ("delete", "C#1+1"), "A", Tag({"A": 2, "C": 1}))]
    done = rebase(old, received, own, seen={"B": 1, "C": 1})
    assert done.ops == [] and done.void == ["A#1", "A#2"]


def test_a_run_typed_after_a_tombstone_goes_after_the_visible_character_before() -> None:
    """A tombstone whose delete is stable may be forgotten by some members: a new
    operation never names one."""
    old = TextSequence()
    old.effect(("insert", None, "xy"), Tag({"B": 1}), "B#1", "B")
    old.effect(("insert", "B#1+1", "!"), Tag({"A": 1, "B": 1}), "A#1", "A")
    received = TextSequence.from_state(old.state())
    received.effect(("delete", "B#1+1"), Tag({"A": 1, "B": 2}), "B#2", "B")
    received = TextSequence()
    received.effect(("insert", None, "xy"), Tag({"B": 1}), "B#1", "B")
    received.effect(("delete", "B#1+1"), Tag({"B": 2}), "B#2", "B")
    own = [OwnOperation("A#1", ("insert", "B#1+1", "!"), "A", Tag({"A": 1, "B": 1}))]
    done = rebase(old, received, own, seen={"B": 2})
    assert done.ops == [("insert", "B#1", "!")]


def test_the_cursor_stays_by_the_character_before_it_after_a_return() -> None:
    net = Net()
    a, b = net.add("A", ["A", "B"]), net.add("B", ["A", "B"])
    b.insert("hello world")
    net.deliver("A", net.sent[-1])
    a.move_to(5, announce=False)
    a.insert(",")          # lost: B never gets it
    a.move_to(12, announce=False)
    a.insert("!")          # lost too
    a.move_to(6, announce=False)   # the cursor after the ","
    b.move_to(0, announce=False)
    b.insert(">> ")        # while A was away
    a.joined("A~2", ["B", "A~2"])
    net.clocks["A~2"] = dict(net.clocks["B"])
    a.send = lambda payload: net._send("A~2", payload)
    assert a.install(b.snapshot().state)
    carried = a.resend()
    assert carried is not None and len(carried.ops) == 2 and carried.characters == 2
    for message in net.sent[-2:]:
        net.deliver("B", message)
    assert a.text.value == b.text.value == ">> hello, world!"
    assert a.position == len(">> hello,")


def test_edits_made_before_the_text_arrives_go_once_it_is_in() -> None:
    net = Net()
    a, b = net.add("A", ["A", "B"]), net.add("B", ["A", "B"])
    b.insert("abc")
    net.deliver("A", net.sent[-1])
    a.joined("A~2", ["B", "A~2"])
    a.offline = True
    a.move_to(3, announce=False)
    a.insert("d")
    a.backspace()
    a.insert("D")
    sent_so_far = len(net.sent)
    assert len(net.sent) == sent_so_far and a.text.value == "abcD"
    net.clocks["A~2"] = dict(net.clocks["B"])
    a.send = lambda payload: net._send("A~2", payload)
    assert a.install(b.snapshot().state) and a.resend() is not None
    net.deliver("B", net.sent[-1])
    assert a.text.value == b.text.value == "abcD" and a.position == 4
    assert not a.offline
