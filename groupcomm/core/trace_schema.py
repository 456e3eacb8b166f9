"""The trace schema, defined once: the event names and which fields each event has.

A trace is one JSON object per line, one file per process; docs/trace_schema.md says what
every field means. The producers (:mod:`groupcomm.core.tracing`) check their records
against these tables, and the analyzer (:mod:`trace_analysis.schema`) reads lines by them.
"""

from __future__ import annotations

#: application-level events: what the application sent and was handed
APP_EVENTS = ("send", "deliver")
#: protocol and transport events
PROTOCOL_EVENTS = (
    "network_send",
    "receive",
    "buffer",
    "unbuffer",
    "control_send",
    "control_receive",
    "join",
    "leave",
    "reject",
    "release",
)
EVENTS = APP_EVENTS + PROTOCOL_EVENTS

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
#: optional fields some events carry, which the analysis reads itself (not through
#: :data:`FIELDS`): a ``release`` names the member given up on (``client``) and the
#: messages delivered without waiting further for it (``msgs``); the first record a
#: file writer writes carries its process id and host (``pid``, ``host``)
RELEASE_FIELDS = ("client", "msgs")
WRITER_FIELDS = ("pid", "host")
#: fields whose value is a string wherever they appear
STRING_FIELDS = ("process", "event", "protocol", "msg", "sender", "kind")
#: every field the analyzer reads, in the order of a parsed record
FIELDS = ("ts", "process", "event", "protocol", "msg", "sender", "dests", "vc", "kind",
          "meta_bytes")
#: the largest clock entry or byte count a trace may hold
INT64_MAX = 2**63 - 1
