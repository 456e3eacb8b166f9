"""The public API for writing a causality module or an extra filter outside this
repository, and what the built-in modules themselves use: the names keep their meaning
within a major version of :data:`PLUGIN_API`. docs/writing-a-module.md is the guide.
Like the modules it serves, this package does no I/O (no sockets, threads, clocks or
randomness), so a module built on it runs unchanged in real processes, the simulator
and the model checker.
"""

from __future__ import annotations

from groupcomm.core.causality import (
    CausalityError,
    CausalityManager,
    CausalityModule,
    ModuleReceiveFilter,
    ModuleSendFilter,
    ProtocolViolation,
)
from groupcomm.core.filtering import FilterHost, MessageFilter, MessageFilterCreator
from groupcomm.core.hookspecs import PLUGIN_API, PLUGIN_API_ATTRIBUTE, hookimpl
from groupcomm.core.messages import (
    ControlMessage,
    GroupMessage,
    HeaderValue,
    ReceivedMessage,
    SentMessage,
    SystemMessage,
    with_header_unchecked,
    without_header_unchecked,
)
from groupcomm.core.registry import FilterOption
from groupcomm.module_kit.codecs import (
    INT_ONLY,
    Clock,
    Matrix,
    Rename,
    decode_clock,
    decode_matrix,
    encode_clock,
    encode_matrix,
    freeze_clock,
    freeze_matrix,
    header,
    int_header,
    rename_clock,
    rename_matrix,
)
from groupcomm.module_kit.control import (
    control_message,
    drop_unsent_to,
    gone_before_sending,
    warn_held_on,
)
from groupcomm.module_kit.drain import blocking, first_deliverable, take_first_deliverable

__all__ = [
    "INT_ONLY", "PLUGIN_API", "PLUGIN_API_ATTRIBUTE", "CausalityError", "CausalityManager",
    "CausalityModule", "Clock", "ControlMessage", "FilterHost", "FilterOption", "GroupMessage",
    "HeaderValue", "Matrix", "MessageFilter", "MessageFilterCreator", "ModuleReceiveFilter",
    "ModuleSendFilter", "ProtocolViolation", "ReceivedMessage", "Rename", "SentMessage",
    "SystemMessage", "blocking", "control_message", "decode_clock", "decode_matrix",
    "drop_unsent_to", "encode_clock", "encode_matrix", "first_deliverable", "freeze_clock",
    "freeze_matrix", "gone_before_sending", "header", "hookimpl", "int_header", "rename_clock",
    "rename_matrix", "take_first_deliverable", "warn_held_on", "with_header_unchecked",
    "without_header_unchecked",
]
