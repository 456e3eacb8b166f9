"""The worlds the session checker (:mod:`groupcomm.check.session_rules`) explores: the
clients as kept in a world, their applications, and what a client learns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from groupcomm.check import client_state
from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.session_messages import Snapshot
from groupcomm.protocol.inprocess import InProcessMember

__all__ = ["App", "Client", "Learner", "World"]


class App:
    """A client's application: the ids of the messages it has (delivered, its own, or
    in a snapshot it installed); it gives and installs snapshots of them."""

    def __init__(self) -> None:
        self.seen: frozenset[str] = frozenset()
        self.own: tuple[str, ...] = ()
        #: (newcomer, answerer, ids) of the snapshot installed, or None
        self.installed: tuple[str, str, frozenset[str]] | None = None
        self.member: InProcessMember | None = None
        #: what the step handed it (message, had it already)
        self.handed: list[tuple[ReceivedMessage, bool]] = []

    def state(self) -> tuple:
        return (self.seen, self.own, self.installed)

    def restore(self, state: tuple) -> None:
        self.seen, self.own, self.installed = state
        self.handed = []

    def hand(self, message: ReceivedMessage) -> None:
        app_id = message.app_message_id
        self.handed.append((message, app_id in self.seen))
        self.seen |= {app_id}

    def provide(self) -> Snapshot:
        assert self.member is not None
        return Snapshot((self.member.member, self.seen), reflects=self.own)

    def install(self, state: tuple[str, frozenset[str]]) -> None:
        assert self.member is not None
        answerer, ids = state
        self.installed = (self.member.member, answerer, ids)
        self.seen |= ids


@dataclass
class Client:
    """One start of a client process (a connection), as kept in a world."""

    name: str
    conn: str
    state: tuple            # client_state.capture of its member
    app: tuple              # App.state
    view: tuple             # see SessionCheck._view
    alive: bool = True
    sent: int = 0
    #: (server epoch, membership change) in the order this client learned them
    learned: tuple[tuple[int, str], ...] = ()
    #: its part of the state key, kept until a step changes it
    frozen: Any = None

    def key(self, unkeyed: frozenset[str] = frozenset()) -> Any:
        if self.frozen is None:
            self.frozen = (self.conn, self.alive, self.sent, self.learned, self.app,
                           client_state.state_key(self.state, unkeyed))
        return self.frozen

    @property
    def member(self) -> str:
        return self.view[1]

    @property
    def phase(self) -> str:
        return self.view[0]


@dataclass
class World:
    now: float = 0.0
    ticks: int = 0
    epoch: int = 0
    server_restarts: int = 0
    server: tuple = ()   # (registry, codec counter, replay window) of the server
    server_key: Any = None
    clients: dict[str, Client] = field(default_factory=dict)   # conn -> client
    starts: dict[str, int] = field(default_factory=dict)        # name -> starts so far
    left: frozenset[str] = frozenset()                          # names that left
    crashed: frozenset[str] = frozenset()                       # names that crashed
    up: dict[str, tuple[bytes, ...]] = field(default_factory=dict)   # conn -> frames
    down: dict[str, tuple] = field(default_factory=dict)        # conn -> (delivery, epoch)
    direct: frozenset = frozenset()                             # (conn, frame)
    #: "message id@member" -> (sender, destination, app id, joins the sender knew)
    frames: dict[str, tuple] = field(default_factory=dict)
    delivered: frozenset[tuple[str, str]] = frozenset()         # (message id, member)
    excused: frozenset[tuple[str, str]] = frozenset()           # lost in a restart
    gone: frozenset[str] = frozenset()          # member ids the server removed


class Learner:
    """A client's session listener: tells the checker each membership change it
    learns (its node hears of it)."""

    def __init__(self, changes: list[tuple[str, str]], conn: str) -> None:
        self.changes = changes
        self.conn = conn

    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: tuple[str, ...]) -> None:
        # the member list is in join order: whoever precedes the subject joined before it
        for user in (*all_users, client_name):
            self.changes.append((self.conn, f"joined {user}"))

    def client_left(self, client_name: str, application_name: str) -> None:
        self.changes.append((self.conn, f"left {client_name}"))
