"""groupcomm: causal message delivery for collaborative applications.

The names below are the public API (docs/programming.md; docs/architecture.md maps the
packages). The communicator and its option groups live in :mod:`groupcomm.transport`
and are imported on first use, so that the simulator, the model checker and the filters
import this package without loading ZeroMQ.
"""

from typing import Any

from groupcomm.core.causality import (
    CausalityError,
    CausalityManager,
    CausalityModule,
    ModuleMismatchError,
    ModuleReceiveFilter,
    ModuleSendFilter,
    ProtocolViolation,
)
from groupcomm.core.filtering import (
    FilterHost,
    MessageFilter,
    MessageFilterCreator,
    MessageForwarder,
    MessageForwarderCreator,
    MessageProcessor,
    ReceivedMessageFilterSelector,
    SendMessageFilterSelector,
    SessionMessageListener,
)
from groupcomm.core.hookspecs import PLUGIN_API
from groupcomm.core.messages import (
    ControlMessage,
    GroupMessage,
    ReceivedMessage,
    SentMessage,
    SystemMessage,
    Tag,
)
from groupcomm.core.node import ProtocolNode, UnknownPeerError
from groupcomm.core.registry import UnknownModuleError, get_module, install

#: public names that live in the transport, loaded on first access (PEP 562)
_TRANSPORT = {
    **dict.fromkeys(("Communicator", "CommunicatorError", "JoinError", "MessageTooLarge",
                     "SendQueueFull"), "groupcomm.transport.communicator"),
    # the communicator's option groups
    **dict.fromkeys(("Connection", "Delivery", "Limits", "Listeners", "Pipelines",
                     "StateTransfer"), "groupcomm.transport.config"),
}


def __getattr__(name: str) -> Any:
    module = _TRANSPORT.get(name)
    if module is None:
        raise AttributeError(f"module 'groupcomm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "PLUGIN_API", "CausalityError", "Communicator", "CommunicatorError", "Connection",
    "CausalityManager", "CausalityModule", "ControlMessage", "Delivery", "FilterHost",
    "GroupMessage", "JoinError", "Limits", "Listeners", "MessageTooLarge", "MessageFilter",
    "MessageFilterCreator", "MessageForwarder", "MessageForwarderCreator", "MessageProcessor",
    "ModuleMismatchError", "ModuleReceiveFilter", "ModuleSendFilter", "Pipelines", "ProtocolNode",
    "ProtocolViolation", "ReceivedMessage", "ReceivedMessageFilterSelector",
    "SendMessageFilterSelector", "SendQueueFull", "SentMessage", "SessionMessageListener",
    "StateTransfer", "SystemMessage", "Tag", "UnknownModuleError", "UnknownPeerError",
    "get_module", "install",
]
