"""The properties the session checker (:mod:`groupcomm.check.session_rules`) judges, and
its breadth-first search. Each property is named and explained in docs/check_results.md
(the session protocol): *order*, *unique-id*, *relay-order*, *duplicate* and *exception*
on every step; *views*, *lost*, *cut* and *stuck* in every quiescent state in which each
running client is settled (a member of the current server, or out for good).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from groupcomm.check.session_config import SessionCheckConfig, SessionCheckResult
from groupcomm.check.session_world import App, Client, World
from groupcomm.protocol.client_actions import APPLICATION, SESSION
from groupcomm.protocol.inprocess import InProcessMember

__all__ = ["Found", "SessionProperties", "search"]


class Found(Exception):
    """A property failed: its name and what happened (read as ``prop: detail``)."""

    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")


class SessionProperties:
    """The checks of :class:`~groupcomm.check.session_rules.SessionCheck` (a mixin)."""

    _epoch: int
    _owned: set[str]
    #: ``conn``'s member set back to its state in ``world``; what a frame carries, said
    _live: Callable[[World, str], InProcessMember]
    _describe: Callable[[bytes], str]

    # -- on every step ------------------------------------------------------------------
    def _learn(self, client: Client, change: str) -> None:
        """Note a membership change ``client`` learned from a notice of the current
        server (a restarted server orders its own notices, not the old one's)."""
        learned = (self._epoch, change)
        if learned in client.learned:
            return
        kind, _, member = change.partition(" ")
        if kind == "joined" and any(c == f"left {member}" for _, c in client.learned):
            raise Found("unique-id", f"{client.conn} learned that {member} left, then that "
                        f"{member} joined: the id of a membership that ended is given again")
        client.learned = (*client.learned, learned)
        client.frozen = None

    def check_relay_order(self, member: InProcessMember, sender: str, frame: bytes) -> None:
        membership = member.protocol.membership
        if sender in member.node.member_set or membership.is_stale(sender) \
                or sender in membership.departing:
            return
        raise Found("relay-order", f"{self._describe(frame)}, relayed by the server, reached "
                    f"{member.member} before it knew {sender} as a member")

    def _judge_handed(self, world: World, client: Client, app: App) -> None:
        for message, had in app.handed:
            if had:
                raise Found("duplicate", f"{message.receiver} was handed "
                            f"{message.message_id}, which its application already had")
            world.delivered |= {(message.message_id, message.receiver)}
        app.handed = []

    def check_order(self, world: World) -> None:
        clients = list(world.clients.values())
        for i, a in enumerate(clients):
            for b in clients[i + 1:]:
                common = [c for c in a.learned if c in b.learned]
                other = [c for c in b.learned if c in a.learned]
                if common != other:
                    raise Found("order", f"{a.conn} learned {_changes(common)}; {b.conn} "
                                f"learned {_changes(other)}")

    # -- in final states ----------------------------------------------------------------
    def settled(self, world: World) -> bool:
        members = set(world.server[0].members_of(APPLICATION, SESSION))
        for client in world.clients.values():
            if not client.alive or client.phase in ("left", "failed"):
                continue
            if client.phase != "joined" or client.member not in members:
                return False
        return True

    def check_final(self, world: World) -> None:
        self._owned = set()  # between steps: every member is set back
        members = world.server[0].members_of(APPLICATION, SESSION)
        live: dict[str, Client] = {}
        for client in world.clients.values():
            if not client.alive or client.phase != "joined":
                continue
            live[client.member] = client
            member = self._live(world, client.conn)
            view = sorted(member.node.member_set)
            if view != sorted(members):
                raise Found("views", f"{client.member} sees {', '.join(view)}; the server "
                            f"lists {', '.join(members)}")
            if not member.state_done:
                gate = member.protocol.transfer.gate
                asked = gate.asked if gate is not None else None
                raise Found("stuck", f"{client.member} never gets the application state "
                            f"(it waits for {asked or 'nobody'})")
        self._check_lost(world, live)
        self._check_cuts(world, live)

    def _excused(self, world: World, mid: str, sender: str, dest: str) -> bool:
        graceful = {c.member for c in world.clients.values() if c.name in world.left}
        return ((mid, dest) in world.excused or dest in world.gone
                or (sender in world.gone and sender not in graceful))

    def _check_lost(self, world: World, live: dict[str, Client]) -> None:
        for fid, (sender, dest, app_id, _) in sorted(world.frames.items()):
            mid = fid.partition("@")[0]
            client = live.get(dest)
            if client is None or (mid, dest) in world.delivered or app_id in client.app[0]:
                continue
            if self._excused(world, mid, sender, dest):
                continue
            member = self._live(world, client.conn)
            waits = member.node.waiting_for().get(mid, [])
            if waits and all(w in world.gone or any((m, dest) in world.excused
                                                    for m in _sent_by(world, w))
                             for w in waits):
                continue  # held for a message that was lost with its sender or server
            raise Found("lost", f"{mid} from {sender} never reached {dest}")

    def _check_cuts(self, world: World, live: dict[str, Client]) -> None:
        for client in live.values():
            installed = client.app[2]
            if installed is None:
                continue
            newcomer, answerer, ids = installed
            for fid, (sender, dest, app_id, known) in sorted(world.frames.items()):
                mid = fid.partition("@")[0]
                if dest != answerer or newcomer in known or app_id in ids:
                    continue
                if self._excused(world, mid, sender, dest):
                    continue
                raise Found("cut", f"{newcomer}'s snapshot from {answerer} misses {mid}, "
                            f"which {sender} sent {answerer} before it saw {newcomer} join")


def _sent_by(world: World, member: str) -> list[str]:
    return [fid.partition("@")[0] for fid, entry in world.frames.items() if entry[0] == member]


def _changes(learned: list[tuple[int, str]]) -> str:
    return ", ".join(f"{change} (server {epoch + 1})" for epoch, change in learned)


def search(checker: Any, config: SessionCheckConfig,
           progress: Callable[[int, int], None] | None) -> SessionCheckResult:
    """Breadth first from the initial world; the first violation has a shortest path."""
    start = checker.initial()
    seen: dict[Any, tuple[Any, str] | None] = {checker.key(start): None}
    frontier: deque[tuple[World, Any, int]] = deque([(start, checker.key(start), 0)])
    transitions = finals = unsettled = depth = 0
    next_report = 10_000

    def result(verdict: str, violation: str | None = None,
               steps: list[str] | None = None) -> SessionCheckResult:
        return SessionCheckResult(config, verdict, len(seen), transitions, depth, finals,
                                  unsettled, violation, steps or [])

    while frontier:
        world, key, level = frontier.popleft()
        depth = max(depth, level)
        actions = checker.enabled(world)
        if not actions:  # quiescent: nothing can happen but heartbeats that change nothing
            if checker.settled(world):
                finals += 1
                try:
                    checker.check_final(world)
                except Found as found:
                    return result("violation", str(found), _path(
                        seen, key, "(nothing more happens but heartbeats)"))
            else:
                unsettled += 1
        for action in actions:
            transitions += 1
            try:
                nxt, text = checker.step(world, action)
                checker.check_order(nxt)
            except Found as found:
                return result("violation", str(found), _path(
                    seen, key, " ".join(str(a) for a in action[:2]) + "  <- breaks it"))
            nxt_key = checker.key(nxt)
            if nxt_key in seen:
                continue
            seen[nxt_key] = (key, text)
            if len(seen) > config.max_states:
                return result("incomplete", f"stopped at {config.max_states:,} states")
            frontier.append((nxt, nxt_key, level + 1))
        if progress is not None and len(seen) >= next_report:
            next_report += 10_000
            progress(len(seen), depth)
    return result("ok")


def _path(seen: dict, key: Any, last: str) -> list[str]:
    """The steps from the initial world to the world of ``key``, then ``last``."""
    steps: list[str] = []
    while seen.get(key) is not None:
        key, text = seen[key]
        steps.append(text)
    return [*reversed(steps), last]
