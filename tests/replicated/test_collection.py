"""Collection settles each sender's operations in order from the stability frontier:
on random causal histories with members leaving and joining, ``Stability`` gives the
verdicts of its first definition (every current member's merge, entry by entry), and a
collect settles exactly the inserts that definition calls stable, asking about few
operations when many stay unstable."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from groupcomm.replicated.runs import split_id


class FirstStability:
    """The definition ``Stability`` had: every current member's merge, asked entry by
    entry at each question."""

    def __init__(self, me: str, members: list[str]) -> None:
        self.me = me
        self.members = set(members) | {me}
        self.seen: dict[str, dict[str, int]] = {m: {} for m in self.members}

    def delivered(self, sender: str, tag: Tag) -> None:
        for who in {sender, self.me}:
            seen = self.seen.setdefault(who, {})
            for k, v in tag.clock.items():
                seen[k] = max(seen.get(k, 0), v)

    def member_joined(self, member: str) -> None:
        self.members.add(member)
        self.seen.setdefault(member, {})

    def member_left(self, member: str) -> None:
        self.members.discard(member)
        self.seen.pop(member, None)

    def is_stable(self, tag: Tag) -> bool:
        return all(self.seen.get(m, {}).get(k, 0) >= v
                   for m in self.members for k, v in tag.clock.items())


class Member:
    def __init__(self, name: str, names: list[str]) -> None:
        self.name = name
        self.text = TextSequence()
        self.clock = dict.fromkeys(names, 0)
        self.stability = Stability(name, names)
        self.first = FirstStability(name, names)
        self.tags: dict[str, Tag] = {}   # insert id -> tag, of every insert applied
        self.settled: set[str] = set()   # the inserts the first definition settled

    def apply(self, op, tag: Tag, op_id: str, sender: str) -> None:
        self.text.effect(op, tag, op_id, sender)
        if op[0] == "insert":
            self.tags[op_id] = tag
        self.stability.delivered(sender, tag)
        self.first.delivered(sender, tag)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), count=st.integers(2, 4))
def test_the_frontier_gives_the_first_verdicts_and_collect_settles_what_they_call_stable(
        data, count: int) -> None:
    names = [f"p{k}" for k in range(count)]
    members = {n: Member(n, names) for n in names}
    present = set(names)
    sent: list[tuple[str, dict[str, int], tuple, str]] = []
    delivered = {n: set() for n in names}
    asked: list[Tag] = []
    joined: list[str] = []
    for _ in range(data.draw(st.integers(10, 60), label="steps")):
        step = data.draw(st.sampled_from(["edit", "edit", "deliver", "deliver", "deliver",
                                          "collect", "leave", "join"]))
        who = members[data.draw(st.sampled_from(sorted(present)))]
        if step == "leave" and len(present) + len(joined) < 2:
            continue
        if step == "edit":
            length = who.text.visible_length()
            if length and data.draw(st.booleans()):
                at = data.draw(st.integers(0, length - 1))
                op = who.text.prepare_delete(at, data.draw(st.integers(1, min(2, length - at))))
            else:
                op = who.text.prepare_insert(data.draw(st.integers(0, length)), "ab")
            who.clock[who.name] += 1
            op_id = f"{who.name}#{who.clock[who.name]}"
            sent.append((who.name, dict(who.clock), op, op_id))
            delivered[who.name].add(op_id)
            who.apply(op, Tag(who.clock), op_id, who.name)
            asked.append(Tag(who.clock))
        elif step == "deliver":
            ready = [m for m in sent if m[3] not in delivered[who.name]
                     and m[1][m[0]] == who.clock[m[0]] + 1
                     and all(m[1][k] <= who.clock[k] for k in names if k != m[0])]
            if ready:
                sender, clock, op, op_id = data.draw(st.sampled_from(ready))
                who.clock[sender] = clock[sender]
                delivered[who.name].add(op_id)
                who.apply(op, Tag(clock), op_id, sender)
        elif step == "collect":
            who.settled |= {op for op, tag in who.tags.items() if who.first.is_stable(tag)}
            who.text.collect(who.stability)
            settled = {split_id(row[0])[0] for row in who.text.items() if row[4] is None}
            unsettled = {split_id(row[0])[0] for row in who.text.items()
                         if row[4] is not None}
            assert unsettled.isdisjoint(who.settled) and settled <= who.settled
        elif step == "join":
            # a newcomer that sends nothing (yet): it covers nothing
            newcomer = f"q{len(joined)}"
            joined.append(newcomer)
            for member in members.values():
                member.stability.member_joined(newcomer)
                member.first.member_joined(newcomer)
        else:
            # a member or a newcomer leaves; what the member sent and not everyone
            # delivered is lost with it (no one delivers it any more)
            gone = data.draw(st.sampled_from(sorted(present - {who.name}) + joined))
            if gone in present:
                present.discard(gone)
                sent = [m for m in sent if m[0] != gone]
            else:
                joined.remove(gone)
            for member in members.values():
                member.stability.member_left(gone)
                member.first.member_left(gone)
        # any tag, sent or made up, gets the same verdict both ways
        made_up = Tag({n: data.draw(st.integers(0, 4), label="entry") for n in names})
        for member in (members[n] for n in sorted(present)):
            for tag in [*asked[-5:], made_up]:
                assert member.stability.is_stable(tag) == member.first.is_stable(tag)


class CountingStability(Stability):
    asked = 0

    def is_stable(self, tag: Tag) -> bool:
        self.asked += 1
        return super().is_stable(tag)


def test_a_member_that_never_acknowledges_costs_one_question_a_collect_and_leaving_settles_all(
        ) -> None:
    text = TextSequence()
    stability = CountingStability("p1", ["p1", "p2"])
    sent = 0
    for n in range(3000):
        sent += 1
        if n % 5 == 4:
            op = text.prepare_delete(text.visible_length() - 1)
        else:
            op = text.prepare_insert(text.visible_length(), "abc"[n % 3])
        tag = Tag({"p1": sent})
        text.effect(op, tag, f"p1#{sent}", "p1")
        stability.delivered("p1", tag)
        if n % 64 == 63:
            stability.asked = 0
            assert text.collect(stability) == 0   # p2 acknowledged nothing
            assert stability.asked == 1           # the first of p1's queue only
    kept = len(text)
    assert text.tombstones == 600
    stability.member_left("p2")
    stability.asked = 0
    assert text.collect(stability) == 600         # every tombstone went at once
    assert stability.asked == 3000                # each operation settled once
    assert len(text) == kept - 600 == text.visible_length()
    assert all(row[4] is None for row in text.items())
    # a member joining covers nothing: what comes next waits for it
    stability.member_joined("p3")
    text.effect(text.prepare_insert(0, "new"), Tag({"p1": sent + 1}), f"p1#{sent + 1}",
                "p1")
    stability.delivered("p1", Tag({"p1": sent + 1}))
    text.collect(stability)
    assert next(text.items())[4] is not None
    stability.delivered("p3", Tag({"p1": sent + 1, "p3": 1}))
    text.collect(stability)
    assert next(text.items())[4] is None


def test_a_senders_operations_queue_under_it_even_when_their_tags_carry_other_news(
        ) -> None:
    """Operations whose tags carry what their sender delivered of others that the text
    never saw (a member's cursor moves) still queue under their sender, given where they
    are applied: a collect asks about the first of them only."""
    text = TextSequence()
    stability = CountingStability("p1", ["p1", "p2", "p3"])
    for n in range(1, 201):
        stability.delivered("p3", Tag({"p3": n}))  # p3 moves its cursor; p2 sees it
        tag = Tag({"p2": n, "p3": n})
        text.effect(text.prepare_insert(text.visible_length(), "x"), tag, f"p2#{n}", "p2")
        stability.delivered("p2", tag)
        if n % 64 == 0:
            stability.asked = 0
            text.collect(stability)               # p3 has not acknowledged p2's typing
            assert stability.asked == 1           # the first of p2's queue only
            assert all(row[4] is not None for row in text.items())
    stability.delivered("p3", Tag({"p2": 200, "p3": 201}))
    stability.asked = 0
    text.collect(stability)
    assert stability.asked == 200                 # each operation settled once
    assert all(row[4] is None for row in text.items())
