"""Causal stability with a member that never sends (groupcomm.replicated.stability and
the editor): its clock acknowledgements, arriving in any order and out of causal order,
never make stable what some member has not delivered, and once everything is delivered
and acknowledged everything is stable everywhere (docs/replicated.md, "Causal
stability")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcomm.core.messages import Tag
from groupcomm.protocol.clock_acks import ClockAcks
from groupcomm.replicated import EditorReplica, Stability

MEMBERS = ("p0", "p1", "quiet")


class World:
    """Three members with application clocks as the node keeps them (a send and a
    delivery each count in the own entry; a delivery first merges the message's), causal
    broadcast, clock acknowledgements in flight in any order; ``quiet`` never sends."""

    def __init__(self) -> None:
        self.clocks = {m: {} for m in MEMBERS}
        self.stability = {m: Stability(m, MEMBERS) for m in MEMBERS}
        self.acks = {m: ClockAcks() for m in MEMBERS}
        self.ops: list[tuple[str, str, dict[str, int]]] = []  # id, sender, tag
        self.delivered = {m: set() for m in MEMBERS}
        self.pending = {m: [] for m in MEMBERS}  # ops sent, not yet delivered there
        self.acks_in_flight: list[tuple[str, str, dict[str, int]]] = []  # to, from, clock

    def send(self, who: str) -> None:
        clock = self.clocks[who]
        clock[who] = clock.get(who, 0) + 1
        tag = dict(clock)
        op = (f"{who}#{clock[who]}", who, tag)
        self.ops.append(op)
        self.delivered[who].add(op[0])
        self.stability[who].delivered(who, Tag(tag))
        self.acks[who].own_send(tuple(sorted(tag.items())))
        for member in MEMBERS:
            if member != who:
                self.pending[member].append(op)

    def deliverable(self, member: str) -> list[tuple[str, str, dict[str, int]]]:
        """The pending ops whose causes ``member`` has delivered: an op o happened
        before op when op's entry for o's sender is at least o's own."""
        done = self.delivered[member]
        return [op for op in self.pending[member]
                if all(o[0] in done for o in self.ops
                       if o[0] != op[0] and o[1] != member and o[2][o[1]] <= op[2].get(o[1], 0)
                       and o[1] in op[2])]

    def deliver(self, member: str, op: tuple[str, str, dict[str, int]]) -> None:
        self.pending[member].remove(op)
        clock = self.clocks[member]
        for k, v in op[2].items():
            if clock.get(k, 0) < v:
                clock[k] = v
        clock[member] = clock.get(member, 0) + 1
        self.delivered[member].add(op[0])
        self.stability[member].delivered(op[1], Tag(op[2]))

    def beat(self) -> None:
        for member in MEMBERS:
            said = self.acks[member].beat(tuple(sorted(self.clocks[member].items())))
            if said is not None:
                self.acks_in_flight += [(to, member, dict(said)) for to in MEMBERS
                                        if to != member]

    def take_ack(self, index: int) -> None:
        to, sender, clock = self.acks_in_flight.pop(index)
        self.stability[to].acknowledged(sender, clock)

    def check_sound(self) -> None:
        for member in MEMBERS:
            for op_id, _, tag in self.ops:
                if self.stability[member].is_stable(Tag(tag)):
                    assert all(op_id in self.delivered[m] for m in MEMBERS), (member, op_id)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_acknowledgements_never_make_stable_what_a_member_lacks(data: st.DataObject) -> None:
    world = World()
    for _ in range(data.draw(st.integers(0, 60))):
        action = data.draw(st.sampled_from(["send", "deliver", "beat", "ack"]))
        if action == "send":
            world.send(data.draw(st.sampled_from(MEMBERS[:2])))
        elif action == "deliver":
            member = data.draw(st.sampled_from(MEMBERS))
            ready = world.deliverable(member)
            if ready:
                world.deliver(member, data.draw(st.sampled_from(ready)))
        elif action == "beat":
            world.beat()
        elif world.acks_in_flight:
            world.take_ack(data.draw(st.integers(0, len(world.acks_in_flight) - 1)))
        world.check_sound()
    # everything delivered, two heartbeats, every acknowledgement taken
    for member in MEMBERS:
        while world.pending[member]:
            world.deliver(member, world.deliverable(member)[0])
    for _ in range(2):
        world.beat()
        while world.acks_in_flight:
            world.take_ack(0)
        world.check_sound()
    for member in MEMBERS:
        for _, _, tag in world.ops:
            assert world.stability[member].is_stable(Tag(tag))


def test_a_silent_members_acknowledgement_lets_the_editor_collect() -> None:
    sent: list[tuple[object, str, Tag]] = []
    clock: dict[str, int] = {}

    def send(payload: object) -> tuple[str, Tag]:
        clock["ann"] = clock.get("ann", 0) + 1
        op_id, tag = f"ann#{clock['ann']}", Tag(clock)
        sent.append((payload, op_id, tag))
        return op_id, tag

    ann = EditorReplica("ann", send, members=["ann", "bob"])
    bob = EditorReplica("bob", members=["ann", "bob"])
    ann.insert("hello world")
    for _ in range(100):  # type and take back: tombstones
        ann.insert("x")
        ann.backspace()
    bob_clock: dict[str, int] = {}
    for payload, op_id, tag in sent:
        bob.delivered("ann", payload, tag, op_id)
        bob_clock.update({"ann": tag.clock["ann"]})
        bob_clock["bob"] = bob_clock.get("bob", 0) + 1
    assert len(ann.text) > 100  # bob never sent: nothing is stable at ann
    ann.acknowledged("bob", bob_clock)
    assert len(ann.text) == len("hello world")  # collected at once, not at a next edit
    assert len(bob.text) < 11 + 64  # bob collects every 64 operations: ann's are stable
    assert ann.view()[0] == bob.view()[0] == "hello world"
    ann.acknowledged("carol", {"ann": 10**6})  # not a member: ignored
    assert not ann.stability.acknowledged("carol", {"ann": 1})
