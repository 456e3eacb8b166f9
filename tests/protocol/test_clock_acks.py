"""Clock acknowledgements (groupcomm.protocol.clock_acks): when one is due, what a peer's
bad one gets, and whole ClientProtocols in virtual time under every module the editor
runs under: a silent member acknowledges at most once a heartbeat, not at all once it
delivers nothing new, receiving acknowledgements never calls for one, and the trace
stays valid (docs/replicated.md, "Causal stability")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupcomm.core.tracing import MemoryTracer, validate_record
from groupcomm.protocol.clock_acks import ClockAcks
from groupcomm.protocol.session_events import ClockAcknowledged
from tests.protocol.test_inprocess import Net
from trace_analysis.reference import check_directory


def test_an_acknowledgement_is_due_only_for_something_new_and_no_recent_send() -> None:
    acks = ClockAcks()
    assert not acks.due(())  # nothing delivered at all
    assert acks.due((("a", 1), ("b", 1)))
    acks.acknowledged((("a", 1), ("b", 2)))  # its tag: the clock and the send event
    assert not acks.due((("a", 1), ("b", 2)))  # said already
    acks.own_send((("a", 1), ("b", 3)))
    assert not acks.due((("a", 2), ("b", 4)))  # it sent during this period
    assert not acks.due((("a", 1), ("b", 3)))  # its send said that much
    assert acks.due((("a", 2), ("b", 4)))
    acks.acknowledged((("a", 2), ("b", 5)))
    acks.peer_joined()  # the newcomer has heard nothing from it
    assert acks.due((("a", 2), ("b", 5)))
    assert acks.count == 2


@given(st.lists(st.sampled_from(["deliver", "send", "beat", "ack_received"]), max_size=60))
def test_acknowledgements_follow_the_rule(steps: list[str]) -> None:
    """An acknowledgement comes only at a beat after a period without sends, for a
    clock that moved since the last send or acknowledgement; one received (which moves
    no clock) never calls for one; a clock that moved is said at the first beat after a
    period without sends."""
    acks = ClockAcks()
    clock: dict[str, int] = {}
    told: tuple = ()
    sent_in_period = False
    for step in steps:
        if step == "deliver":
            clock["p"] = clock.get("p", 0) + 1
            clock["me"] = clock.get("me", 0) + 1
        elif step == "send":
            clock["me"] = clock.get("me", 0) + 1
            acks.own_send(tuple(sorted(clock.items())))
            told, sent_in_period = tuple(sorted(clock.items())), True
        elif step == "beat":
            now = tuple(sorted(clock.items()))
            if acks.due(now):
                assert not sent_in_period and now and now != told
                clock["me"] += 1  # the acknowledgement is tagged like a send
                told = tuple(sorted(clock.items()))
                acks.acknowledged(told)
            else:
                assert sent_in_period or not now or now == told
            sent_in_period = False
        # "ack_received": nothing here changes: that is the point


#: modules that stamp each destination's copy of a message differently
COPY_PER_MEMBER = ("matrix-delta", "ks", "fifo")
EDITOR_MODULES = ["vector", "matrix", "matrix-delta", "ks", "mfss", "cykas", "fifo", "none"]


@pytest.mark.parametrize("module", EDITOR_MODULES)
def test_a_silent_member_acknowledges_once_a_heartbeat_and_then_stops(module: str,
                                                                      tmp_path) -> None:
    tracer = MemoryTracer()
    net = Net(module)
    events: dict[str, list[ClockAcknowledged]] = {}
    for name in ("a", "b", "c"):
        member = net.member(name, clock_acks=True, tracer_for=lambda _m: tracer)
        events[name] = []
        member.protocol.add_event_listener(
            lambda e, name=name: isinstance(e, ClockAcknowledged) and events[name].append(e))
        member.start()
        net.run()
    a, b, c = (net.members[n] for n in "abc")
    acks_sent: dict[str, list[int]] = {n: [] for n in "abc"}
    # the frames each member hands the server to relay (b and c send nothing else)
    relayed = {n: 0 for n in "abc"}
    relayed_per_tick: dict[str, list[int]] = {n: [] for n in "abc"}
    carry = net.relay

    def relay(member, frame, dests, message) -> None:
        relayed[member.name] += 1
        carry(member, frame, dests, message)

    net.relay = relay  # type: ignore[method-assign]

    def tick() -> None:
        before = dict(relayed)
        net.tick()  # one heartbeat period of every member
        for name, member in net.members.items():
            acks_sent[name].append(member.protocol.stats["clock_acks_sent"])
            relayed_per_tick[name].append(relayed[name] - before[name])

    last = None
    for k in range(8):  # a sends twice a period; b and c never send
        for _ in range(2):
            last = a.send(f"m{k}", ["b", "c"])[-1]
            net.run()
        tick()
    for _ in range(8):  # nobody sends
        tick()
    for name in "bc":
        counts = acks_sent[name]
        steps = [after - before for before, after in zip([0, *counts], counts, strict=False)]
        assert max(steps) <= 1, steps  # at most one a heartbeat
        assert sum(steps[:8]) >= 6, steps  # something new in each period
        assert steps[-6:] == [0] * 6, steps  # nothing new: nothing (no ping-pong)
        frames = relayed_per_tick[name]
        assert frames[-6:] == [0] * 6, frames  # idle: not a frame
        if module in COPY_PER_MEMBER:  # one copy of the acknowledgement per member
            assert max(frames) <= 2, frames
        elif module not in ("mfss", "cykas"):  # (which also acknowledge a's messages)
            assert max(frames) <= 1, frames  # one frame a heartbeat at most
    assert acks_sent["a"][-1] == 0  # its sends said its clock; acknowledgements move none
    assert net.handed["b"] == [f"m{k}" for k in range(8) for _ in range(2)]
    # the last acknowledgement a received from each says all it delivered (its tag: the
    # clock with its own send event; with mfss and cykas, of its first copy)
    for name in "bc":
        said = dict(next(e for e in reversed(events["a"]) if e.peer == name).clock)
        now = net.members[name].node.application_clock
        assert said.get("a") == now.get("a") and said[name] >= now[name] - 1
    assert a.node.application_clock == dict(last.vc)  # acknowledgements moved no clock
    sent = [r for r in tracer.records if r["event"] == "control_send"
            and r["kind"] == "clock_ack"]
    received = [r for r in tracer.records if r["event"] == "control_receive"
                and r["kind"] == "clock_ack"]
    assert len(sent) == len(received) == (acks_sent["b"][-1] + acks_sent["c"][-1]) * 2
    ack_ids = {r["msg"] for r in sent}
    assert ack_ids and not [r for r in tracer.records if r["event"] not in (
        "control_send", "control_receive") and r.get("msg") in ack_ids]
    for record in tracer.records:
        validate_record(record)
    tracer.write_dir(tmp_path)
    result = check_directory(tmp_path)
    assert result.malformed_lines == 0 and result.causal_violations == 0
    assert result.undelivered == 0 and result.duplicates == 0
