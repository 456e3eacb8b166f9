"""Splitting one message's time from two frame timelines (groupcomm.tools.critical_path)."""

from __future__ import annotations

from groupcomm.tools.critical_path import (
    describe,
    handling_bound,
    send_calls,
    summarize,
    transfers,
    turnarounds,
)

# one machine, one clock (ns): the sender sends m1 at 100-110, the receiver takes it up at
# 150, answers with an ACK sent at 190-200, the sender takes that up at 260 and sends m2
# at 300-305; the receiver takes m2 up at 340 and its ACK leaves at 380-390
SENDER = [("send", 100), ("sent", 110), ("in", 260), ("send", 300), ("sent", 305)]
RECEIVER = [("in", 150), ("send", 190), ("sent", 200), ("in", 340), ("send", 380),
            ("sent", 390)]


def test_turnaround_runs_from_a_frame_taken_up_to_the_end_of_the_send_it_caused() -> None:
    assert turnarounds(SENDER) == [45]
    assert turnarounds(RECEIVER) == [50, 50]
    # a frame that caused no send before the next arrived is not paired with a later one
    assert turnarounds([("in", 0), ("in", 10), ("send", 12), ("sent", 15)]) == [5]


def test_transfer_runs_from_the_end_of_a_send_to_the_next_frame_the_peer_takes_up() -> None:
    assert transfers(SENDER, RECEIVER) == [40, 35]
    assert transfers(RECEIVER, SENDER) == [60]  # the last ACK's arrival is not recorded
    assert send_calls(SENDER) == [10, 5]


def test_summary_gives_each_part_and_the_sum_of_the_medians() -> None:
    summary = summarize(SENDER, RECEIVER)
    assert summary["receiver_turnaround"] == {"n": 2, "median_us": 0.1, "p10_us": 0.1,
                                              "p90_us": 0.1}
    assert summary["sender_turnaround"]["n"] == 1
    assert summary["receiver_to_sender"]["n"] == 1
    assert summary["sum_of_medians_us"] == round(sum(
        summary[p]["median_us"] for p in ("sender_turnaround", "sender_to_receiver",
                                          "receiver_turnaround", "receiver_to_sender")), 1)
    empty = summarize([], [])
    assert empty["sender_turnaround"] == {"n": 0, "median_us": 0.0, "p10_us": 0.0,
                                          "p90_us": 0.0}


def test_handling_is_each_turnaround_but_its_send_call() -> None:
    # in µs: turnarounds 20 and 60 with send calls 10 and 50 at the sender (handling 10
    # and 10), 15 and 15 with send calls 5 and 5 at the receiver (10 and 10)
    sender = [("in", 0), ("send", 10_000), ("sent", 20_000), ("in", 100_000),
              ("send", 110_000), ("sent", 160_000)]
    receiver = [("in", 30_000), ("send", 40_000), ("sent", 45_000), ("in", 170_000),
                ("send", 180_000), ("sent", 185_000)]
    summary = summarize(sender, receiver)
    assert summary["sender_turnaround"]["median_us"] == 40.0
    assert summary["sender_send_call"]["median_us"] == 30.0
    assert summary["handling_us_per_turnaround"] == 10.0


def test_handling_bound_against_a_round_trip() -> None:
    summary = {"handling_us_per_turnaround": 40.0}
    # 250 us per message, 80 of them handling: the rest, 170 us, allows 140/170 of one
    # message per 140 us round trip; 0.7 of it (200 us per message) leaves 15 us per side
    assert handling_bound(summary, 250.0, 140.0, 0.7) == {
        "rest_us": 170.0, "fraction_without_handling": 0.824, "handling_budget_us": 15.0}
    # the rest alone already slower than 0.7 allows: nothing left for the handling
    assert handling_bound(summary, 300.0, 140.0, 0.7)["handling_budget_us"] == 0.0


def test_the_description_ends_with_the_sum_and_the_handling() -> None:
    lines = describe(summarize(SENDER, RECEIVER))
    assert len(lines) == 8  # four parts, two send calls, the sum, the handling
    assert lines[-2].strip().startswith("sum of the four medians:")
    assert "handling (a turnaround but its send call)" in lines[-1]
    assert lines[-1].rstrip().endswith("us per turnaround")
