"""What a client's session actions do to its protocol node, and a session server with
its clients in one process, both without I/O.

:func:`apply_to_node` is the one mapping from :class:`~groupcomm.core.membership.Membership`'s
actions to :class:`~groupcomm.core.node.ProtocolNode` calls (a join, a departure,
arrivals); the client's protocol object (:mod:`groupcomm.protocol.client`) adds
statistics, state transfer and the host's actions around it.

:class:`InProcessSession` is for hosts that run every process in one Python process and
carry the session notices themselves (the in-process network of
:mod:`groupcomm.tools.localnet`, the simulator's :class:`~groupcomm.sim.stack.RealStack`):
a :class:`~groupcomm.protocol.registry.SessionRegistry` decides who is told of a join or
a leave, in which order, with which member list and incarnation, and each process's
:class:`Membership` processes its notices as a networked client does. The host chooses
when each notice is processed (at once, or later, as a server's notices reach members at
different times) and keeps one FIFO order per process, as a server's connection does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupcomm.core.membership import (
    Action,
    Arrive,
    Incarnated,
    MemberJoined,
    MemberLeft,
    Membership,
    check_client_name,
)
from groupcomm.core.node import ProtocolNode
from groupcomm.protocol.registry import Join, Leave, Notify, SessionRegistry

__all__ = ["APPLICATION", "SESSION", "InProcessSession", "Notice", "apply_to_node",
           "carry_out", "notice_of"]

#: the application and session in-process hosts use (ProtocolNode's defaults)
APPLICATION = "app"
SESSION = "session"

#: a session notice as a client receives it: ``op`` plus the notice's fields
Notice = dict[str, Any]


def notice_of(action: Notify) -> Notice:
    """The notice a :class:`Notify` action sends, as the client reads it."""
    return {"op": action.op, **action.fields}


def apply_to_node(node: ProtocolNode, action: Action) -> bool:
    """Carry out ``action`` on ``node`` if it concerns the node alone: a join
    (``client_joined``), a departure (``client_left``) or arrivals (queued with
    ``arrived_many``; the host drains the node). Returns False for any other action,
    which is the host's to carry out."""
    if isinstance(action, MemberJoined):
        node.client_joined(action.member, is_new_session=action.is_new_session,
                           is_new_application=action.is_new_application,
                           all_users=action.all_users)
    elif isinstance(action, MemberLeft):
        node.client_left(action.member)
    elif isinstance(action, Arrive):
        node.arrived_many(list(action.messages))
    else:
        return False
    return True


def carry_out(node: ProtocolNode, actions: Iterable[Action]) -> list[Action]:
    """Carry out ``actions`` of a process whose node exists under its member id (an
    in-process host makes the node once the welcome gave the incarnation, so
    :class:`Incarnated` is just its own join); returns the actions that are not the
    node's (``JoinDone``, ``LeftSession``, ...), in order."""
    rest: list[Action] = []
    for action in actions:
        if isinstance(action, Incarnated):
            if action.member != node.name:
                raise ValueError(f"{action.member} was admitted, but its node is {node.name}")
            apply_to_node(node, action.joined)
        elif not apply_to_node(node, action):
            rest.append(action)
    return rest


class InProcessSession:
    """One session's server (a :class:`SessionRegistry`) and clients (a
    :class:`Membership` each), for a host that carries the notices itself.

    A client's connection is its process name. :meth:`join` and :meth:`leave` return the
    notices the registry sends to the *other* processes (or, for a join, to everyone,
    the newcomer included); the host hands each to :meth:`on_notice` when that process
    processes it, and carries out the actions with :func:`carry_out`.
    """

    def __init__(self, *, now: float, application: str = APPLICATION,
                 session: str = SESSION) -> None:
        self.application = application
        self.session = session
        self.registry = SessionRegistry(server_id="in-process", now=now)
        #: process name (the connection) -> its client side of the session protocol
        self.clients: dict[str, Membership] = {}

    def member_of(self, name: str) -> str:
        """The member id of process ``name`` (``carol``, ``carol~2``, ...)."""
        return self.clients[name].member

    def members(self) -> list[str]:
        """The member ids of the session, in join order."""
        return self.registry.members_of(self.application, self.session)

    def join(self, name: str, now: float) -> tuple[str, list[tuple[str, Notice]]]:
        """Process ``name`` joins: returns its member id (the registry's welcome gave its
        incarnation) and the ``joined`` notices, as (process, notice), in the registry's
        order. Raises ``ValueError`` when the name is not a valid client name or the
        registry does not admit it at once (a member holds the name)."""
        check_client_name(name)
        # a process that joins is a new client: a name that comes back is the registry's
        # next incarnation of it (the process asks for none, as a restarted client)
        membership = Membership(name, heartbeat_interval=1.0, now=now)
        actions = self.registry.handle(Join(name, name, self.application, self.session, now))
        notices = [(a.conn, notice_of(a)) for a in actions if isinstance(a, Notify)]
        if not notices or notices[0][0] != name or notices[0][1]["op"] != "welcome":
            raise ValueError(f"{name!r} is not admitted to the session: "
                             f"{notices or 'it is a member already'}")
        membership.on_notice(notices[0][1], now)
        self.clients[name] = membership
        return membership.member, notices[1:]

    def leave(self, name: str, now: float) -> list[tuple[str, Notice]]:
        """Process ``name`` leaves gracefully (it pushed no frames directly): returns the
        ``left`` notices to the other processes, in the registry's order. Raises
        ``ValueError`` when it is not a member."""
        if name not in self.clients:
            raise ValueError(f"{name!r} is not a member of the session")
        membership = self.clients.pop(name)
        membership.leave({})
        actions = self.registry.handle(Leave(name, name, self.application, self.session, now))
        notices = []
        for action in actions:
            if not isinstance(action, Notify):
                continue
            if action.conn == name:
                membership.on_notice(notice_of(action), now)  # its leave is confirmed
            else:
                notices.append((action.conn, notice_of(action)))
        return notices

    def on_notice(self, name: str, notice: Notice, now: float) -> list[Action]:
        """Process ``name`` processes ``notice``; returns its Membership's actions."""
        return self.clients[name].on_notice(notice, now)
