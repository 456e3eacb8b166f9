"""The live session view's state, derived from trace records alone (docs/trace_schema.md):
each member's application clock, the messages each member's module holds and the
messages each waits for, and the steps of a space-time diagram with the marks of
``groupcomm analyze``'s (a causal violation, a delivery that overtook its cause, a
duplicate, concurrency, a release). No I/O: the gateway feeds it the records its members
emit, ``groupcomm watch`` the lines it reads, the tests records they write.

Every record that changes what the view shows becomes a *step* (a JSON object with a
running index ``i``) that carries the acting member's state after it, so a page can show
the session as of any step (the replay slider) by taking, per member, its last step up to
there; ``mark`` steps add marks to earlier steps (a delivery found to have overtaken a
later one, a delivery a release let through)."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the events the view reads; the rest (network and control traffic) do not change it
VIEW_EVENTS = frozenset({"send", "deliver", "buffer", "unbuffer", "release", "join", "leave"})
#: steps kept per view; older ones are dropped (``dropped`` counts them)
MAX_STEPS = 5000
#: messages remembered for their clocks; older sends are forgotten first
MAX_SENDS = 20_000
#: sends of one sender looked at, newest first, for the cause of a held message
SCAN = 64
#: the modules that keep a matrix of messages sent (docs/protocols.md): their members
#: are shown with it
MATRIX_MODULES = frozenset({"matrix", "matrix-delta", "ks"})


@dataclass
class Sent:
    """What a message's ``send`` record says (or a ``buffer`` record's ``send_vc``)."""

    sender: str
    vc: dict[str, int]
    dests: tuple[str, ...] = ()
    step: int | None = None
    #: known only from a delivery (the sender writes no trace here): ``vc`` holds the
    #: sender's own entry alone, enough to name the message as a cause, not to order it
    inferred: bool = False


@dataclass
class Held:
    """A message a member's module holds."""

    msg: str
    sender: str
    since: float
    waiting_for: tuple[str, ...] = ()


@dataclass
class Member:
    """What the view knows of one member."""

    name: str
    clock: dict[str, int] = field(default_factory=dict)
    held: dict[str, Held] = field(default_factory=dict)
    #: first deliveries, in order (the order the checks read)
    delivered: list[str] = field(default_factory=list)
    delivered_set: set[str] = field(default_factory=set)
    #: per sender, the largest clock entry of that sender among the delivered messages'
    #: send clocks: a message whose own entry is not above it was overtaken
    maxima: dict[str, int] = field(default_factory=dict)
    #: message -> index of its delivery step here
    delivery_steps: dict[str, int] = field(default_factory=dict)
    #: messages a release let through here, not yet delivered
    released: set[str] = field(default_factory=set)
    present: bool = True
    protocol: str = ""
    #: per sender k: (k's own entry counted up to, messages of k known here per
    #: destination): the matrix the matrix modules keep, as the trace tells it
    sent_known: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)
    #: per sender, the row as last shown: a copy made when the row changed, shared by
    #: the steps shown since (a delivery changes one row, not the matrix)
    sent_rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def delivered_now(self, msg: str, step: int) -> None:
        """Remember a first delivery; past :data:`MAX_SENDS` the oldest half is
        forgotten (a gateway runs for days: a duplicate of a message that old, or a
        violation against it, goes unmarked)."""
        self.delivered.append(msg)
        self.delivered_set.add(msg)
        self.delivery_steps[msg] = step
        if len(self.delivered) > MAX_SENDS:
            half = MAX_SENDS // 2
            for old in self.delivered[:half]:
                self.delivered_set.discard(old)
                self.delivery_steps.pop(old, None)
            del self.delivered[:half]


def clock_text(clock: Mapping[str, int]) -> str:
    """``[alice:3, bob:2]``: a clock's positive entries by name."""
    return "[" + ", ".join(f"{k}:{v}" for k, v in sorted(clock.items()) if v) + "]"


def concurrent(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Neither clock is below or equal to the other."""
    a_le = all(v <= b.get(k, 0) for k, v in a.items())
    b_le = all(v <= a.get(k, 0) for k, v in b.items())
    return not a_le and not b_le


class SessionView:
    """Feed it records with :meth:`add`; it returns the new steps. ``max_steps`` bounds
    what is kept for a page that opens later (:meth:`snapshot`)."""

    def __init__(self, name: str = "", max_steps: int = MAX_STEPS) -> None:
        self.name = name
        self.members: dict[str, Member] = {}
        self.sends: dict[str, Sent] = {}
        #: per sender, (its own clock entry, message) of its sends in order: the newest
        #: cause of a held message from each sender is found by bisection
        self._by_sender: dict[str, list[tuple[int, str]]] = {}
        #: each member's state as last shown (a state step only when it changed)
        self._shown: dict[str, dict[str, Any]] = {}
        #: each member's state as of the last step no longer kept
        self._base: dict[str, dict[str, Any]] = {}
        self.steps: deque[dict[str, Any]] = deque(maxlen=max_steps)
        self.next_index = 0
        #: records the view read (the events it shows)
        self.records = 0
        #: set when a record told of a send (a cause others may be waiting for)
        self._learnt = False

    # -- input ---------------------------------------------------------------------------
    def add(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Take one record that passed the schema's check (``record_problem``); returns
        the steps it made (none for events the view does not show)."""
        event = record.get("event")
        if event not in VIEW_EVENTS:
            return []
        self.records += 1
        process = str(record["process"])
        member = self._member(process)
        member.protocol = str(record.get("protocol") or member.protocol)
        out: list[dict[str, Any]] = []
        self._learnt = False
        handler = getattr(self, f"_on_{event}")
        handler(member, record, out)
        # a send learnt (from its record, a hold's clock, a delivery) may be the cause of
        # a message another member holds
        if self._learnt:
            self._refresh_waiting(member, out)
        return out

    def _member(self, name: str) -> Member:
        member = self.members.get(name)
        if member is None:
            member = self.members[name] = Member(name)
        return member

    def _step(self, out: list[dict[str, Any]], member: Member, ts: float, kind: str,
              **fields: Any) -> dict[str, Any]:
        step = {"i": self.next_index, "ts": ts, "process": member.name, "kind": kind,
                **fields, "state": self.member_state(member)}
        self.next_index += 1
        self._shown[member.name] = step["state"]
        if len(self.steps) == self.steps.maxlen:
            # the oldest step goes: its member's state is where a replay of the kept
            # steps starts for that member
            oldest = self.steps[0]
            self._base[oldest["process"]] = oldest["state"]
        self.steps.append(step)
        out.append(step)
        return step

    def _mark(self, out: list[dict[str, Any]], member: Member, ts: float, target: int,
              mark: str, **fields: Any) -> None:
        self._step(out, member, ts, "mark", target=target, mark=mark, **fields)

    def _remember_send(self, msg: str, sent: Sent) -> None:
        known = msg in self.sends
        self._learnt = True
        if not known and len(self.sends) >= MAX_SENDS:
            self.sends.pop(next(iter(self.sends)))
        self.sends[msg] = sent
        if known:  # the send record after a hold or a delivery told of it: once only
            return
        own = sent.vc.get(sent.sender, 0)
        column = self._by_sender.setdefault(sent.sender, [])
        if len(column) >= MAX_SENDS:
            del column[:MAX_SENDS // 2]
        if not column or column[-1][0] <= own:
            column.append((own, msg))
        else:  # a buffer record's clock of a message whose send comes later
            bisect.insort(column, (own, msg))

    def _on_send(self, member: Member, record: Mapping[str, Any],
                 out: list[dict[str, Any]]) -> None:
        msg = str(record["msg"])
        vc = dict(record["vc"])
        member.clock = vc
        dests = tuple(record.get("dests") or ())
        sent = Sent(member.name, vc, dests)
        self._remember_send(msg, sent)  # first: the state shown counts it
        step = self._step(out, member, record["ts"], "send", msg=msg, sender=member.name,
                          dests=list(dests), vc=vc)
        sent.step = step["i"]

    def _on_deliver(self, member: Member, record: Mapping[str, Any],
                    out: list[dict[str, Any]]) -> None:
        msg, sender, ts = str(record["msg"]), str(record["sender"]), record["ts"]
        member.clock = dict(record["vc"])
        member.held.pop(msg, None)
        marks: list[str] = []
        fields: dict[str, Any] = {}
        sent = self.sends.get(msg)
        if sent is None and sender in member.clock:
            # under causal delivery the receiver's entry of the sender is the message's
            s_vc = {sender: member.clock[sender]}
            self._remember_send(msg, Sent(sender, s_vc, (), inferred=True))
        elif sent is not None and sent.inferred:
            sent = None
        if msg in member.delivered_set:
            marks.append("duplicate")
        elif sent is not None:
            own = sent.vc.get(sender, 0)
            if member.maxima.get(sender, 0) >= own:
                # a message delivered here before depends on this one: a violation
                early = [m for m in member.delivered
                         if (s := self.sends.get(m)) is not None and s.vc.get(sender, 0) >= own]
                marks.append("violation")
                fields["overtaken_by"] = early
            previous = member.delivered[-1] if member.delivered else None
            before = self.sends.get(previous) if previous else None
            if before is not None and before.sender != sender and concurrent(before.vc, sent.vc):
                marks.append("concurrent")
                fields["concurrent_with"] = previous
        if msg in member.released:
            member.released.discard(msg)
            marks.append("released")
        first = msg not in member.delivered_set
        if first and sent is not None:
            for k, v in sent.vc.items():
                if v > member.maxima.get(k, 0):
                    member.maxima[k] = v
        step = self._step(out, member, ts, "deliver", msg=msg, sender=sender, marks=marks,
                          **fields)
        if first:
            member.delivered_now(msg, step["i"])
        for early in fields.get("overtaken_by", ()):
            target = member.delivery_steps.get(early)
            if target is not None:
                self._mark(out, member, ts, target, "early", by=msg)

    def _on_buffer(self, member: Member, record: Mapping[str, Any],
                   out: list[dict[str, Any]]) -> None:
        msg, ts = str(record["msg"]), record["ts"]
        sender = str(record.get("sender") or msg.rsplit("#", 1)[0])
        if record.get("side") == "send":
            # a sender-side module (mfss, cykas) holds its own message back: shown as held
            sender = member.name
        waiting = record.get("waiting_for")
        waits = tuple(str(w) for w in waiting) if isinstance(waiting, list) else ()
        send_vc = record.get("send_vc")
        if msg not in self.sends and isinstance(send_vc, dict):
            self._remember_send(msg, Sent(sender, dict(send_vc)))
        member.held[msg] = Held(msg, sender, ts, waits)
        self._step(out, member, ts, "hold", msg=msg, sender=sender,
                   side=record.get("side") or "receive")

    def _on_unbuffer(self, member: Member, record: Mapping[str, Any],
                     out: list[dict[str, Any]]) -> None:
        # the delivery step that follows shows the change; a sender-side release of an
        # own message has no delivery here, so it gets a step of its own
        held = member.held.pop(str(record["msg"]), None)
        if held is not None and record.get("side") == "send":
            self._step(out, member, record["ts"], "unhold", msg=held.msg, sender=held.sender)

    def _on_release(self, member: Member, record: Mapping[str, Any],
                    out: list[dict[str, Any]]) -> None:
        msgs = [str(m) for m in record.get("msgs") or ()]
        ts = record["ts"]
        client = str(record.get("client") or "")
        self._step(out, member, ts, "release", client=client, msgs=msgs)
        for msg in msgs:
            target = member.delivery_steps.get(msg)
            if target is not None:  # delivered before the release record was written
                self._mark(out, member, ts, target, "released", client=client)
            else:
                member.released.add(msg)

    def _on_join(self, member: Member, record: Mapping[str, Any],
                 out: list[dict[str, Any]]) -> None:
        client = str(record.get("client") or "")
        if client:
            self._member(client).present = True
        if client == member.name:
            self._step(out, member, record["ts"], "join", client=client)

    def _on_leave(self, member: Member, record: Mapping[str, Any],
                  out: list[dict[str, Any]]) -> None:
        client = str(record.get("client") or "")
        if not client:
            return
        gone = self._member(client)
        if gone.present:
            gone.present = False
            self._step(out, gone, record["ts"], "leave", client=client, seen_by=member.name)

    # -- what is shown -------------------------------------------------------------------
    def _refresh_waiting(self, source: Member, out: list[dict[str, Any]]) -> None:
        """A state step for each other member holding messages: what a held message
        waits for may now be known (its cause's send record came later than the hold)."""
        for member in self.members.values():
            if member is not source and member.held:
                if self._shown.get(member.name) != self.member_state(member):
                    self._step(out, member, self._last_ts(), "state")

    def _last_ts(self) -> float:
        return self.steps[-1]["ts"] if self.steps else 0.0

    def causes(self, member: Member, held: Held) -> list[dict[str, Any]]:
        """The messages ``held`` waits for at ``member``: sends to ``member`` that
        happened before it and that ``member`` has not delivered, the newest per sender
        (each with what the clocks say); a member the module names without a known
        message of it gives a cause without ``msg``."""
        sent = self.sends.get(held.msg)
        found: dict[str, dict[str, Any]] = {}
        if sent is not None:
            for k, bound in sent.vc.items():
                if k == member.name or bound <= member.clock.get(k, 0) and k != sent.sender:
                    continue
                column = self._by_sender.get(k, ())
                # the newest send of k at or below the held message's entry for k that
                # reached no delivery here and was meant for here (a few looked at)
                at = bisect.bisect_right(column, (bound, "\uffff"))
                for own, msg in reversed(column[max(0, at - SCAN):at]):
                    other = self.sends.get(msg)
                    if (msg == held.msg or other is None or msg in member.delivered_set
                            or (other.dests and member.name not in other.dests)):
                        continue
                    found[k] = {"sender": k, "msg": msg, "needs": own,
                                "has": member.clock.get(k, 0)}
                    break
        for k in held.waiting_for:
            if k not in found and k != member.name:
                found[k] = {"sender": k, "msg": None,
                            "needs": sent.vc.get(k, 0) if sent is not None else None,
                            "has": member.clock.get(k, 0)}
        return [found[k] for k in sorted(found)]

    def explain(self, member: Member, held: Held) -> str:
        """One line: why ``member`` holds ``held``, e.g. ``carol holds alice#3: waits
        for bob#2 — alice#3's clock [alice:3, bob:2] needs bob ≥ 2; carol has bob:1``."""
        causes = self.causes(member, held)
        sent = self.sends.get(held.msg)
        head = f"{member.name} holds {held.msg}"
        if held.sender == member.name:
            others = ", ".join(held.waiting_for) or "the module"
            return f"{head} (its own, not sent yet): waits for {others}"
        if not causes:
            return f"{head}: waits ({', '.join(held.waiting_for) or 'cause not in the trace'})"
        names = ", ".join(c["msg"] or f"a message from {c['sender']}" for c in causes)
        needs = "; ".join(f"needs {c['sender']} ≥ {c['needs']}" for c in causes
                          if c["needs"])
        has = ", ".join(f"{c['sender']}:{c['has']}" for c in causes)
        clock = f" — {held.msg}'s clock {clock_text(sent.vc)} {needs}" if sent and needs else ""
        return f"{head}: waits for {names}{clock}; {member.name} has {has}"

    def sent_matrix(self, member: Member) -> dict[str, dict[str, int]]:
        """What ``member`` knows of the messages each member sent to each other one:
        row k, column j counts k's sends to j in ``member``'s causal past (a send of k
        is in it when its entry for k is at most ``member``'s clock's), the SENT matrix
        of Raynal, Schiper and Toueg as the trace tells it (a module also counts its own
        join markers, which the trace leaves out). Kept up to date as the clock grows:
        each send is counted once. The rows are shared with earlier answers: read them,
        never change them."""
        for k, column in self._by_sender.items():
            bound = member.clock.get(k, 0)
            done, counts = member.sent_known.get(k, (0, {}))
            if bound <= done:
                continue
            at = bisect.bisect_right(column, (done, "\uffff"))
            for own, msg in column[at:]:
                if own > bound:
                    break
                sent = self.sends.get(msg)
                if sent is None or sent.inferred:
                    continue
                for dest in set(sent.dests):
                    counts[dest] = counts.get(dest, 0) + 1
            member.sent_known[k] = (bound, counts)
            if counts:
                member.sent_rows[k] = dict(counts)
        return {k: member.sent_rows[k] for k in sorted(member.sent_rows)}

    def member_state(self, member: Member) -> dict[str, Any]:
        """A member as the page shows it."""
        matrix = (self.sent_matrix(member) if member.protocol in MATRIX_MODULES else None)
        return {"clock": dict(member.clock), "present": member.present,
                "protocol": member.protocol, "sent_matrix": matrix,
                "held": [{"msg": h.msg, "sender": h.sender, "since": h.since,
                          "waiting_for": list(h.waiting_for),
                          "causes": self.causes(member, h), "text": self.explain(member, h)}
                         for h in member.held.values()]}

    def snapshot(self) -> dict[str, Any]:
        """Everything a page that opens now needs: the kept steps, how many earlier
        ones were dropped, and each member's state before the kept steps (``base``)."""
        steps = list(self.steps)
        return {"view": self.name, "steps": steps, "base": dict(self._base),
                "dropped": steps[0]["i"] if steps else self.next_index,
                "members": sorted(self.members)}


def view_records(records: Sequence[Mapping[str, Any]], name: str = "") -> SessionView:
    """A view fed ``records`` in order (tests, a finished trace)."""
    view = SessionView(name)
    for record in records:
        view.add(record)
    return view
