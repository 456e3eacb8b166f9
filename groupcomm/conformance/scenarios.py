"""What a check found (:class:`Outcome`) and what a module declares (:class:`Declared`),
and the in-process checks: the module's real filters on the deterministic
:class:`~groupcomm.tools.localnet.LocalNetwork`, judged by the causal-order oracle on the
application-boundary clocks, never by the module's own state. A failure's counterexample
is the seed and the steps that show it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from groupcomm.core.messages import ReceivedMessage, Tag
from groupcomm.core.oracle import Verdict, check_records
from groupcomm.replicated import AddWinsSet, TextSequence
from groupcomm.tools.localnet import LocalNetwork

#: the orders a module can promise (``delivery_order`` on its class; ``causal`` when it
#: declares none): what the checks hold it to
ORDERS = ("causal", "fifo", "arrival")

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"


@dataclass
class Outcome:
    """One check's result: ``pass``, ``fail`` (with a counterexample) or ``n/a`` (the
    module's flags say the check does not apply; ``detail`` says why)."""

    check: str
    status: str
    detail: str = ""
    #: the steps that show a failure, one line each (empty unless it failed)
    counterexample: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "detail": self.detail,
                "counterexample": self.counterexample, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Declared:
    """The flags a module declares, as the checks read them (never its name)."""

    name: str
    known_bad: bool
    broadcast_only: bool
    #: a send to several is that many unicasts, each its own event (mfss, cykas)
    unicast_events: bool
    #: waits for acknowledgements: holds its own sends, never a peer's (mfss, cykas)
    sender_side: bool
    #: declares its headers for ``check --symmetry`` on its own class
    symmetry: bool
    #: ``causal``, ``fifo`` or ``arrival``
    order: str

    @classmethod
    def of(cls, module: Any) -> Declared:
        kind = type(module)
        order = getattr(kind, "delivery_order", "causal")
        if order not in ORDERS:
            raise ValueError(f"{kind.__name__} declares delivery_order {order!r}; "
                             f"expected one of {', '.join(ORDERS)}")
        return cls(
            name=kind.name,
            known_bad=bool(getattr(kind, "known_bad", False)),
            broadcast_only=bool(getattr(kind, "broadcast_only", False)),
            unicast_events=bool(getattr(kind, "unicast_events", False)),
            sender_side=bool(getattr(kind, "acknowledged_sends", False)),
            symmetry=kind.__dict__.get("symmetry_headers") is not None,
            order=order,
        )


NAMES = ("p1", "p2", "p3", "p4")


def problems(verdict: Verdict, declared: Declared) -> list[str]:
    """What is wrong in ``verdict`` for a module promising ``declared.order``: every module
    must deliver each message once, only where it was sent, and everything (the network here
    loses nothing); a causal module in causal order, a FIFO one in each sender's order."""
    found = [f"{p} delivered {m} twice" for p, m in verdict.duplicates[:3]]
    found += [f"{p} delivered {m}, not addressed to it" for p, m in verdict.unexpected[:3]]
    found += [f"{m} was never delivered at {d}" for m, d in verdict.undelivered[:3]]
    if declared.order == "causal":
        found += [f"{p} delivered {m} before {e}, which it causally follows"
                  for p, e, m in verdict.causal_violations[:3]]
    elif declared.order == "fifo":
        found += [f"{p} delivered {m} before {e}, sent earlier by the same sender"
                  for p, e, m in verdict.fifo_violations[:3]]
    return found


def _held(net: LocalNetwork) -> list[str]:
    return [f"{name} still holds {', '.join(m.message_id for m in held)}"
            for name in net.nodes if (held := net.manager(name).held())]


class _Execution:
    """A seeded random execution: sends, reactions (causal chains through third parties)
    and arrivals in random order; ``steps`` records what happened, for a counterexample."""

    def __init__(self, module: str, declared: Declared, seed: int, *,
                 fifo_links: bool = False, size: int | None = None) -> None:
        self.rng = rng = random.Random(seed)
        self.declared = declared
        names = list(NAMES[: size or rng.randint(2, 4)])
        self.net = LocalNetwork(names, module, fifo_links=fifo_links)
        self.steps: list[str] = [f"seed {seed}: {len(names)} processes"
                                 + (", FIFO links" if fifo_links else "")]
        self.budget = 14
        self.react_rate = rng.choice([0.0, 0.3, 0.6])
        for name in names:
            self.net.reactions[name].append(self._react)

    def send(self, sender: str, label: str) -> None:
        members = [n for n in self.net.nodes[sender].members if n in self.net.nodes]
        if len([m for m in members if m != sender]) == 0:
            return
        if self.declared.broadcast_only:
            others = [m for m in members if m != sender]
            dests = others + ([sender] if self.rng.random() < 0.2 else [])
        else:  # unicasts, multicasts to subsets and sends that include the sender itself
            dests = self.rng.sample(members, self.rng.randint(1, len(members)))
        sent = self.net.send(sender, label, dests)
        self.steps.append(f"{sender} sends {sent.message_id} ({label}) to "
                          f"{', '.join(sorted(dests))}")

    def _react(self, net: LocalNetwork, name: str, message: ReceivedMessage) -> None:
        self.steps.append(f"{name} delivers {message.message_id} from {message.sender}")
        if self.budget > 0 and self.rng.random() < self.react_rate:
            self.budget -= 1
            self.send(name, f"re:{message.message_id}")

    def arrive(self, count: int) -> None:
        for _ in range(count):
            candidates = self.net.arrivable()
            if not candidates:
                return
            self.net.deliver(self.rng.choice(candidates))

    def traffic(self, sends: int) -> None:
        for i in range(sends):
            if self.budget <= 0:
                break
            self.budget -= 1
            self.send(self.rng.choice(list(self.net.nodes)), f"m{i}")
            self.arrive(self.rng.randrange(3))

    def finish(self) -> None:
        self.net.run(self.rng)

    def judge(self) -> list[str]:
        return problems(check_records(self.net.records), self.declared) + _held(self.net)


def random_executions(module: str, declared: Declared, runs: int) -> Outcome:
    """``runs`` random executions (2-4 processes, unicasts, multicasts, self-sends,
    reactions; half on FIFO links): everything delivered once, in the promised order,
    nothing left held."""
    for seed in range(runs):
        execution = _Execution(module, declared, seed, fifo_links=bool(seed % 2))
        execution.traffic(execution.rng.randint(1, 14))
        execution.finish()
        found = execution.judge()
        if found:
            return _failed("random-executions", found, execution.steps)
    return Outcome("random-executions", PASS,
                   f"{runs} executions, each judged by the causal-order oracle")


def late_joiners(module: str, declared: Declared, runs: int) -> Outcome:
    """A member joins while traffic flows, members hearing of it at different moments;
    it gets only what was sent to it after it joined, in order, and nothing stays held."""
    for seed in range(runs):
        execution = _Execution(module, declared, seed, size=3)
        net = execution.net
        execution.traffic(5)
        told = [m for m in net.nodes if execution.rng.random() < 0.6]
        late = [m for m in net.nodes if m not in told]
        net.join("p4", told=told)
        execution.steps.append(f"p4 joins; {', '.join(late) or 'nobody'} hear(s) of it later")
        execution.budget = 10
        for i in range(8):
            if late and execution.rng.random() < 0.4:
                who = late.pop()
                net.tell_join(who, "p4")
                execution.steps.append(f"{who} hears of p4's join")
            execution.send(execution.rng.choice(list(net.nodes)), f"post{i}")
            execution.arrive(execution.rng.randrange(3))
        for who in late:
            net.tell_join(who, "p4")
        execution.finish()
        found = execution.judge()
        if found:
            return _failed("late-joiners", found, execution.steps)
    return Outcome("late-joiners", PASS, f"{runs} executions with a member joining mid-traffic")


def cause_before_effect(module: str, declared: Declared) -> Outcome:
    """The seeds' scenarios: alice's message to carol arrives last, after bob's reaction
    to alice's message to bob (unicast); or a broadcast reply overtaking its question
    (broadcast-only modules). A causal module delivers the cause first."""
    if declared.order != "causal":
        return Outcome("cause-before-effect", NOT_APPLICABLE,
                       f"the module promises {declared.order} order, not causal")
    net = LocalNetwork(["alice", "bob", "carol"], module)
    steps: list[str] = []
    broadcast, replied = declared.broadcast_only, []

    def bob_replies_once(net: LocalNetwork, name: str, message: ReceivedMessage) -> None:
        if replied:
            return
        replied.append(True)
        if broadcast:
            net.to_others("bob", "effect")
        else:
            net.send("bob", "effect", ["carol"])
        steps.append(f"bob delivers {message.user_message!r} and sends 'effect' to "
                     + ("everyone else" if broadcast else "carol"))

    if broadcast:
        net.reactions["bob"].append(bob_replies_once)
        net.to_others("alice", "question")
        steps.append("alice broadcasts 'question'; her copy to carol is held back")
    else:
        net.send("alice", "cause", ["carol"])
        net.send("alice", "to bob", ["bob"])
        steps.append("alice sends 'cause' to carol, then 'to bob' to bob; 'cause' is "
                     "held back")
        net.reactions["bob"].append(bob_replies_once)

    def alice_to_carol_last(candidates: list[int], in_flight: list[Any]) -> int:
        for index in candidates:
            frame = in_flight[index]
            if not (frame.source == "alice" and frame.dest == "carol" and not frame.control):
                return index
        return candidates[0]

    net.run(choose=alice_to_carol_last)
    got = [str(p) for p in net.delivered_payloads("carol")]
    steps.append(f"carol delivers, in order: {', '.join(got) or 'nothing'}")
    found = problems(check_records(net.records), declared) + _held(net)
    if found:
        return _failed("cause-before-effect", found, steps)
    return Outcome("cause-before-effect", PASS, "carol delivers the cause before the effect")


def held_and_release(module: str, declared: Declared) -> Outcome:
    """A member leaves with a message still missing at another, whose later message
    depends on it: a receiver-side module keeps the dependent message held, names the
    departed member in ``waiting_for`` and delivers it on ``release_waiting_on``; a
    sender-side module never holds a peer's message, and nothing it holds waits on the
    departed member; no module keeps anything held once released."""
    net = LocalNetwork(["p1", "p2", "p3"], module)

    def send(sender: str, payload: str, dest: str) -> None:
        if declared.broadcast_only:
            net.to_others(sender, payload)
        else:
            net.send(sender, payload, [dest])

    steps = ["p1 sends 'lost' to p3 (the frame is dropped: p1 leaves before it arrives)"]
    send("p1", "lost", "p3")
    net.in_flight = [f for f in net.in_flight if not (f.source == "p1" and f.dest == "p3")]
    send("p1", "next", "p2")
    steps.append("p1 sends 'next' (to p2), which p2 delivers")
    net.run(choose=lambda candidates, in_flight: next(
        (i for i in candidates if in_flight[i].source == "p1"), candidates[0]))
    send("p2", "reaction", "p3")
    steps.append("p2 sends 'reaction' to p3")
    net.leave("p1")
    steps.append("p1 leaves")
    net.run()
    manager = net.manager("p3")
    held = [m.message_id for m in manager.held()]
    waiting = manager.waiting_for()
    steps.append(f"p3 holds {held or 'nothing'}; waiting_for: {waiting}")
    found: list[str] = []
    if held:
        if declared.sender_side:
            found.append(f"p3 holds a peer's messages {held} under a sender-side module")
        for message_id in held:
            if "p1" not in waiting.get(message_id, []):
                found.append(f"waiting_for does not name p1 for held {message_id}")
        released = net.nodes["p3"].release_waiting_on("p1")  # delivers what it frees
        net.run()
        steps.append(f"p3.release_waiting_on('p1') -> {released}")
        if sorted(released) != sorted(held):
            found.append(f"release_waiting_on('p1') released {released}, held were {held}")
    elif declared.order == "causal" and not declared.sender_side:
        # a receiver-side causal module must not deliver a message whose cause is missing
        got = net.delivered_payloads("p3")
        if "reaction" in got and "lost" not in got:
            found.append("p3 delivered 'reaction' though 'lost', which it follows, never "
                         "arrived")
    if held and not found and "reaction" not in net.delivered_payloads("p3"):
        found.append("'reaction' was released but not delivered")
    found += _held(net)
    if found:
        return _failed("held-and-release", found, steps)
    detail = (f"held {len(held)} message(s) on the departed member, released on request"
              if held else "nothing held on the departed member")
    return Outcome("held-and-release", PASS, detail)


def snapshot_round_trip(module: str, declared: Declared, runs: int) -> Outcome:
    """Mid-execution, every manager's snapshot is hashable, restores to an equal
    snapshot, and restoring it after more steps and replaying the same steps gives the
    same deliveries and the same final snapshots (what the model checker relies on)."""
    for seed in range(max(1, runs // 4)):
        first, steps = _replayed(module, declared, seed, restore=False)
        second, _ = _replayed(module, declared, seed, restore=True)
        if isinstance(second, str):
            return _failed("snapshot-round-trip", [second], steps)
        if first != second:
            return _failed("snapshot-round-trip",
                           ["after restoring mid-run snapshots and replaying, the deliveries "
                            "or the final snapshots differ"], steps)
    return Outcome("snapshot-round-trip", PASS,
                   f"{max(1, runs // 4)} executions restored mid-run and replayed")


def _replayed(module: str, declared: Declared, seed: int, *, restore: bool
              ) -> tuple[Any, list[str]]:
    execution = _Execution(module, declared, seed, size=3)
    execution.traffic(6)
    net = execution.net
    managers = {name: net.manager(name) for name in net.nodes}
    taken = {}
    for name, manager in managers.items():
        snap = manager.snapshot()
        try:
            hash(snap)
        except TypeError as error:
            return f"{name}'s snapshot is not hashable: {error}", execution.steps
        manager.restore(snap)
        if manager.snapshot() != snap:
            return (f"{name}: restore(snapshot()) then snapshot() gives another value",
                    execution.steps)
        taken[name] = snap
    if restore:
        # disturb every manager with a fresh one's state, then put the snapshots back
        blank = LocalNetwork(list(net.nodes), module, trace=False)
        for name, manager in managers.items():
            manager.restore(blank.manager(name).snapshot())
            manager.restore(taken[name])
    execution.finish()
    deliveries = {n: net.delivered_ids(n) for n in net.nodes}
    return (deliveries, {n: m.snapshot() for n, m in managers.items()}), execution.steps


def replicated_convergence(module: str, declared: Declared, runs: int) -> Outcome:
    """Replicas of an add-wins set and of a text (groupcomm.replicated), each operation
    broadcast with the tag of its send, converge: they read only delivery tags, so they
    need every multicast delivered in causal order as one event."""
    if declared.order != "causal" or declared.unicast_events:
        why = ("it sends a multicast as one unicast per destination, each its own event"
               if declared.unicast_events else f"it promises {declared.order} order")
        return Outcome("replicated-convergence", NOT_APPLICABLE,
                       f"the replicated types do not run over it: {why}")
    for seed in range(max(1, runs // 2)):
        for kind in (AddWinsSet, TextSequence):
            values, steps = _play_replicas(module, kind, seed)
            if any(value != values[0] for value in values):
                steps.append(f"final values: {values}")
                return _failed("replicated-convergence",
                               [f"{kind.__name__} replicas diverge"], steps)
    return Outcome("replicated-convergence", PASS,
                   f"{max(1, runs // 2)} executions each of an add-wins set and a text")


def _play_replicas(module: str, kind: type, seed: int) -> tuple[list[Any], list[str]]:
    rng = random.Random(seed)
    names = list(NAMES[:3])
    net = LocalNetwork(names, module, trace=False)
    replicas = {name: kind() for name in names}
    steps = [f"seed {seed}: {kind.__name__} on {', '.join(names)}"]
    refused: list[str] = []

    def apply(_net: LocalNetwork, who: str, message: ReceivedMessage) -> None:
        try:
            replicas[who].effect(message.user_message, message.app_tag,
                                 message.app_message_id, message.sender)
        except ValueError as error:  # an operation delivered before one it builds on
            refused.append(f"{who} refused {message.message_id}: {error}")

    for name in names:
        net.reactions[name].append(apply)
    for i in range(12):
        name = rng.choice(names)
        replica = replicas[name]
        if kind is TextSequence:
            length = len(replica.value)
            op = (replica.prepare_insert(rng.randint(0, length), "ab"[: rng.randint(1, 2)])
                  if not length or rng.random() < 0.7
                  else replica.prepare_delete(rng.randrange(length), 1))
        else:
            op = (replica.prepare_add(rng.randrange(3)) if rng.random() < 0.6
                  else replica.prepare_remove(rng.randrange(3)))
        sent = net.send(name, op, [n for n in names if n != name])
        replica.effect(op, Tag(sent.vc), sent.message_id, sent.sender)
        steps.append(f"{name} applies and broadcasts operation {i}")
        for _ in range(rng.randrange(3)):
            candidates = net.arrivable()
            if candidates:
                net.deliver(rng.choice(candidates))
    net.run(rng)
    steps += refused[:5]
    return [replicas[name].value for name in names], steps


def _failed(check: str, found: list[str], steps: list[str]) -> Outcome:
    return Outcome(check, FAIL, "; ".join(found[:3]), counterexample=steps[-40:])
