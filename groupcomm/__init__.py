"""groupcomm: causal message delivery for collaborative applications.

Applications talk through a :class:`~groupcomm.transport.communicator.Communicator`; every message
passes a send pipeline and a receive pipeline of filters; causality modules are pairs
of filters sharing a manager, chosen by name at start-up.
"""

from groupcomm.core.causality import (
    CausalityError,
    CausalityManager,
    CausalityModule,
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

__all__ = [
    "CausalityError",
    "CausalityManager",
    "CausalityModule",
    "ControlMessage",
    "FilterHost",
    "GroupMessage",
    "MessageFilter",
    "MessageFilterCreator",
    "MessageForwarder",
    "MessageForwarderCreator",
    "MessageProcessor",
    "ModuleReceiveFilter",
    "ModuleSendFilter",
    "ProtocolNode",
    "ProtocolViolation",
    "ReceivedMessage",
    "ReceivedMessageFilterSelector",
    "SendMessageFilterSelector",
    "SentMessage",
    "SessionMessageListener",
    "SystemMessage",
    "Tag",
    "UnknownModuleError",
    "UnknownPeerError",
    "get_module",
    "install",
]
