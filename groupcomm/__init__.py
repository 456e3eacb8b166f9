"""groupcomm: causal message delivery for collaborative applications.

Applications talk through a :class:`Communicator`; every message passes a send pipeline
and a receive pipeline of filters; causality modules are pairs of filters sharing a
manager, chosen by name at start-up.

The names below are the public API. The message and filter model comes from
:mod:`groupcomm.core` (no sockets, no threads of its own); the communicator and its
errors come from :mod:`groupcomm.transport` and are imported on first use, so that the
simulator, the model checker and the filters can import this package without loading
ZeroMQ. docs/architecture.md maps the packages. :data:`PLUGIN_API` is the version of the
plugin API a plugin checks (docs/writing-a-module.md; the helpers a module author uses
are :mod:`groupcomm.module_kit`).
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
    "Communicator": "groupcomm.transport.communicator",
    "CommunicatorError": "groupcomm.transport.communicator",
    "JoinError": "groupcomm.transport.communicator",
    "MessageTooLarge": "groupcomm.transport.communicator",
    "SendQueueFull": "groupcomm.transport.communicator",
    # the communicator's option groups
    "Connection": "groupcomm.transport.config",
    "Delivery": "groupcomm.transport.config",
    "Limits": "groupcomm.transport.config",
    "Listeners": "groupcomm.transport.config",
    "Pipelines": "groupcomm.transport.config",
    "StateTransfer": "groupcomm.transport.config",
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
    "PLUGIN_API",
    "CausalityError",
    "Communicator",
    "CommunicatorError",
    "Connection",
    "CausalityManager",
    "CausalityModule",
    "ControlMessage",
    "Delivery",
    "FilterHost",
    "GroupMessage",
    "JoinError",
    "Limits",
    "Listeners",
    "MessageTooLarge",
    "MessageFilter",
    "MessageFilterCreator",
    "MessageForwarder",
    "MessageForwarderCreator",
    "MessageProcessor",
    "ModuleMismatchError",
    "ModuleReceiveFilter",
    "ModuleSendFilter",
    "Pipelines",
    "ProtocolNode",
    "ProtocolViolation",
    "ReceivedMessage",
    "ReceivedMessageFilterSelector",
    "SendMessageFilterSelector",
    "SendQueueFull",
    "SentMessage",
    "SessionMessageListener",
    "StateTransfer",
    "SystemMessage",
    "Tag",
    "UnknownModuleError",
    "UnknownPeerError",
    "get_module",
    "install",
]
