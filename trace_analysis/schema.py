"""The trace schema (docs/trace_schema.md) as the analyzer reads it, and the one line
validator every checker and loader uses, :func:`parse_line` (docs/analysis.md)."""

from __future__ import annotations

import importlib
import json
from typing import Any

try:
    from groupcomm.core import trace_schema as _schema
except ImportError:  # a Spark worker without groupcomm: the copy shipped with the job
    # (by name: the module exists only in the zip the driver sends, see session.py)
    _schema = importlib.import_module("trace_analysis._shipped_trace_schema")

ALWAYS, FIELDS = _schema.ALWAYS, _schema.FIELDS
INT64_MAX, REQUIRED, STRING_FIELDS = _schema.INT64_MAX, _schema.REQUIRED, _schema.STRING_FIELDS
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


def parse_line(text: str) -> ParseResult:
    """Parse and validate one trace line (without its line terminator)."""
    if not text.strip():
        return BLANK, None, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return MALFORMED, "not JSON", None
    reason = _schema.record_problem(value)
    if reason is not None:
        return MALFORMED, reason, None
    parsed = {name: value.get(name) for name in FIELDS}
    parsed["ts"] = float(parsed["ts"])
    return OK, None, parsed
