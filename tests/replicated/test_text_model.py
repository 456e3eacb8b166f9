"""The shared text (runs in blocks) against the reference model (one item per
character, the implementation it replaced): random concurrent histories of several
replicas, delivered in random orders consistent with causality, with collection and
state transfer at random points, give the same prepared operations, values, anchors,
positions, counts and errors in both."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from groupcomm.replicated import blocks as blocks_module
from groupcomm.replicated import ids as ids_module
from tests.replicated.reference_text import ReferenceText


class Replica:
    """One member: the text, the reference, what it delivered and its stability."""

    def __init__(self, name: str, names: list[str]) -> None:
        self.name = name
        self.text = TextSequence()
        self.model = ReferenceText()
        self.clock = {n: 0 for n in names}
        self.stability = Stability(name, names)
        self.model_stability = Stability(name, names)

    def apply(self, op, tag: Tag, op_id: str, sender: str) -> None:
        errors = []
        for replica in (self.text, self.model):
            try:
                replica.effect(op, tag, op_id, sender)
            except ValueError as error:
                errors.append(str(error))
        assert len(errors) in (0, 2), errors
        assert errors[:1] == errors[1:]
        self.stability.delivered(sender, tag)
        self.model_stability.delivered(sender, tag)


def same(replica: Replica) -> None:
    """Everything one can read of the text agrees with the reference."""
    text, model = replica.text, replica.model
    value = model.value
    assert text.value == value
    assert text.visible_length() == len(value) == model.visible_length()
    assert len(text) == len(model) and text.tombstones == model.tombstones
    assert [text.anchor(p) for p in range(len(value) + 1)] == [
        model.anchor(p) for p in range(len(value) + 1)]
    items = model.state()
    assert [row[:5] for row in text.items()] == items
    for ident in [row[0] for row in items] + [None, "nowhere#1", f"{items[0][0]}+99"
                                               if items else "x+1"]:
        assert text.position(ident) == model.position(ident)
    for start in range(0, len(value) + 2, 3):
        assert text.slice(start, start + 4) == value[start:start + 4]


def same_error(replica: Replica, method: str, *args) -> None:
    """``method(*args)`` raises the same ``ValueError`` in the text and the reference."""
    messages = []
    for implementation in (replica.text, replica.model):
        with pytest.raises(ValueError) as caught:
            getattr(implementation, method)(*args)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def same_errors(replica: Replica) -> None:
    length = replica.model.visible_length()
    same_error(replica, "prepare_insert", length + 1, "x")
    same_error(replica, "prepare_insert", 0, "")
    same_error(replica, "prepare_delete", length, 1)
    same_error(replica, "anchor", length + 2)
    for bad in [("insert", "p9#9", "z"), ("delete", ("p9#9",)), ("delete", "p1#1+77"),
                ("insert", None, ""), ("move", 1), ("delete", ())]:
        same_error(replica, "effect", bad, Tag({"p9": 1}), "p9#1", "p9")


@pytest.mark.parametrize("block_limit", [4, 16, blocks_module.BLOCK_LIMIT])
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), members=st.integers(2, 4))
def test_the_text_behaves_as_the_reference_model(monkeypatch, block_limit: int, data,
                                                 members: int) -> None:
    # small blocks: a few edits split blocks, and collection empties or merges them
    monkeypatch.setattr(blocks_module, "BLOCK_LIMIT", block_limit)
    if block_limit < 128:  # and short chains: typing fills and splits them
        monkeypatch.setattr(ids_module, "CHAIN_LIMIT", 3)
    names = [f"p{i + 1}" for i in range(members)]
    replicas = {n: Replica(n, names) for n in names}
    #: (sender, clock at the send, op, id) of every operation, and who delivered what
    sent: list[tuple[str, dict[str, int], tuple, str]] = []
    delivered = {n: set() for n in names}
    for _ in range(data.draw(st.integers(5, 45), label="steps")):
        step = data.draw(st.sampled_from(["edit", "edit", "type", "deliver", "deliver",
                                          "collect", "transfer", "bad"]))
        who = replicas[data.draw(st.sampled_from(names))]
        length = who.model.visible_length()
        if step == "type":  # keystrokes one after the other: ids that count up
            position = data.draw(st.integers(0, length))
            for k in range(data.draw(st.integers(1, 4))):
                op = who.text.prepare_insert(position + k, "k")
                assert op == who.model.prepare_insert(position + k, "k")
                who.clock[who.name] += 1
                op_id = f"{who.name}#{who.clock[who.name]}"
                sent.append((who.name, dict(who.clock), op, op_id))
                delivered[who.name].add(op_id)
                who.apply(op, Tag(who.clock), op_id, who.name)
        elif step == "edit":
            if length and data.draw(st.booleans()):
                position = data.draw(st.integers(0, length - 1))
                count = data.draw(st.integers(1, min(3, length - position)))
                op = who.text.prepare_delete(position, count)
                assert op == who.model.prepare_delete(position, count)
            else:
                position = data.draw(st.integers(0, length))
                chars = data.draw(st.sampled_from(["a", "bc", "def"]))
                op = who.text.prepare_insert(position, chars)
                assert op == who.model.prepare_insert(position, chars)
            who.clock[who.name] += 1
            op_id = f"{who.name}#{who.clock[who.name]}"
            sent.append((who.name, dict(who.clock), op, op_id))
            delivered[who.name].add(op_id)
            who.apply(op, Tag(who.clock), op_id, who.name)
        elif step == "deliver":
            ready = [m for m in sent if m[3] not in delivered[who.name]
                     and m[1][m[0]] == who.clock[m[0]] + 1
                     and all(m[1][k] <= who.clock[k] for k in names if k != m[0])]
            if not ready:
                continue
            sender, clock, op, op_id = data.draw(st.sampled_from(ready))
            who.clock[sender] = clock[sender]
            delivered[who.name].add(op_id)
            who.apply(op, Tag(clock), op_id, sender)
        elif step == "collect":
            assert who.text.collect(who.stability) == who.model.collect(who.model_stability)
        elif step == "transfer":
            # the state crosses the network as plain data
            wire = msgpack.unpackb(msgpack.packb(who.text.state()))
            who.text = TextSequence.from_state(wire)
            who.model = ReferenceText.from_state(who.model.state())
        else:
            same_errors(who)
        same(who)
    # everything delivered everywhere: one text
    for who in replicas.values():
        while True:
            ready = [m for m in sent if m[3] not in delivered[who.name]
                     and m[1][m[0]] == who.clock[m[0]] + 1
                     and all(m[1][k] <= who.clock[k] for k in names if k != m[0])]
            if not ready:
                break
            sender, clock, op, op_id = ready[0]
            who.clock[sender] = clock[sender]
            delivered[who.name].add(op_id)
            who.apply(op, Tag(clock), op_id, sender)
        same(who)
    assert len({r.text.value for r in replicas.values()}) == 1


# -- what the run-length form gives -----------------------------------------------------------
def _typed(count: int, member: str = "p1") -> TextSequence:
    """A text typed one character at a time by ``member``, as an editor does."""
    text = TextSequence()
    for n in range(1, count + 1):
        op = text.prepare_insert(text.visible_length(), "abcdefgh"[n % 8])
        text.effect(op, Tag({member: n}), f"{member}#{n}", member)
    return text


def test_a_paste_is_one_run_until_edited_inside_and_a_range_delete_splits_it_once() -> None:
    text = TextSequence()
    text.effect(text.prepare_insert(0, "x" * 5000), Tag({"p1": 1}), "p1#1", "p1")
    assert len(text.state()["runs"]) == 1
    text.effect(text.prepare_insert(2500, "!"), Tag({"p1": 2}), "p1#2", "p1")
    delete = text.prepare_delete(100, 2000)
    assert delete[1][0] == "p1#1+100" and len(delete[1]) == 2000
    text.effect(delete, Tag({"p1": 3}), "p1#3", "p1")
    runs = text.state()["runs"]
    assert [(r[0], r[1], len(r[2]), r[4] is not None) for r in runs] == [
        ("p1#1", 0, 100, False), ("p1#1", 100, 2000, True), ("p1#1", 2100, 400, False),
        ("p1#2", 0, 1, False), ("p1#1", 2500, 2500, False)]
    assert text.value == "x" * 500 + "!" + "x" * 2500
    assert text.position("p1#1+2099") == 100 and text.position("p1#1+2100") == 101
    assert text.slice(499, 502) == "x!x" and text.slice(2999, 10**6) == "xx"
    with pytest.raises(ValueError, match="positions >= 0"):
        text.slice(-1, 3)
    for after, op_id, message in [(["p1#1"], "p1#4", "insert after"),
                                  (None, None, "an insert's id is a non-empty string"),
                                  (None, "p1#2", "p1#2 inserted twice")]:
        with pytest.raises(ValueError, match=message):
            text.effect(("insert", after, "?"), Tag({"p1": 4}), op_id, "p1")
    assert text.position(["p1#1"]) is None and "?" not in text.value
    for call, message in [(lambda: text.prepare_insert(1.5, "x"), "a position is an integer"),
                          (lambda: text.prepare_delete(0, True), "a count is an integer"),
                          (lambda: text.anchor("3"), "a position is an integer"),
                          (lambda: text.slice(0, None), "a slice's stop is an integer")]:
        with pytest.raises(ValueError, match=message):
            call()


def test_the_state_is_validated_with_a_precise_message() -> None:
    good = _typed(3).state()
    assert TextSequence.from_state(good).value == _typed(3).value
    as_tuples = msgpack.unpackb(msgpack.packb(good), use_list=False)
    assert TextSequence.from_state(as_tuples).value == _typed(3).value
    cases = [
        ("nope", "expected a dict with 'version' and 'runs'"),
        ({"version": 2, "runs": []}, "version 2"),
        ({"version": 1, "runs": {}}, "'runs' is not a list"),
        ({"version": 1, "runs": [["p1#1", 0, "a", None]]}, "run 0 is not a list of 5"),
        ({"version": 1, "runs": [["", 0, "a", None, None]]}, "run 0: the insert id"),
        ({"version": 1, "runs": [["p1#1", -1, "a", None, None]]}, "run 0: the offset"),
        ({"version": 1, "runs": [["p1#1", 0, "", None, None]]}, "run 0: no characters"),
        ({"version": 1, "runs": [["p1#1", 0, "a", {"p1": "1"}, None]]},
         "run 0: the insert clock"),
        ({"version": 1, "runs": [["p1#1", 0, "a", None, [1]]]}, "run 0: the delete clock"),
        ({"version": 1, "runs": [["p1#1", 0, "ab", None, None], ["p1#1", 1, "b", None,
                                                                   None]]},
         "characters of p1#1 appear twice"),
    ]
    for state, message in cases:
        with pytest.raises(ValueError, match=message):
            TextSequence.from_state(state)


class CountingStability(Stability):
    """Counts the tags :meth:`TextSequence.collect` asks about."""

    asked = 0

    def is_stable(self, tag: Tag) -> bool:
        self.asked += 1
        return super().is_stable(tag)


def test_collect_asks_about_what_is_not_stable_yet_not_about_the_whole_text() -> None:
    text = _typed(20_000)
    stability = CountingStability("p1", ["p1"])
    stability.delivered("p1", Tag({"p1": 20_000}))
    text.collect(stability)
    assert stability.asked == 20_000        # every insert was new
    for n in range(20_001, 20_011):         # ten more keystrokes, two backspaces
        text.effect(text.prepare_insert(5000, "z"), Tag({"p1": n}), f"p1#{n}", "p1")
    text.effect(text.prepare_delete(100), Tag({"p1": 20_011}), "p1#20011", "p1")
    text.effect(text.prepare_delete(100), Tag({"p1": 20_012}), "p1#20012", "p1")
    stability.delivered("p1", Tag({"p1": 20_012}))
    stability.asked = 0
    assert text.collect(stability) == 2
    assert stability.asked == 12            # the ten inserts and two deletes
    assert len(text) == text.visible_length() == 20_008
    assert all(row[4] is None for row in text.items())


def test_typing_becomes_one_chain_once_stable_and_stays_one_row_in_the_state(
        monkeypatch) -> None:
    monkeypatch.setattr(ids_module, "CHAIN_LIMIT", 4096)
    text = _typed(3000)
    assert len(text.state()["runs"]) == 3000   # nothing is stable yet: a run per key
    stability = Stability("p1", ["p1"])
    stability.delivered("p1", Tag({"p1": 3000}))
    text.collect(stability)
    [chain] = text.state()["runs"]
    assert chain[0] == "p1#1" and chain[1] == 0 and chain[3:] == [None, None, 3000]
    # an insert inside it and a delete split it; the ids keep counting
    text.effect(text.prepare_insert(1000, "!"), Tag({"p1": 3001}), "p1#3001", "p1")
    text.effect(text.prepare_delete(2000, 2), Tag({"p1": 3002}), "p1#3002", "p1")
    assert text.anchor(1000) == "p1#1000" and text.position("p1#2001") == 2000
    assert text.position("p1#2002") == 2001 and text.slice(999, 1002) == text.value[999:1002]
    assert [row[0] for row in text.state()["runs"]] == [
        "p1#1", "p1#3001", "p1#1001", "p1#2000", "p1#2002"]
    copy = TextSequence.from_state(msgpack.unpackb(msgpack.packb(text.state())))
    assert copy.value == text.value and list(copy.items()) == list(text.items())
    stability.delivered("p1", Tag({"p1": 3002}))
    text.collect(stability)
    assert [row[0] for row in text.state()["runs"]] == ["p1#1", "p1#3001", "p1#1001",
                                                         "p1#2002"]
    with pytest.raises(ValueError, match="run 0: a chain is"):
        TextSequence.from_state({"version": 1, "runs": [["p1#1", 0, "ab", None, None, 3]]})
    with pytest.raises(ValueError, match="p1#2 appears twice"):
        TextSequence.from_state({"version": 1, "runs": [["p1#1", 0, "ab", None, None, 2],
                                                        ["p1#2", 0, "c", None, None]]})
