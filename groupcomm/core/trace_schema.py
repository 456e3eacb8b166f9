"""The trace schema (docs/trace_schema.md), defined once: the event names, which fields
each event has, and :func:`record_problem`, by which the producers check their records
and the analyzer (:mod:`trace_analysis.schema`) reads lines. Only the standard library:
the file is shipped alone to Spark workers without groupcomm.
"""

from __future__ import annotations

import math
from typing import Any

#: the application's events (what it sent and was handed), then the protocol's and the
#: transport's
EVENTS = ("send", "deliver", "network_send", "receive", "buffer", "unbuffer", "control_send",
          "control_receive", "join", "leave", "reject", "release")

#: fields every event has
ALWAYS = ("ts", "process", "event", "protocol")
#: extra fields each event type requires
REQUIRED: dict[str, tuple[str, ...]] = {
    "send": ("msg", "sender", "dests", "vc"),
    "deliver": ("msg", "sender", "vc"),
    "network_send": ("msg", "kind", "meta_bytes"),
    "control_send": ("kind", "meta_bytes"),
    "control_receive": ("kind",),
    "receive": ("msg",),
    "buffer": ("msg",),
    "unbuffer": ("msg",),
}
#: fields whose value is a string wherever they appear
STRING_FIELDS = ("process", "event", "protocol", "msg", "sender", "kind")
#: every field the analyzer reads, in the order of a parsed record
FIELDS = ("ts", "process", "event", "protocol", "msg", "sender", "dests", "vc", "kind",
          "meta_bytes")
#: the largest clock entry or byte count a trace may hold
INT64_MAX = 2**63 - 1


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX


def _type_error(record: dict[str, Any]) -> str | None:
    """The first present field with a wrong type, as a reason; None when all are fine."""
    ts = record.get("ts")
    if ts is not None:
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            return "'ts' is not a number"
        try:
            if not math.isfinite(float(ts)):
                return "'ts' is not finite"
        except OverflowError:
            return "'ts' is not finite"
    for name in STRING_FIELDS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name!r} is not a string"
    dests = record.get("dests")
    if dests is not None and not (
        isinstance(dests, list) and all(isinstance(d, str) for d in dests)
    ):
        return "'dests' is not a list of strings"
    vc = record.get("vc")
    if vc is not None and not (isinstance(vc, dict) and all(_is_count(v) for v in vc.values())):
        return "'vc' is not an object of non-negative integers"
    meta = record.get("meta_bytes")
    if meta is not None and not _is_count(meta):
        return "'meta_bytes' is not a non-negative integer"
    return None


def record_problem(record: Any) -> str | None:
    """What makes one decoded JSON value not an event of the schema (docs/trace_schema.md:
    types, required fields, a send's own clock entry), or None; unknown fields and events
    pass."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for name in ALWAYS:
        if record.get(name) is None:
            return f"missing {name!r}"
    reason = _type_error(record)
    if reason is not None:
        return reason
    event = record["event"]
    for name in REQUIRED.get(event, ()):
        if record.get(name) is None:
            return f"{event} without {name!r}"
    if event == "send" and record["vc"].get(record["sender"], 0) < 1:
        return "send vc lacks the sender's own entry"
    return None
