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


Message = tuple[str, str, dict[str, int], bool]  # id, sender, tag, an acknowledgement


class World:
    """Three members with application clocks as the node keeps them (a send and a
    delivery each count in the own entry; a delivery first merges the message's), causal
    broadcast, and clock acknowledgements as the session layer sends them: tagged like a
    send, delivered in causal order, moving no receiver's clock. ``quiet`` never sends."""

    def __init__(self) -> None:
        self.clocks: dict[str, dict[str, int]] = {m: {} for m in MEMBERS}
        self.stability = {m: Stability(m, MEMBERS) for m in MEMBERS}
        self.acks = {m: ClockAcks() for m in MEMBERS}
        self.messages: list[Message] = []
        self.delivered: dict[str, set[str]] = {m: set() for m in MEMBERS}
        self.pending: dict[str, list[Message]] = {m: [] for m in MEMBERS}

    def _tag(self, who: str, ack: bool) -> Message:
        clock = self.clocks[who]
        clock[who] = clock.get(who, 0) + 1
        message = (f"{who}#{clock[who]}", who, dict(clock), ack)
        self.messages.append(message)
        self.delivered[who].add(message[0])
        for member in MEMBERS:
            if member != who:
                self.pending[member].append(message)
        return message

    def send(self, who: str) -> None:
        _, _, tag, _ = self._tag(who, False)
        self.stability[who].delivered(who, Tag(tag))
        self.acks[who].own_send(tuple(sorted(tag.items())))

    def beat(self) -> None:
        for member in MEMBERS:
            if self.acks[member].due(tuple(sorted(self.clocks[member].items()))):
                _, _, tag, _ = self._tag(member, True)
                self.acks[member].acknowledged(tuple(sorted(tag.items())))

    def deliverable(self, member: str) -> list[Message]:
        """The pending messages whose causes ``member`` has delivered: o happened before
        m when m's entry for o's sender is at least o's own."""
        done = self.delivered[member]
        return [m for m in self.pending[member]
                if all(o[0] in done for o in self.messages
                       if o[0] != m[0] and o[1] in m[2] and o[2][o[1]] <= m[2][o[1]])]

    def deliver(self, member: str, message: Message) -> None:
        self.pending[member].remove(message)
        self.delivered[member].add(message[0])
        _, sender, tag, ack = message
        if ack:
            self.stability[member].acknowledged(sender, tag)
            return
        clock = self.clocks[member]
        for k, v in tag.items():
            if clock.get(k, 0) < v:
                clock[k] = v
        clock[member] = clock.get(member, 0) + 1
        self.stability[member].delivered(sender, Tag(tag))

    def check_sound(self) -> None:
        """What is stable at a member, every member has delivered, and nothing still on
        its way to that member is concurrent with it (what collection relies on)."""
        for member in MEMBERS:
            stability = self.stability[member]
            for op_id, sender, tag, ack in self.messages:
                if ack or not stability.is_stable(Tag(tag)):
                    continue
                assert all(op_id in self.delivered[m] for m in MEMBERS), (member, op_id)
                for _, _, later, later_ack in self.pending[member]:
                    assert later_ack or later.get(sender, 0) >= tag[sender], (member, op_id)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_acknowledgements_never_make_stable_what_may_still_be_overtaken(
        data: st.DataObject) -> None:
    world = World()
    for _ in range(data.draw(st.integers(0, 80))):
        action = data.draw(st.sampled_from(["send", "deliver", "deliver", "beat"]))
        if action == "send":
            world.send(data.draw(st.sampled_from(MEMBERS[:2])))
        elif action == "deliver":
            member = data.draw(st.sampled_from(MEMBERS))
            ready = world.deliverable(member)
            if ready:
                world.deliver(member, data.draw(st.sampled_from(ready)))
        else:
            world.beat()
        world.check_sound()
    # everything delivered, then two heartbeats and their acknowledgements delivered
    for _ in range(3):
        for member in MEMBERS:
            while world.pending[member]:
                world.deliver(member, world.deliverable(member)[0])
        world.check_sound()
        world.beat()
    for member in MEMBERS:
        for _, _, tag, ack in world.messages:
            assert ack or world.stability[member].is_stable(Tag(tag))


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
