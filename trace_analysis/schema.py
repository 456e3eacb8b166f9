"""The trace schema (docs/trace_schema.md) as the analyzer reads it, and the one line validator.

:func:`parse_line` decides "is this line an event?" by the rules of docs/trace_schema.md
("Files and lines", "Fields"): blank lines are skipped; a line must be one JSON object
whose present known fields have their types (``null`` is absent; booleans are not
numbers); every event needs ``ts``, ``process``, ``event`` and ``protocol``, and each
event type its own fields (:data:`REQUIRED`); a ``send`` needs a positive entry of its
own sender in ``vc`` (the scaling fact); unknown fields and events are ignored. The
reference checker calls it on every line and the Spark loaders on the lines their fast
paths do not vouch for, so all agree by construction.
"""

from __future__ import annotations

import importlib
import json
import math
from typing import Any

try:
    from groupcomm.core import trace_schema as _schema
except ImportError:  # a Spark worker without groupcomm: the copy shipped with the job
    # (by name: the module exists only in the zip the driver sends, see session.py)
    _schema = importlib.import_module("trace_analysis._shipped_trace_schema")

# the analyzer's names for the schema's
ALWAYS, EVENTS, FIELDS = _schema.ALWAYS, _schema.EVENTS, _schema.FIELDS
INT64_MAX, REQUIRED, STRING_FIELDS = _schema.INT64_MAX, _schema.REQUIRED, _schema.STRING_FIELDS

KNOWN_EVENTS = EVENTS
#: the fields the analysis keeps for each event type (others are dropped after checking)
KEPT: dict[str, tuple[str, ...]] = {
    "send": ("msg", "sender", "dests", "vc"),
    "deliver": ("msg", "sender"),
    "network_send": ("kind", "meta_bytes"),
    "control_send": ("kind", "meta_bytes"),
    "control_receive": ("kind",),
    "buffer": ("msg",),
    "unbuffer": ("msg",),
}

OK = "ok"
BLANK = "blank"
MALFORMED = "malformed"

#: (status, reason, record): record holds FIELDS (absent ones None) when status is OK
ParseResult = tuple[str, str | None, dict[str, Any] | None]


def _is_int(value: Any) -> bool:
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
    if vc is not None and not (isinstance(vc, dict) and all(_is_int(v) for v in vc.values())):
        return "'vc' is not an object of non-negative integers"
    meta = record.get("meta_bytes")
    if meta is not None and not _is_int(meta):
        return "'meta_bytes' is not a non-negative integer"
    return None


def check_record(record: Any) -> ParseResult:
    """Validate one decoded JSON value against the schema (see the module docstring)."""
    if not isinstance(record, dict):
        return MALFORMED, "not a JSON object", None
    for name in ALWAYS:
        if record.get(name) is None:
            return MALFORMED, f"missing {name!r}", None
    reason = _type_error(record)
    if reason is not None:
        return MALFORMED, reason, None
    event = record["event"]
    for name in REQUIRED.get(event, ()):
        if record.get(name) is None:
            return MALFORMED, f"{event} without {name!r}", None
    if event == "send" and record["vc"].get(record["sender"], 0) < 1:
        return MALFORMED, "send vc lacks the sender's own entry", None
    parsed = {name: record.get(name) for name in FIELDS}
    parsed["ts"] = float(parsed["ts"])
    return OK, None, parsed


def parse_line(text: str) -> ParseResult:
    """Parse and validate one trace line (without its line terminator)."""
    if not text.strip():
        return BLANK, None, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return MALFORMED, "not JSON", None
    return check_record(value)


def keep_fields(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the fields the analysis does not use for its event set to None."""
    kept = KEPT.get(record["event"], ())
    return {
        name: (value if name in ALWAYS or name in kept else None)
        for name, value in record.items()
    }
