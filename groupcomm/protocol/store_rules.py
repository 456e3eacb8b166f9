"""The session store's rules, without I/O (docs/storage.md): which relayed messages are
kept, when a member is asked for a fresh snapshot, what a snapshot covers, what a
member joining gets (the stored state, a new generation), which joins are refused. The
session server (:mod:`groupcomm.transport.store_host`) feeds it and carries out its
answers against a backend; randomness (new generation ids) comes from its host.

Why the server's arrival order is a causal order: with relayed routing every message
reaches its receivers through the server, which forwards in arrival order, so a
message sent after another was delivered arrived at the server after it. Replaying the
kept messages in arrival order after the snapshot therefore never delivers an effect
before its cause. Direct routing would bypass the server, so a store refuses it.

Why a session falls "behind": while the store fails, the server goes on relaying, and
what it relays then is in no snapshot. When the store works again, every session is
behind until a member holding its whole state gives a snapshot (asked at once); until
that snapshot is kept, the store hands nothing of it to a newcomer, which would get a
state with a hole.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

__all__ = ["AskSnapshot", "Candidate", "JoinVerdict", "KeptSession", "StorePolicy",
           "StoreRules"]

#: a session with stored messages asks for a snapshot after this many...
DEFAULT_SNAPSHOT_EVERY = 500
#: ...or this many seconds after its last snapshot
DEFAULT_SNAPSHOT_SECONDS = 30.0
#: seconds a member has to answer a snapshot request before the next is asked
SNAPSHOT_ANSWER_TIMEOUT = 10.0
#: copies of a send split into unicasts waiting for the rest of their destinations
MAX_PENDING_GROUPS = 4096


@dataclass(frozen=True)
class StorePolicy:
    """When the store asks for a snapshot: every ``every_messages`` kept messages, or
    ``every_seconds`` after the last one when messages were kept since."""

    every_messages: int = DEFAULT_SNAPSHOT_EVERY
    every_seconds: float = DEFAULT_SNAPSHOT_SECONDS
    answer_timeout: float = SNAPSHOT_ANSWER_TIMEOUT

    def __post_init__(self) -> None:
        if self.every_messages < 1:
            raise ValueError(f"snapshot every {self.every_messages} messages: must be >= 1")
        if not self.every_seconds > 0:
            raise ValueError(f"snapshot every {self.every_seconds} s: must be > 0")


@dataclass(frozen=True)
class Candidate:
    """A relayed application message as the server decoded it (payload untouched):
    ``message_id`` its application-level id, ``dests`` this copy's destinations,
    ``grouped``: a copy of a send split into unicasts."""

    message_id: str
    sender: str
    dests: tuple[str, ...]
    fmt: int
    payload: bytes
    vc: tuple[tuple[str, int], ...]
    grouped: bool = False


@dataclass
class KeptSession:
    """What the rules remember of one stored session."""

    generation: str
    #: messages kept after the snapshot
    since_snapshot: int = 0
    has_snapshot: bool = False
    #: found in the store at the start: a member back with the state is asked for a
    #: snapshot at once (what was relayed while no server, or no store, kept it)
    refresh: bool = False
    #: when the last snapshot was kept (or the session started to be kept)
    snapshot_at: float = 0.0
    #: the member asked for a snapshot now, the request's number, when it is due
    asked: str | None = None
    request: int = 0
    due: float = 0.0
    #: members that had no snapshot to give for the current round
    declined: set[str] = field(default_factory=set)
    #: members holding the session's state: they got it (from the store or a member),
    #: came back with it, or joined when there was nothing to get. Only they are asked
    #: for snapshots, and only theirs replace what is kept.
    holders: set[str] = field(default_factory=set)
    #: application id -> destinations seen so far, for copies of split sends
    groups: OrderedDict[str, set[str]] = field(default_factory=OrderedDict)
    #: what is kept misses messages relayed while the store failed: nothing of it goes
    #: to a newcomer until a holder's snapshot is kept
    behind: bool = False
    #: the backend has the session (False: made while the store failed, to be created
    #: when it works again)
    created: bool = True

    @property
    def has_content(self) -> bool:
        # a session behind had messages the store missed: a member joining it when no
        # holder is present does not hold its state
        return self.has_snapshot or self.since_snapshot > 0 or self.behind


@dataclass(frozen=True)
class JoinVerdict:
    """What a member admitted to a kept session gets: the ``generation`` (``create``:
    the session is new to the store, keep it under that id), whether the stored state
    is sent to it (``send_state``), and whether its state is from another generation
    (``changed``: it must not merge what it has)."""

    generation: str
    create: bool = False
    send_state: bool = False
    changed: bool = False
    #: the session is behind and no member present holds its state: it wants state
    #: and gets none (told why), rather than a state with a hole
    refused: bool = False


@dataclass(frozen=True)
class AskSnapshot:
    """Ask ``member`` (its connection, for the host) for a snapshot, numbered ``request``."""

    application: str
    session: str
    member: str
    request: int


class StoreRules:
    """``new_generation()`` makes a fresh generation id (the host's randomness)."""

    def __init__(self, policy: StorePolicy, new_generation: Callable[[], str]) -> None:
        self.policy = policy
        self._new_generation = new_generation
        self.sessions: dict[tuple[str, str], KeptSession] = {}
        self._requests = 0
        #: the store fails: nothing is kept, no snapshot asked, every session behind
        self.down = False

    # -- what is stored --------------------------------------------------------------------
    def loaded(self, application: str, session: str, generation: str, *, messages: int,
               has_snapshot: bool, now: float, behind: bool = False) -> None:
        """A session found in the store when the host started (``behind``: marked so)."""
        self.sessions[(application, session)] = KeptSession(
            generation, since_snapshot=messages, has_snapshot=has_snapshot,
            snapshot_at=now, refresh=True, behind=behind)

    def store_down(self) -> None:
        """The store failed: from now on what is relayed is not kept, so every session
        is behind; outstanding snapshot requests are void."""
        self.down = True
        for kept in self.sessions.values():
            kept.behind = True
            kept.asked = None
            kept.declined.clear()
            kept.groups.clear()

    def store_up(self, stored: dict[tuple[str, str], tuple[str, int, bool]],
                 now: float) -> None:
        """The store works again; ``stored``: what it has committed per session
        (generation, messages, has a snapshot). Every session stays behind until a
        holder's snapshot is kept, and one is asked for at once; the holders known
        meanwhile are kept (they received everything relayed)."""
        self.down = False
        for key, (generation, messages, has_snapshot) in stored.items():
            kept = self.sessions.get(key)
            if kept is None:
                kept = self.sessions[key] = KeptSession(generation, snapshot_at=now)
            kept.generation = generation
            kept.since_snapshot = messages
            kept.has_snapshot = has_snapshot
        for kept in self.sessions.values():
            kept.behind = kept.refresh = kept.created = True
            kept.snapshot_at = now

    def behind(self) -> list[tuple[str, str]]:
        """The sessions behind (for the host's counters)."""
        return [key for key, kept in self.sessions.items() if kept.behind]

    def dropped(self, application: str, session: str) -> None:
        self.sessions.pop((application, session), None)

    # -- joins ---------------------------------------------------------------------------------
    @staticmethod
    def refuse_join(address: str) -> str | None:
        """Why a join is refused (direct routing), or None."""
        if address:
            return ("this session server keeps sessions (--store) and relays every message: "
                    "direct routing is refused; join with relayed routing")
        return None

    def admitted(self, application: str, session: str, member: str, *,
                 others: Collection[str], wants_state: bool, has_state: bool,
                 generation: str, now: float) -> JoinVerdict:
        """``member`` was admitted; ``others``: the session's other member ids;
        ``has_state``: it says it holds the session's state (a live client coming back,
        never a new process); ``generation``: the one it was told then ("" when none).

        The stored state goes to it when no other member holds the session's state:
        members still waiting for theirs (newcomers joining together), or that started
        without one, cannot give it, and the store can."""
        kept = self.sessions.get((application, session))
        if kept is None:
            # made while the store fails: created when it works again, and behind until
            # then (what is relayed meanwhile is not kept)
            kept = KeptSession(self._new_generation(), snapshot_at=now, behind=self.down,
                               created=not self.down)
            self.sessions[(application, session)] = kept
            kept.holders.add(member)  # nothing kept before it: its state is the session's
            return JoinVerdict(kept.generation, create=kept.created,
                               changed=bool(generation) and has_state)
        changed = bool(generation) and generation != kept.generation
        # one that left when nobody was there to be told is no holder any more
        kept.holders.intersection_update(others)
        if has_state and not changed:
            kept.holders.add(member)
            return JoinVerdict(kept.generation)
        held = any(other in kept.holders for other in others)
        if held:  # it gets the state from them; it holds it once it says so
            return JoinVerdict(kept.generation, changed=changed)
        if kept.behind and wants_state:  # what is kept has a hole: nothing to hand out
            return JoinVerdict(kept.generation, changed=changed, refused=True)
        send = wants_state and kept.has_content
        if send or not kept.has_content:
            kept.holders.add(member)
        return JoinVerdict(kept.generation, send_state=send, changed=changed)

    def state_held(self, application: str, session: str, member: str) -> None:
        """``member`` installed the session's state from another member."""
        kept = self.sessions.get((application, session))
        if kept is not None:
            kept.holders.add(member)

    def holds(self, application: str, session: str, member: str) -> bool:
        kept = self.sessions.get((application, session))
        return kept is not None and member in kept.holders

    # -- relayed messages ------------------------------------------------------------------
    def keep(self, application: str, session: str, members: Sequence[str],
             candidates: Sequence[Candidate]) -> list[Candidate]:
        """Which of a relayed frame's messages are kept: those sent to every other member
        (for copies of a split send, once their destinations together are); one the
        snapshot reflects is kept too (its sender's own send, applied before it
        reached the server): a later snapshot may not reflect it, and the replay leaves
        out what the snapshot it follows reflects (:meth:`replayed`). ``members``: the
        session's member ids now."""
        kept = self.sessions.get((application, session))
        if kept is None:
            return []
        out = []
        for candidate in candidates:
            # right after a restart of the server, the others may not be back yet (their
            # frames wait for them): judged against those back so far
            others = {m for m in members if m != candidate.sender}
            if not candidate.dests or candidate.dests == (candidate.sender,):
                continue
            if candidate.grouped:
                seen = kept.groups.setdefault(candidate.message_id, set())
                if seen is _DONE:
                    continue
                seen.update(candidate.dests)
                if not others <= seen:
                    while len(kept.groups) > MAX_PENDING_GROUPS:
                        kept.groups.popitem(last=False)
                    continue
                kept.groups[candidate.message_id] = _DONE
                kept.groups.move_to_end(candidate.message_id)
            elif not others <= set(candidate.dests):
                continue
            out.append(candidate)
        return out

    @staticmethod
    def replayed(reflected: Collection[str], stored: Sequence[str]) -> list[int]:
        """The indexes of the ``stored`` message ids a newcomer replays after a snapshot
        that reflects ``reflected``: every one it does not reflect, in arrival order."""
        covered = set(reflected)
        return [i for i, message_id in enumerate(stored) if message_id not in covered]

    def stored(self, application: str, session: str, count: int) -> None:
        """``count`` messages were added to the session."""
        kept = self.sessions.get((application, session))
        if kept is not None:
            kept.since_snapshot += count

    # -- snapshots ---------------------------------------------------------------------------
    def due(self, now: float,
            members_of: Callable[[str, str], Sequence[str]]) -> list[AskSnapshot]:
        """Snapshot requests to send now (``members_of``: member ids in join order)."""
        asks: list[AskSnapshot] = []
        if self.down:
            return asks
        policy = self.policy
        for (application, session), kept in self.sessions.items():
            if kept.asked is not None and now < kept.due:
                continue
            if kept.asked is not None:  # did not answer in time
                kept.declined.add(kept.asked)
                kept.asked = None
            wanted = (kept.refresh or not kept.has_snapshot
                      or kept.since_snapshot >= policy.every_messages
                      or (kept.since_snapshot > 0
                          and now - kept.snapshot_at >= policy.every_seconds))
            if not wanted:
                continue
            # a member without the session's state would replace it with less
            members = [m for m in members_of(application, session)
                       if m not in kept.declined and m in kept.holders]
            if not members:
                if kept.declined and not members_of(application, session):
                    kept.declined.clear()  # everyone left: a new round with new members
                continue
            self._requests += 1
            kept.asked, kept.request = members[0], self._requests
            kept.due = now + policy.answer_timeout
            asks.append(AskSnapshot(application, session, members[0], self._requests))
        return asks

    def next_due(self) -> float | None:
        """When :meth:`due` next has something to say about an outstanding request."""
        return min((k.due for k in self.sessions.values() if k.asked is not None),
                   default=None)

    def answered(self, application: str, session: str, member: str, request: int, *,
                 available: bool, now: float) -> bool:
        """A member answered a snapshot request: True when its snapshot is to be kept
        (then :meth:`snapshot_kept` follows); an unasked or late answer is ignored, and so
        is one from a member that does not hold the session's state while something is
        kept (its snapshot would replace the kept history with less)."""
        kept = self.sessions.get((application, session))
        if kept is None or kept.asked != member or kept.request != request:
            return False
        if available and member not in kept.holders and kept.has_content:
            kept.asked = None
            kept.declined.add(member)
            kept.due = now
            return False
        kept.asked = None
        if not available:
            kept.declined.add(member)
            kept.due = now
            return False
        return True

    def snapshot_kept(self, application: str, session: str, dropped: int,
                      now: float) -> None:
        """The snapshot is stored and ``dropped`` messages it covers were removed; a
        session behind is whole again (its host clears the mark in the same
        transaction: if that fails, the store is down and every session behind)."""
        kept = self.sessions.get((application, session))
        if kept is None:
            return
        kept.behind = False
        kept.has_snapshot = True
        kept.refresh = False
        kept.since_snapshot = max(0, kept.since_snapshot - dropped)
        kept.snapshot_at = now
        kept.declined.clear()

    def member_left(self, application: str, session: str, member: str) -> None:
        kept = self.sessions.get((application, session))
        if kept is None:
            return
        kept.holders.discard(member)
        if kept.asked == member:
            kept.asked = None


#: the destinations of a split send once it was kept (shared, never changed)
_DONE: set[str] = set()
