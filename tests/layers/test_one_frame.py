"""The reliable layer sends a message to several members as one frame, numbered for
each (``~r`` {destination: number}), and retransmits to a destination that lost it that
copy alone (docs/sessions.md, "Faults")."""

from __future__ import annotations

from typing import Any

import pytest

from groupcomm.core.causality import ProtocolViolation
from groupcomm.core.headers import RESENT
from groupcomm.core.messages import ControlMessage, ReceivedMessage, SentMessage
from groupcomm.layers.reliable import ACK, INITIAL_RTO, SEQ, WINDOW
from tests.layers.test_grouped_acks import layer


def message(i: int, *dests: str, sender: str = "a") -> SentMessage:
    return SentMessage(application_name="app", session_name="s", user_message=i,
                       message_id=f"{sender}#{i}", sender=sender, destinations=dests)


def data_frames(sent: Any) -> list[SentMessage]:
    return [m for m in sent.messages if not m.is_control_for("reliable")]


def test_a_send_to_several_leaves_as_one_frame_numbered_for_each() -> None:
    host, a, sent, up = layer("a")
    a.send_filter.filter_message(message(1, "a", "b", "c", "d"))
    a.send_filter.filter_message(message(2, "b", "c"))
    loop, first, second = sent.messages
    assert loop.destinations == ("a",) and SEQ not in loop.headers
    assert first.destinations == ("b", "c", "d")
    assert first.headers[SEQ] == (("b", 1), ("c", 1), ("d", 1))
    assert second.headers[SEQ] == (("b", 2), ("c", 2))
    # each destination keeps its entry: acknowledged by each on its own
    assert {peer: list(flight) for peer, flight in a.in_flight.items()} == {
        "b": [1, 2], "c": [1, 2], "d": [1]}


def test_each_destination_takes_its_own_number() -> None:
    _, a, a_sent, _ = layer("a")
    receivers = {name: layer(name) for name in ("b", "c")}
    a.send_filter.filter_message(message(1, "c"))  # c is one ahead of b from now on
    for i in (2, 3):
        a.send_filter.filter_message(message(i, "b", "c"))
    for name, (_, manager, _, up) in receivers.items():
        for frame in a_sent.messages:
            if name in frame.destinations:
                manager.receive_filter.filter_message(frame.received_by(name))
        assert manager.next_expected["a"] == (3 if name == "b" else 4)
        assert all(SEQ not in m.headers for m in up.messages)
    assert [m.user_message for m in receivers["b"][3].messages] == [2, 3]
    assert [m.user_message for m in receivers["c"][3].messages] == [1, 2, 3]


def test_only_the_destination_that_lost_it_gets_it_again_alone() -> None:
    host, a, a_sent, _ = layer("a")
    for i in (1, 2):
        a.send_filter.filter_message(message(i, "b", "c"))
    a.acknowledged("b", 2, ())  # b has both; c lost both
    a_sent.messages.clear()
    host.clock += INITIAL_RTO * 2
    host.tick()
    again = data_frames(a_sent)
    assert [(m.destinations, m.headers[SEQ], m.headers[RESENT]) for m in again] == [
        (("c",), 1, True), (("c",), 2, True)]
    assert a.stats["retransmissions"] == 2 and not a.in_flight["b"]
    # what is held is listed as the copy to that destination alone
    assert [(m.destinations, m.headers[SEQ]) for m in a.held()] == [(("c",), 1), (("c",), 2)]


def test_a_destination_with_a_full_window_queues_its_own_copy_in_number_order() -> None:
    _, a, a_sent, _ = layer("a")
    for i in range(WINDOW):
        a.send_filter.filter_message(message(i, "b"))
    a_sent.messages.clear()
    a.send_filter.filter_message(message(-1, "b", "c"))  # b's window is full
    a.send_filter.filter_message(message(-2, "b", "c"))  # b has one waiting: queues too
    assert [(m.destinations, m.headers[SEQ]) for m in a_sent.messages] == [
        (("c",), 1), (("c",), 2)]
    assert [(m.destinations, m.headers[SEQ]) for m in a.waiting["b"]] == [
        (("b",), WINDOW + 1), (("b",), WINDOW + 2)]
    a.acknowledged("b", 2, ())  # room for two: they go, in order
    assert [(m.destinations, m.headers[SEQ]) for m in a_sent.messages[2:]] == [
        (("b",), WINDOW + 1), (("b",), WINDOW + 2)]
    assert not a.waiting["b"]


def test_departed_and_layerless_destinations_are_left_out_of_the_numbered_frame() -> None:
    _, a, a_sent, _ = layer("a")
    a.client_left("gone", "app")
    a.peer_without_layer("plain")
    a.send_filter.filter_message(message(1, "b", "gone", "plain", "c"))
    plain, numbered = a_sent.messages
    assert plain.destinations == ("plain",) and SEQ not in plain.headers
    assert numbered.destinations == ("b", "c")
    assert numbered.headers[SEQ] == (("b", 1), ("c", 1))
    assert a.stats["to_departed"] == 1


def received(sender: str = "a", **headers: Any) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="s", user_message="x",
                           message_id=f"{sender}#1", sender=sender, receiver="b",
                           headers=headers)


@pytest.mark.parametrize(("value", "error"), [
    ((("c", 1), ("d", 1)), "frame from a numbered for c, d but not for b"),
    ((("b", 1), "c"), "malformed sequence numbers from a: 'c' is not a"),
    ((("b", 1, 2),), "malformed sequence numbers from a"),
    (((1, 1),), "malformed sequence numbers from a"),
    ((("b", "1"),), "bad sequence number '1' from a"),
    ((("b", 0),), "bad sequence number 0 from a"),
    ((), "malformed sequence numbers from a: empty"),
])
def test_a_malformed_or_foreign_numbering_is_refused(value: Any, error: str) -> None:
    _, b, _, up = layer("b")
    with pytest.raises(ProtocolViolation, match=error):
        b.receive_filter.filter_message(received(**{SEQ: value}))
    assert up.messages == [] and b.stats["frames_received"] == 0


def test_acknowledgements_owed_to_some_destinations_ride_on_the_frame_to_all() -> None:
    b_host, b, b_sent, _ = layer("b")
    _, c, _, c_up = layer("c")
    _, d, d_sent, _ = layer("d")
    for i in (1, 2):  # d sends b two frames: b owes d an acknowledgement
        d.send_filter.filter_message(message(i, "b", sender="d"))
        b.receive_filter.filter_message(d_sent.messages[-1].received_by("b"))
    b_host.clock += 0.003
    b.send_filter.filter_message(message(1, "c", "d", sender="b"))
    (frame,) = b_sent.messages
    assert frame.headers[ACK] == (("d", (2, (), 3000)),)
    assert b.stats["acks_piggybacked"] == 1 and not b.owed
    b_host.tick()
    assert b.stats["acks_sent"] == 0  # nothing owed any more
    c.receive_filter.filter_message(frame.received_by("c"))  # none of its business
    d.receive_filter.filter_message(frame.received_by("d"))  # its own entry
    assert [m.user_message for m in c_up.messages] == [1]
    assert not d.in_flight["b"]


def test_an_acknowledgement_frame_without_an_entry_for_the_receiver_is_refused() -> None:
    _, b, _, _ = layer("b")
    ack = ReceivedMessage(application_name="app", session_name="s",
                          user_message=ControlMessage("reliable", "rack"),
                          message_id="a~rack1", sender="a", receiver="b",
                          headers={ACK: (("c", (1, (), 0)),)})
    with pytest.raises(ProtocolViolation, match="acknowledgement from a for c but not for b"):
        b.receive_filter.filter_message(ack)
    with pytest.raises(ProtocolViolation, match="malformed acknowledgement"):
        b.receive_filter.filter_message(received(**{SEQ: 1, ACK: (("b", (1, "x")),)}))


def test_acknowledgements_owed_to_several_peers_leave_in_one_frame_each_takes_its_own() -> None:
    b_host, b, b_sent, _ = layer("b")
    senders = {name: layer(name) for name in ("a", "c", "d")}
    for name, (_, manager, sent, _) in senders.items():
        manager.send_filter.filter_message(message(1, "b", sender=name))
        manager.send_filter.filter_message(message(2, "b", sender=name))
        if name != "d":  # d's second frame is lost: b acknowledges a gap at once
            b.receive_filter.filter_message(sent.messages[0].received_by("b"))
        b.receive_filter.filter_message(sent.messages[1].received_by("b"))
    b_host.end_batch()
    (urgent,) = b_sent.messages
    assert urgent.destinations == ("d",) and urgent.headers[ACK] == (0, (2,), 0)
    b_host.tick()
    (_, grouped) = b_sent.messages
    assert grouped.destinations == ("a", "c")
    assert grouped.headers[ACK] == (("a", (2, (), 0)), ("c", (2, (), 0)))
    assert b.stats["acks_sent"] == 3 and b.stats["ack_frames_sent"] == 2
    for name in ("a", "c"):
        senders[name][1].receive_filter.filter_message(grouped.received_by(name))
        assert not senders[name][1].in_flight["b"]
