"""``groupcomm bench --critical-path``: one message's turnarounds, transfers and handling
from both communicators' frame timelines (``in``, ``send``, ``sent``; one monotonic clock);
BENCHMARKS.md, "Where one message's time goes", says what each part is."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from typing import Any

Timeline = Sequence[tuple[str, int]]

#: the parts of one message's time, in the order a message meets them
PARTS = ("sender_turnaround", "sender_to_receiver", "receiver_turnaround",
         "receiver_to_sender")


def _stats(values_ns: list[int]) -> dict[str, float]:
    if not values_ns:
        return {"n": 0, "median_us": 0.0, "p10_us": 0.0, "p90_us": 0.0}
    if len(values_ns) == 1:
        low = high = values_ns[0]
    else:
        deciles = statistics.quantiles(values_ns, n=10)
        low, high = deciles[0], deciles[-1]
    return {"n": len(values_ns), "median_us": round(statistics.median(values_ns) / 1e3, 1),
            "p10_us": round(low / 1e3, 1), "p90_us": round(high / 1e3, 1)}


def _spans(timeline: Timeline, start: str) -> list[int]:
    """From each ``start`` entry to the end of the next send after it (ns); a start with
    no send before the next start is left out."""
    found: list[int] = []
    pending: int | None = None
    for kind, at in timeline:
        if kind == start:
            pending = at
        elif kind == "sent" and pending is not None:
            found.append(at - pending)
            pending = None
    return found


def turnarounds(timeline: Timeline) -> list[int]:
    """From each frame taken up to the end of the next send after it (ns); a frame that
    caused no send before the next one arrived is left out."""
    return _spans(timeline, "in")


def send_calls(timeline: Timeline) -> list[int]:
    """The duration of each send call (ns)."""
    return _spans(timeline, "send")


def transfers(source: Timeline, destination: Timeline) -> list[int]:
    """From the end of each send in ``source`` to the first frame ``destination`` takes
    up after it (ns)."""
    arrivals = [at for kind, at in destination if kind == "in"]
    found: list[int] = []
    for kind, at in source:
        if kind == "sent":
            index = bisect.bisect_left(arrivals, at)
            if index < len(arrivals):
                found.append(arrivals[index] - at)
    return found


def summarize(sender: Timeline, receiver: Timeline) -> dict[str, Any]:
    """Median, 10th and 90th percentile (µs) of each part of a message's time, and the
    sum of the medians (close to the time per message when one is in flight)."""
    parts = {
        "sender_turnaround": _stats(turnarounds(sender)),
        "sender_to_receiver": _stats(transfers(sender, receiver)),
        "receiver_turnaround": _stats(turnarounds(receiver)),
        "receiver_to_sender": _stats(transfers(receiver, sender)),
        "sender_send_call": _stats(send_calls(sender)),
        "receiver_send_call": _stats(send_calls(receiver)),
    }
    parts["sum_of_medians_us"] = round(sum(parts[p]["median_us"] for p in PARTS), 1)
    # the handling: a turnaround but its send call (verify, decode, module, delivery, the
    # answer's encoding and signature), the part Python code could still change
    handling = [max(0.0, parts[f"{side}_turnaround"]["median_us"]
                    - parts[f"{side}_send_call"]["median_us"]) for side in ("sender", "receiver")]
    parts["handling_us_per_turnaround"] = round(sum(handling) / 2, 1)
    return parts


def handling_bound(summary: dict[str, Any], per_message_us: float, round_trip_us: float,
                   fraction: float) -> dict[str, float]:
    """``rest_us``: the measured ``per_message_us`` without the two turnarounds' handling
    (medians); ``fraction_without_handling``: what the rest alone reaches of one message
    per ``round_trip_us``; ``handling_budget_us``: the handling per turnaround that would
    still reach ``fraction`` (0 when the rest alone is too slow; an estimate, from
    medians)."""
    rest = max(0.0, per_message_us - 2 * summary["handling_us_per_turnaround"])
    budget = max(0.0, (round_trip_us / fraction - rest) / 2)
    return {"rest_us": round(rest, 1),
            "fraction_without_handling": round(round_trip_us / rest, 3) if rest else 0.0,
            "handling_budget_us": round(budget, 1)}


def describe(summary: dict[str, Any]) -> list[str]:
    """Lines for a person: one per part, then the sum."""
    lines = []
    for part in (*PARTS, "sender_send_call", "receiver_send_call"):
        stats = summary[part]
        label = part.replace("_", " ")
        lines.append(f"  {label:<22} median {stats['median_us']:7.1f} us  p10 "
                     f"{stats['p10_us']:7.1f}  p90 {stats['p90_us']:7.1f}  (n={stats['n']})")
    lines.append(f"  sum of the four medians: {summary['sum_of_medians_us']:.1f} us per message")
    lines.append(f"  handling (a turnaround but its send call): "
                 f"{summary['handling_us_per_turnaround']:.1f} us per turnaround")
    return lines
