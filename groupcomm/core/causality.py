"""Causality modules: a manager class and declared flags; the filters and factories are
the base classes' (docs/writing-a-module.md).

Per communicator a :class:`CausalityModule` makes one :class:`CausalityManager` (a
session listener holding the protocol state, found through ``host.shared`` so that
communicators of one process share nothing) and the two filters that hand it messages,
:class:`ModuleSendFilter` and :class:`ModuleReceiveFilter`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

from groupcomm.core.filtering import (
    FilterHost,
    MessageFilter,
    MessageFilterCreator,
    MessageProcessor,
    ReceivedMessageFilterSelector,
    SendMessageFilterSelector,
)
from groupcomm.core.messages import GroupMessage, ReceivedMessage, SentMessage, SystemMessage


class CausalityError(Exception):
    """A causality module refused a request (a local mistake, e.g. unicast via vector)."""


class ProtocolViolation(Exception):
    """A peer sent something the protocol cannot accept (a remote mistake)."""


class CausalityManager(ABC):
    """Shared state of one module at one communicator; listens to joins and leaves. It
    passes messages on with :attr:`send_downstream` and :attr:`deliver_upstream`, at
    once or later (held), and keeps its state in plain values for :meth:`snapshot`."""

    #: The protocol of this module's control messages: the receive filter hands those to
    #: :meth:`on_control`; "" when it has none (every control message passes on).
    protocol: ClassVar[str] = ""

    def __init__(self, host: FilterHost) -> None:
        self.host = host
        self.members: list[str] = []
        #: Where control messages go: learnt from the session listener calls.
        self.application_name = "app"
        self.session_name = "session"
        #: Numbers this manager's control messages (their ids must be unique in a run).
        self.control_count = 0
        #: Counters a test or an operator can read (duplicates dropped, ...).
        self.stats: dict[str, int] = {}
        #: Hand a message to the stage after the send filter (towards the network) or
        #: after the receive filter (towards the application): the module's filters set
        #: them to that stage's entry when the pipeline is built (one call less a message)
        self.send_downstream: Callable[[SentMessage], None] = _no_pipeline
        self.deliver_upstream: Callable[[ReceivedMessage], None] = _no_pipeline

    # -- what the module's filters call ---------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """An application message to send: pass it on (stamped, or a copy per
        destination) with :attr:`send_downstream`, or hold it. By default: unchanged."""
        self.send_downstream(message)

    def on_receive(self, message: ReceivedMessage) -> None:
        """An application message arrived: deliver it with :attr:`deliver_upstream`
        (without the module's headers), buffer it, or drop it as a duplicate; raise
        :class:`ProtocolViolation` for metadata it cannot accept. By default: delivered."""
        self.deliver_upstream(message)

    def on_control(self, message: ReceivedMessage) -> None:
        """Consume one of this module's control messages (never delivered to the app).
        By default there are none: raises :class:`ProtocolViolation`."""
        raise ProtocolViolation(
            f"{self.protocol}: unknown control message "
            f"{getattr(message.user_message, 'kind', message.user_message)!r} from "
            f"{message.sender}"
        )

    # -- session listener -------------------------------------------------------------
    def client_joined(
        self, client_name: str, application_name: str, session_name: str,
        is_new_session: bool, is_new_application: bool, all_users: Sequence[str],
    ) -> None:
        """Track membership in join order (the same order at every member)."""
        self.application_name = application_name
        self.session_name = session_name
        for user in all_users:
            if user not in self.members:
                self.members.append(user)
                self.member_added(user)

    def client_left(self, client_name: str, application_name: str) -> None:
        """Forget a member; what still waits on it stays visible in :meth:`held`."""
        if client_name in self.members:
            self.member_removed(client_name)
            self.members.remove(client_name)

    def member_added(self, name: str) -> None:  # noqa: B027 - optional hook
        """Hook: a member joined (extend clocks, matrices, ...)."""

    def member_removed(self, name: str) -> None:  # noqa: B027 - optional hook
        """Hook: a member left."""

    # -- introspection ----------------------------------------------------------------
    @abstractmethod
    def held(self) -> list[GroupMessage]:
        """Messages this module holds (buffered for delivery, or unsent), oldest first."""

    def holds_sends(self) -> bool:
        """True while this module holds back an unsent message of this member's (asked
        every 10 ms while flushing: sender-side modules answer without listing them)."""
        return any(isinstance(m, SentMessage) for m in self.held())

    def waiting_for(self) -> dict[str, list[str]]:
        """Held message id -> the members it waits on (empty list: waits on nothing
        named, e.g. an unsent message behind an earlier one). For operators and tests."""
        return {m.message_id: [] for m in self.held()}

    def release_waiting_on(self, name: str) -> list[str]:
        """Give up waiting for messages ``name`` will never send (it left or crashed):
        deliver, in causal order as far as it is known, what waits only on it; the
        released ids. Unsafe in general (a message of ``name`` still in flight would then
        arrive out of order), so the application decides, never the module."""
        return []

    def count(self, counter: str, by: int = 1) -> None:
        """Increase the named counter in :attr:`stats`."""
        self.stats[counter] = self.stats.get(counter, 0) + by

    @abstractmethod
    def snapshot(self) -> Hashable:
        """A canonical, hashable value of the whole protocol state (incl. held messages)."""

    @abstractmethod
    def restore(self, snapshot: Hashable) -> None:
        """Set the state back to ``snapshot`` (as returned by :meth:`snapshot`)."""


def _no_pipeline(message: GroupMessage) -> None:
    raise RuntimeError(f"{message.message_id}: the module's pipeline is not built yet")


class ModuleSendFilter(MessageFilter[SentMessage]):
    """A module's send filter: system messages pass on, application messages go to the
    manager's :meth:`~CausalityManager.on_send`."""

    def __init__(self, manager: CausalityManager) -> None:
        super().__init__()
        self.manager = manager
        # bound once: this runs for every message sent
        self._on_send = manager.on_send

    def set_message_processor(self, processor: MessageProcessor[SentMessage]) -> None:
        super().set_message_processor(processor)
        self.manager.send_downstream = processor.process_message
        if type(self.manager).on_send is CausalityManager.on_send:
            self._on_send = processor.process_message  # the default hook, without its call

    def filter_message(self, message: SentMessage) -> None:
        # is_user_message() spelled out: this runs for every message sent
        if isinstance(message.user_message, SystemMessage):
            self.forward(message)
            return
        self._on_send(message)


class ModuleReceiveFilter(MessageFilter[ReceivedMessage]):
    """A module's receive filter: application messages go to the manager's
    :meth:`~CausalityManager.on_receive`, control messages of its
    :attr:`~CausalityManager.protocol` to :meth:`~CausalityManager.on_control`, others
    pass on unchanged."""

    def __init__(self, manager: CausalityManager) -> None:
        super().__init__()
        self.manager = manager
        self.protocol = manager.protocol
        # bound once: this runs for every message that arrives
        self._on_receive = manager.on_receive
        self._on_control = manager.on_control

    def set_message_processor(self, processor: MessageProcessor[ReceivedMessage]) -> None:
        super().set_message_processor(processor)
        self.manager.deliver_upstream = processor.process_message
        if type(self.manager).on_receive is CausalityManager.on_receive:
            self._on_receive = processor.process_message  # the default hook, without its call

    def filter_message(self, message: ReceivedMessage) -> None:
        if not isinstance(message.user_message, SystemMessage):  # is_user_message(), inlined
            self._on_receive(message)
        elif self.protocol and message.is_control_for(self.protocol):
            self._on_control(message)
        else:
            self.forward(message)


class CausalityModule:
    """A causality module: its manager class and the flags the tools read. Makes one
    manager and its two filters per communicator."""

    # What each attribute declares: docs/writing-a-module.md, "The module class".
    name: ClassVar[str]
    manager_class: ClassVar[type[CausalityManager]]
    description: ClassVar[str] = ""
    #: only sends to every other member: :meth:`check_destinations` refuses the others
    broadcast_only: ClassVar[bool] = False
    #: a send to several members is that many unicasts, each its own send event
    unicast_events: ClassVar[bool] = False
    #: a sender waits for acknowledgements before it sends on (``groupcomm bench``
    #: measures the round trip per message this bounds a sender's rate by)
    acknowledged_sends: ClassVar[bool] = False
    known_bad: ClassVar[bool] = False
    #: ``causal``, ``fifo`` or ``arrival``, held to by the conformance suite
    delivery_order: ClassVar[str] = "causal"
    #: header -> how its value holds process names, for ``check --symmetry``; None: not
    #: shown safe to rename. Read on the exact class (a subclass may look at its own
    #: name), like :attr:`commuting_controls`
    symmetry_headers: ClassVar[Mapping[str, Any] | None] = None
    #: control kinds whose arrival commutes with every other step (``check --por``)
    commuting_controls: ClassVar[frozenset[str]] = frozenset()

    def create_manager(self, host: FilterHost) -> CausalityManager:
        """A fresh manager for ``host`` (an instance of :attr:`manager_class`)."""
        return self.manager_class(host)

    def send_creator(self) -> MessageFilterCreator[SentMessage]:
        """The factory to put in :data:`SendMessageFilterSelector`."""
        return _ModuleFilterCreator(self, "send")

    def receive_creator(self) -> MessageFilterCreator[ReceivedMessage]:
        """The factory to put in :data:`ReceivedMessageFilterSelector`."""
        return _ModuleFilterCreator(self, "receive")

    def install(self) -> None:
        """Set both selectors to this module (one call, before creating communicators)."""
        SendMessageFilterSelector.set_message_filter_creator(self.send_creator())
        ReceivedMessageFilterSelector.set_message_filter_creator(self.receive_creator())

    def check_destinations(
        self, sender: str, destinations: Sequence[str], members: Sequence[str]
    ) -> None:
        """Raise :class:`CausalityError` when the module cannot carry this send: with
        :attr:`broadcast_only`, one that leaves out another member. ``destinations`` are
        distinct members or ``sender`` (the node checks that before it asks)."""
        if not self.broadcast_only:
            return
        # destinations are distinct members or the sender: they leave no one out exactly
        # when they count every other member (every send)
        if len(destinations) - (sender in destinations) == len(members) - (sender in members):
            return
        missing = set(members).difference(destinations)
        missing.discard(sender)
        if missing:
            raise CausalityError(
                f"the {self.name} module carries broadcasts only (to_others / to_all); this "
                f"send leaves out {', '.join(sorted(missing))}, whose missing message would "
                "block every later one of yours forever. For unicast or multicast causal "
                "order use matrix, mfss or cykas"
            )


class _ModuleFilterCreator(MessageFilterCreator[Any]):
    """One side of a module; both sides of one communicator share its manager."""

    def __init__(self, module: CausalityModule, side: str) -> None:
        self.module = module
        self.side = side
        self.description = module.description

    def get_message_filter(self, host: FilterHost) -> MessageFilter[Any]:
        key = f"causality:{self.module.name}"
        manager = host.shared.get(key)
        if manager is None:
            manager = host.shared[key] = self.module.create_manager(host)
            host.add_session_listener(manager)
        return (ModuleSendFilter if self.side == "send" else ModuleReceiveFilter)(manager)


def module_of(creator: MessageFilterCreator[Any]) -> CausalityModule | None:
    """The causality module behind a selector's factory, if it is one."""
    return creator.module if isinstance(creator, _ModuleFilterCreator) else None


class ModuleMismatchError(ValueError):
    """The send and receive pipelines do not hold the same causality module (one side
    replaced, for example through a selector set after ``install``)."""


def one_module(send_creators: Sequence[MessageFilterCreator[SentMessage]],
                receive_creators: Sequence[MessageFilterCreator[ReceivedMessage]],
                ) -> CausalityModule | None:
    """The causality module both pipelines hold, or None when neither holds one.

    Raises :class:`ModuleMismatchError` when only one side holds it, or each side
    another: a module's receive filter expects what its own send filter adds, so such a
    node would drop every message it is sent.
    """
    send = next((m for m in map(module_of, send_creators) if m is not None), None)
    receive = next((m for m in map(module_of, receive_creators) if m is not None), None)
    if send is None and receive is None:
        return None
    if send is not None and receive is not None and send.name == receive.name:
        return send
    held = (f"the send side holds {repr(send.name) if send else 'no causality module'} and the "
            f"receive side {repr(receive.name) if receive else 'none'}")
    raise ModuleMismatchError(
        f"{held}: a causality module needs both of its filters (one was probably replaced "
        "through a selector after install()). To add a filter beside a module, give the "
        "communicator pipelines=Pipelines(extra_send=[...], extra_receive=[...]) or "
        "register it through a plugin (docs/modules.md)"
    )
