"""Random editing sessions of Python editor replicas, recorded from one member's side
so that the browser's replica (``editor.js``) can replay them (``run_editor_sessions.mjs``).

Three members (``a``, ``b``, ``c``) edit at once under causal broadcast: each an
:class:`~groupcomm.replicated.EditorReplica` whose send gives the next message id and
the member's application clock (its own entry counting sends and deliveries, as a
communicator's does), with messages delivered in random orders consistent with
causality. Now and then ``c`` leaves, and in some sessions ``d`` joins midway and starts
from ``b``'s snapshot; the recorded member is ``a``, or in some of those ``d``. What it
did is recorded as steps:

- ``["act", method, args, sends]``: an own action (``insert``, ``backspace``,
  ``delete``, ``move_to``, ``flush``) and the ``[id, clock]`` of each send it made;
- ``["deliver", sender, payload, clock, id, superseded]``;
- ``["joined", member, members]``, ``["left", member]``;
- ``["install", state]``: a newcomer's snapshot;
- ``["acknowledged", member, clock]``: ``member``'s clock acknowledgement (as a member
  that sent nothing for a heartbeat sends one: tagged like a send, delivered in causal
  order, moving no receiver's clock).

and what the replica looks like at the end (:func:`observe`).
"""

from __future__ import annotations

import random
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated import EditorReplica
from groupcomm.replicated.editor import is_presence

#: the payload of a clock acknowledgement (the session layer's, not the replica's)
ACK = ("clock_ack",)


def listed(value: Any) -> Any:
    """Tuples as lists, as JSON carries them."""
    if isinstance(value, tuple | list):
        return [listed(v) for v in value]
    return value


def observe(replica: EditorReplica) -> dict[str, Any]:
    value, at, others = replica.view()
    return {"value": value, "at": at, "others": others, "cursor": replica.cursor,
            "cursors": dict(sorted(replica.cursors.items())),
            "pending": replica.pending.text if replica.pending else None,
            "members": sorted(replica.members), "applied": replica.applied,
            "collected": replica.collected, "failures": replica.failures,
            "kept": len(replica.text)}


class Member:
    """One editor of the session, its clock and its inbox."""

    def __init__(self, session: Session, name: str, members: list[str]) -> None:
        self.session = session
        self.name = name
        self.clock: dict[str, int] = {}
        self.sent = 0
        #: sender -> how many of its messages were delivered here
        self.seen: dict[str, int] = {}
        self.inbox: list[tuple[str, Any, dict[str, int], str, dict[str, int]]] = []
        self.sends: list[list[Any]] = []
        self.replica = EditorReplica(name, self.send, members=members,
                                     coalesce=session.coalesce, collect=session.collect)

    def send(self, payload: Any) -> tuple[str, Tag]:
        op_id, clock = self.tag(payload)
        self.sends.append([op_id, clock])
        return op_id, Tag(clock)

    def tag(self, payload: Any) -> tuple[str, dict[str, int]]:
        """A send event of ``payload`` (the replica's, or a clock acknowledgement) to
        everyone else."""
        self.sent += 1
        self.clock[self.name] = self.clock.get(self.name, 0) + 1
        clock = dict(self.clock)
        self.seen[self.name] = self.sent
        op_id = f"{self.name}#{self.sent}"
        for other in self.session.present:
            if other != self.name:
                self.session.members[other].inbox.append(
                    (self.name, payload, clock, op_id, dict(self.seen)))
        return op_id, clock

    def ready(self) -> list[int]:
        out = []
        for k, (sender, _, _, _, deps) in enumerate(self.inbox):
            if deps[sender] == self.seen.get(sender, 0) + 1 and all(
                    self.seen.get(p, 0) >= v for p, v in deps.items() if p != sender):
                out.append(k)
        return out


class Session:
    def __init__(self, seed: int, *, coalesce: bool, collect: bool,
                 newcomer: str | None) -> None:
        self.rng = random.Random(seed)
        self.coalesce = coalesce
        self.collect = collect
        self.newcomer = newcomer
        self.present = ["a", "b", "c"]
        self.members = {m: Member(self, m, self.present) for m in self.present}
        self.recorded = "a"
        #: the members the recorded replica was made with
        self.made_with = list(self.present)
        self.steps: list[list[Any]] = []

    def record(self, who: str, *step: Any) -> None:
        if who == self.recorded:
            self.steps.append(list(step))

    def act(self, who: str) -> None:
        member = self.members[who]
        replica = member.replica
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            method, args = "insert", [rng.choice("abcdefgh \n")]
        elif roll < 0.55:
            method, args = "insert", ["".join(rng.choice("xyz") for _ in range(rng.randint(2, 4)))]
        elif roll < 0.65:
            method, args = "backspace", []
        elif roll < 0.72:
            method, args = "delete", []
        elif roll < 0.88:
            method, args = "move_to", [rng.randint(0, replica.text.visible_length() + 1),
                                       rng.random() < 0.6]
        else:
            method, args = "flush", []
        member.sends = []
        getattr(replica, method)(*args)
        self.record(who, "act", method, args, member.sends)

    def deliver(self, who: str) -> bool:
        member = self.members[who]
        ready = member.ready()
        if not ready:
            return False
        sender, payload, clock, op_id, deps = member.inbox.pop(self.rng.choice(ready))
        member.seen[sender] = deps[sender]
        if payload is ACK:  # consumed by the session layer: the clock does not move
            member.replica.acknowledged(sender, clock)
            self.record(who, "acknowledged", sender, clock)
            return True
        for p, v in clock.items():
            member.clock[p] = max(member.clock.get(p, 0), v)
        member.clock[who] = member.clock.get(who, 0) + 1
        superseded = is_presence(payload) and self.rng.random() < 0.2
        member.replica.delivered(sender, payload, Tag(clock), op_id, superseded)
        self.record(who, "deliver", sender, listed(payload), clock, op_id, superseded)
        return True

    def quiet(self) -> None:
        """Flush every pending run and deliver everything."""
        for name in self.present:
            self.members[name].sends = []
            self.members[name].replica.flush()
            self.record(name, "act", "flush", [], self.members[name].sends)
        while any(self.deliver(name) for name in list(self.present)):
            pass

    def leave(self, who: str) -> None:
        self.quiet()
        self.present.remove(who)
        for name in self.present:
            self.members[name].replica.member_left(who)
            self.record(name, "left", who)

    def join(self, who: str, provider: str, record_it: bool) -> None:
        """``who`` joins, starting from ``provider``'s snapshot; with ``record_it`` the
        recording follows the newcomer from here on."""
        self.quiet()
        self.present.append(who)
        for name in self.present[:-1]:
            self.members[name].replica.member_joined(who, list(self.present))
            self.record(name, "joined", who, list(self.present))
        newcomer = Member(self, who, self.present)
        self.members[who] = newcomer
        giver = self.members[provider]
        snapshot = giver.replica.snapshot()
        newcomer.clock = dict(giver.clock)
        newcomer.seen = dict(giver.seen)
        newcomer.replica.install(snapshot.state)
        if record_it:
            self.recorded, self.made_with, self.steps = who, list(self.present), []
            self.record(who, "install", listed(snapshot.state))

    def run(self, actions: int) -> None:
        for step in range(actions):
            if step == actions // 3 and self.newcomer:
                self.join("d", "b", self.newcomer == "recorded")
            if step == actions // 2 and "c" in self.present and self.rng.random() < 0.5:
                self.leave("c")
            roll = self.rng.random()
            if roll < 0.05:
                self.members[self.rng.choice(self.present)].tag(ACK)
            elif roll < 0.5:
                self.act(self.rng.choice(self.present))
            else:
                self.deliver(self.rng.choice(self.present))
        self.quiet()
        values = {self.members[m].replica.view()[0] for m in self.present}
        assert len(values) == 1, f"the Python replicas diverged: {values}"


def session(seed: int, actions: int, *, coalesce: bool, collect: bool,
            newcomer: str | None) -> dict[str, Any]:
    """One recorded session (see the module doc); ``newcomer``: ``d`` joins midway
    (``"recorded"``: and the recording follows it; ``"seen"``: ``a`` sees it join)."""
    played = Session(seed, coalesce=coalesce, collect=collect, newcomer=newcomer)
    played.run(actions)
    me = played.recorded
    return {"seed": seed, "me": me, "members": played.made_with,
            "coalesce": coalesce, "collect": collect, "steps": played.steps,
            "expect": observe(played.members[me].replica)}
