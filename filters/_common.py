"""The helpers the built-in causality modules share, under their old private name.

They are the public module-author API now, :mod:`groupcomm.module_kit` (header codecs,
the buffer drain, control messages and departures; docs/writing-a-module.md): the
built-in modules import them from there, as a third-party module does. This module
re-exports them for code that still imports the old name.
"""

from __future__ import annotations

from groupcomm.module_kit import (
    INT_ONLY,
    Clock,
    Matrix,
    blocking,
    control_message,
    decode_clock,
    decode_matrix,
    drop_unsent_to,
    encode_clock,
    encode_matrix,
    first_deliverable,
    freeze_clock,
    freeze_matrix,
    gone_before_sending,
    header,
    int_header,
    take_first_deliverable,
    warn_held_on,
)

__all__ = ["INT_ONLY", "Clock", "Matrix", "blocking", "control_message", "decode_clock",
           "decode_matrix", "drop_unsent_to", "encode_clock", "encode_matrix",
           "first_deliverable", "freeze_clock", "freeze_matrix", "gone_before_sending",
           "header", "int_header", "take_first_deliverable", "warn_held_on"]
