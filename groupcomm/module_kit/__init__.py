"""The public API for writing a causality module or an extra filter outside this
repository: what the built-in modules themselves use.

docs/writing-a-module.md is the guide (the contracts in the order an author meets them,
with a complete receiver-side module walked through); this package gathers the names it
uses, so a plugin imports from one place that keeps its meaning within a major version
of :data:`PLUGIN_API`:

* the base classes an author subclasses: :class:`CausalityModule` (names the manager
  class and declares the flags the tools and the checker read) and
  :class:`CausalityManager` (the protocol: the hooks its filters call with each message
  sent, received and each control message, the state both filters share, the
  membership hooks, held/waiting_for/release, snapshot/restore); the filters that call
  those hooks, :class:`ModuleSendFilter` and :class:`ModuleReceiveFilter`, come with
  the module; for an extra filter, :class:`MessageFilter`, :class:`MessageFilterCreator`
  and :class:`FilterOption`;
* the errors: :class:`ProtocolViolation` (a peer sent what the protocol cannot accept)
  and :class:`CausalityError` (the local application asked what the module cannot do);
* the messages and their header operations (:func:`with_header_unchecked`,
  :func:`without_header_unchecked`, ``message.to(...)`` for a copy per destination);
* :mod:`~groupcomm.module_kit.codecs` (header readers, clock and matrix encodings and
  their renamers), :mod:`~groupcomm.module_kit.drain` (the buffer drain) and
  :mod:`~groupcomm.module_kit.control` (control messages, departures);
* :data:`PLUGIN_API` and :data:`hookimpl` for the plugin's hooks.

Like the modules it serves, this package does no I/O (no sockets, threads, clocks or
randomness): a module built on it runs unchanged in real processes, the simulator and
the model checker.
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
    "INT_ONLY",
    "PLUGIN_API",
    "PLUGIN_API_ATTRIBUTE",
    "CausalityError",
    "CausalityManager",
    "CausalityModule",
    "Clock",
    "ControlMessage",
    "FilterHost",
    "FilterOption",
    "GroupMessage",
    "HeaderValue",
    "Matrix",
    "MessageFilter",
    "MessageFilterCreator",
    "ModuleReceiveFilter",
    "ModuleSendFilter",
    "ProtocolViolation",
    "ReceivedMessage",
    "Rename",
    "SentMessage",
    "SystemMessage",
    "blocking",
    "control_message",
    "decode_clock",
    "decode_matrix",
    "drop_unsent_to",
    "encode_clock",
    "encode_matrix",
    "first_deliverable",
    "freeze_clock",
    "freeze_matrix",
    "gone_before_sending",
    "header",
    "hookimpl",
    "int_header",
    "rename_clock",
    "rename_matrix",
    "take_first_deliverable",
    "warn_held_on",
    "with_header_unchecked",
    "without_header_unchecked",
]
