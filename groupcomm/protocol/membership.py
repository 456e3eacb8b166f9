"""The session protocol of one client, without I/O: :class:`Membership` takes the
server's notices, the senders of arriving messages, direct frame counts and the time,
and answers with actions for its host. Member ids, incarnations and server restarts as
clients see them: docs/sessions.md.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from groupcomm.core.member_ids import check_client_name, display_name, member_id, split_member
from groupcomm.core.messages import ReceivedMessage
from groupcomm.core.tracing import EVENT_EXTRA
from groupcomm.protocol.registry_events import MAX_KNOWN_NAMES

log = logging.getLogger(__name__)

#: Messages from a sender whose join notice has not arrived yet are kept this long ...
EARLY_WAIT = 5.0
#: ... and at most this many of them (then they are rejected as unknown_peer).
MAX_EARLY_MESSAGES = 10_000
#: A member that left gracefully may still have direct frames on their way here (the
#: server's "left" notice can overtake them): it stays a member until they have all
#: arrived, or this many seconds have passed.
DEPART_WAIT = 10.0
#: Heartbeats without an answer before the server is reported unreachable.
SERVER_SILENCE_HEARTBEATS = 4
#: Frames the server returned (it did not know this client) kept for sending again.
MAX_RETURNED_FRAMES = 10_000


@dataclass(frozen=True)
class SendCommand:
    op: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Arrive:
    messages: tuple[ReceivedMessage, ...]


@dataclass(frozen=True)
class Reject:
    reason: str
    detail: str


@dataclass(frozen=True)
class MemberJoined:
    member: str
    is_new_session: bool
    is_new_application: bool
    all_users: tuple[str, ...]
    #: the newcomer asks for the application state (see groupcomm.protocol.state_transfer)
    wants_state: bool = False


@dataclass(frozen=True)
class MemberLeft:
    member: str


@dataclass(frozen=True)
class Incarnated:
    """The server admitted this client as ``member`` (``joined``: its own join).
    ``previous`` is its member id before (None on the first join): when it differs, the
    client is a new process, and the host puts in place a fresh node given ``joined``."""

    member: str
    previous: str | None
    joined: MemberJoined


@dataclass(frozen=True)
class JoinDone:
    error: str | None = None


@dataclass(frozen=True)
class ResendReturned:
    frames: tuple[tuple[tuple[str, ...], bytes], ...]


@dataclass(frozen=True)
class DropReturned:
    """Returned frames of an incarnation that is gone (``ids``: the messages they held)."""

    count: int
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerSilence:
    silent_for: float


@dataclass(frozen=True)
class ServerBack:
    """The server answers again after a :class:`ServerSilence`."""


@dataclass(frozen=True)
class LeftSession:
    """Out of the session for good: ``left`` or ``replaced``."""

    reason: str = "left"


@dataclass(frozen=True)
class StoreJoin:
    """The server keeps this session (docs/storage.md): its ``generation``, whether the
    stored state follows (``stored``), and ``changed``: this client's state is of
    another generation (it gets a fresh state transfer)."""

    generation: str
    stored: bool
    changed: bool
    #: the store had something kept of the session when this client joined
    kept: bool = True


@dataclass(frozen=True)
class StoredState:
    """The stored state of the session (the ``stored_state`` notice's fields)."""

    notice: Mapping[str, Any]


@dataclass(frozen=True)
class SnapshotAsked:
    """The server's store asks for a snapshot (answer with the ``snapshot`` command)."""

    request: int


Action = (SendCommand | Arrive | Reject | MemberJoined | MemberLeft | Incarnated | JoinDone
          | ResendReturned | DropReturned | LeftSession | ServerSilence | ServerBack
          | StoreJoin | StoredState | SnapshotAsked)


class Phase(StrEnum):
    """Where a client is in the session; REJOINING: a member the server does not know."""

    JOINING = "joining"
    JOINED = "joined"
    REJOINING = "rejoining"
    LEAVING = "leaving"
    LEFT = "left"
    FAILED = "failed"


class PhaseError(RuntimeError):
    """An input that does not fit the client's phase (the host's mistake)."""


#: phase -> what happened -> the next phase; what a phase does not list cannot happen
#: in it (:meth:`Membership._move` raises :class:`PhaseError`)
TRANSITIONS: dict[Phase, dict[str, Phase]] = {
    Phase.JOINING: {"admitted": Phase.JOINED, "refused": Phase.FAILED,
                    "leave": Phase.LEAVING},
    Phase.JOINED: {"admitted": Phase.JOINED, "unknown_to_server": Phase.REJOINING,
                   "leave": Phase.LEAVING, "left": Phase.LEFT},
    Phase.REJOINING: {"admitted": Phase.JOINED, "unknown_to_server": Phase.REJOINING,
                      "replaced": Phase.LEFT, "leave": Phase.LEAVING, "left": Phase.LEFT},
    Phase.LEAVING: {"admitted": Phase.LEAVING, "left": Phase.LEFT, "leave": Phase.LEAVING},
    Phase.LEFT: {},
    Phase.FAILED: {},
}


def known_incarnations(known: Mapping[str, int], members: Iterable[str]) -> dict[str, int]:
    """``known`` (name -> highest incarnation seen) with ``members`` (member ids) added:
    what a client coming back tells a restarted server of the names it has seen (the
    most recent :data:`MAX_KNOWN_NAMES`)."""
    merged = dict(known)
    for member in members:
        name, incarnation = split_member(member)
        if incarnation > merged.get(name, 0):
            merged[name] = incarnation
    return dict(list(merged.items())[-MAX_KNOWN_NAMES:])


class Membership:
    """The session protocol of one client."""

    def __init__(self, name: str, *, heartbeat_interval: float, now: float,
                 wants_state: bool = False,
                 early_wait: float | None = None, depart_wait: float | None = None,
                 max_early: int | None = None) -> None:
        check_client_name(name)
        self.name = name
        self.heartbeat_interval = heartbeat_interval
        # the module's values unless given (read now, so that a test can change them)
        self.early_wait = EARLY_WAIT if early_wait is None else early_wait
        self.depart_wait = DEPART_WAIT if depart_wait is None else depart_wait
        self.max_early = MAX_EARLY_MESSAGES if max_early is None else max_early
        #: this client's incarnation (0 until the server first admits it)
        self.incarnation = 0
        #: where this client is in the session (see :data:`TRANSITIONS`)
        self.phase = Phase.JOINING
        #: current member id of each member's name, in join order
        self.current: dict[str, str] = {}
        #: highest incarnation of each name known to be gone
        self.retired: dict[str, int] = {}
        self.addresses: dict[str, str] = {}
        #: (expiry, message) from senders not yet known to be members (EARLY_WAIT)
        self.early: list[tuple[float, ReceivedMessage]] = []
        #: frames received directly from each member
        self.direct_received: Counter[str] = Counter()
        #: members that left before their direct frames arrived: (frames, stop waiting)
        self.departing: dict[str, tuple[int, float]] = {}
        #: frames the server returned, to relay again once it knows us, and their ids
        self.returned: list[tuple[tuple[str, ...], bytes]] = []
        self.returned_ids: list[str] = []
        self.server_seen = now
        self.server_unreachable = False
        self._silence_armed = True  # a silence is said once, until a server answers
        #: the server answers with frames this client cannot verify (another key)
        self.server_key_mismatch = False
        self._last_rejoin = -float("inf")
        #: set by a welcome that gave this client a new incarnation, until its join
        self._new_incarnation = False
        self._previous: str | None = None
        self._address = ""
        self.wants_state = wants_state
        #: this client holds its session's state (set by its state transfer): said when
        #: it joins again, so that a new process under a known name is not taken for it
        self.has_state = False
        #: the store generation the server gave on the last join ("" without a store)
        self.generation = ""
        self.stats: Counter[str] = Counter()

    @property
    def member(self) -> str:
        """This client's member id (its name until it is first admitted)."""
        return member_id(self.name, self.incarnation)

    @property
    def joined(self) -> bool:
        return self.phase in (Phase.JOINED, Phase.REJOINING, Phase.LEAVING)

    @property
    def may_relay(self) -> bool:
        """False while the server does not know this client (relayed frames wait)."""
        return self.phase in (Phase.JOINED, Phase.LEAVING)

    def _move(self, happened: str) -> Phase:
        """Take the transition for ``happened``; returns the phase it left."""
        before = self.phase
        after = TRANSITIONS[before].get(happened)
        if after is None:
            raise PhaseError(f"{self.member}: {happened!r} cannot happen in phase "
                             f"{before.value!r}")
        self.phase = after
        return before

    def _can(self, happened: str) -> bool:
        return happened in TRANSITIONS[self.phase]

    def resolve(self, name: str) -> str:
        """The current member id for a client name (a member id as is)."""
        if name in self.departing or name not in self.current:
            return name
        return self.current[name]

    def is_stale(self, sender: str) -> bool:
        """Whether ``sender`` is older than its name's current or latest departed one."""
        name, incarnation = split_member(sender)
        current = self.current.get(name)
        if current is not None and current != sender and split_member(current)[1] > incarnation:
            return True
        return incarnation <= self.retired.get(name, 0) and current != sender

    def start(self, address: str) -> list[Action]:
        """The first join; ``address`` is where peers push frames."""
        self._address = address
        return [SendCommand("join", self._join_fields())]

    def _join_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"address": self._address, "incarnation": self.incarnation}
        if self.wants_state:
            fields["wants_state"] = True
        if self.generation:
            fields["generation"] = self.generation
        if self.has_state:
            fields["has_state"] = True
        if self.incarnation:
            # back (a restarted or another server): it numbers a new process under one of
            # these names above what this client saw (whose ids it would skip as seen);
            # the host adds the senders its application clock holds (known_incarnations)
            fields["known"] = known_incarnations(
                dict(self.retired), (*self.current.values(), self.member))
        return fields

    def heartbeat(self, now: float) -> list[Action]:
        """A heartbeat is due: note a silent server, and beat."""
        if not self.joined:
            return []
        silent = now - self.server_seen
        actions: list[Action] = []
        if (silent > SERVER_SILENCE_HEARTBEATS * self.heartbeat_interval
                and self._silence_armed and not self.server_key_mismatch):
            self._silence_armed, self.server_unreachable = False, True
            self.stats["server_outages"] += 1
            log.warning("%s: no answer from the session server for %.1fs; retrying (direct "
                        "traffic goes on; relayed frames wait)", self.member, silent,
                        extra=EVENT_EXTRA)
            actions.append(ServerSilence(silent))
        actions.append(SendCommand("heartbeat"))
        return actions

    def server_changed(self, now: float) -> list[Action]:
        """Another server is in use (failover): join it as a restarted one (docs/deploy.md)."""
        self.server_seen, self._silence_armed = now, True
        if self.phase == Phase.JOINING:  # the first join went to a server that is gone
            return [SendCommand("join", self._join_fields())]
        self._last_rejoin = -float("inf")
        return self._rejoin(now)

    def leave(self, direct_frames: Mapping[str, int]) -> list[Action]:
        """Leave, with the frames pushed to each peer; :class:`PhaseError` when out already."""
        self._move("leave")
        return [SendCommand("leave", {"direct_frames": dict(direct_frames)})]

    def on_notice(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        """A verified session notice from the server."""
        self.server_seen, self._silence_armed = now, True
        actions: list[Action] = []
        if self.server_key_mismatch:
            self.server_key_mismatch = False
            log.warning("%s: the session server accepts this client's key again", self.member)
        if self.server_unreachable:
            self.server_unreachable = False
            log.warning("%s: the session server answers again", self.member,
                        extra=EVENT_EXTRA)
            actions.append(ServerBack())
        step = _NOTICE_STEPS.get(notice["op"])
        if step is None:
            return [*actions, Reject("malformed", f"unexpected session op {notice['op']!r}")]
        return [*actions, *step(self, notice, now)]

    def _on_probe(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        # another client asks for this name: the server asks whether we are alive
        probe = notice.get("probe")
        if isinstance(probe, bool) or not isinstance(probe, int):
            return [Reject("malformed", f"probe numbered {probe!r}")]
        return [SendCommand("heartbeat", {"probe": probe})] if self.joined else []

    def on_unverifiable_server_frame(self, now: float) -> list[Action]:
        """The server signs with another key: a first join fails; otherwise said once,
        and the client keeps trying until the keys agree."""
        if self.phase == Phase.JOINING:
            self._move("refused")
            return [JoinDone("wrong_key: the session server answers, but signs with another "
                             "session key than this client's; give the client the server's "
                             "key file")]
        if not self.server_key_mismatch:
            self.server_key_mismatch = True
            self.stats["server_key_mismatch"] += 1
            log.error("%s: the session server answers, but not with this client's session "
                      "key (it was restarted with another key, or this client has the wrong "
                      "key file); retrying", self.member)
        return []

    def on_returned(self, dests: tuple[str, ...], frame: bytes, now: float,
                    ids: tuple[str, ...] = ()) -> list[Action]:
        """The server, which does not know this client, returned a relayed frame."""
        if len(self.returned) < MAX_RETURNED_FRAMES:
            self.returned.append((dests, frame))
            self.returned_ids.extend(ids)
        else:
            self.stats["returned_frames_dropped"] += 1
        return self._rejoin(now)

    def admit(self, message: ReceivedMessage, now: float) -> list[Action]:
        """A verified message whose sender is not a current member."""
        if self.is_stale(message.sender):
            now_is = self.current.get(display_name(message.sender), "none")
            return [self._stale(message, f" (now {now_is})")]
        if message.sender in self.departing:
            return [Arrive((message,))]
        if len(self.early) >= self.max_early:
            return [Reject("unknown_peer", f"sender {message.sender!r} is not a member (and "
                           f"{len(self.early)} early messages already wait)")]
        # with direct routing its first frames can overtake the server's join notice:
        # keep it (bounded, briefly) and hand it over when the join arrives
        self.early.append((now + self.early_wait, message))
        return []

    def on_direct_frame(self, origin: str) -> list[Action]:
        """A frame from ``origin`` arrived directly (not through the server)."""
        self.direct_received[origin] += 1
        departing = self.departing.get(origin)
        if departing is not None and self.direct_received[origin] >= departing[0]:
            return self._complete_leave(origin)
        return []

    def tick(self, now: float) -> list[Action]:
        """Time passed: expire early messages and departure waits."""
        actions: list[Action] = []
        if self.early:
            actions += self._release_early(now)
        for member, (expected, due) in list(self.departing.items()):
            if now >= due:
                missing = expected - self.direct_received[member]
                self.stats["departed_frames_missing"] += missing
                log.warning("%s: %s left; %d of the %d frames it sent here directly never "
                            "arrived (waited %gs)", self.member, member, missing, expected,
                            self.depart_wait)
                actions += self._complete_leave(member)
        return actions

    def _on_welcome(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        incarnation = notice.get("incarnation", 1)
        if isinstance(incarnation, bool) or not isinstance(incarnation, int) or incarnation < 1:
            return [Reject("malformed", f"welcome with incarnation {incarnation!r}")]
        previous = self.member if self.incarnation else None
        self._previous = previous
        self.incarnation = incarnation
        actions: list[Action] = []
        generation = notice.get("generation")
        if isinstance(generation, str) and generation:
            self.generation = generation
            actions.append(StoreJoin(generation, notice.get("stored") is True,
                                     notice.get("generation_changed") is True,
                                     notice.get("kept") is not False))
        self._new_incarnation = previous is not None and previous != self.member
        if self._new_incarnation:
            # we were declared gone while stalled: what the old incarnation relayed and
            # got back cannot be sent as the new one's
            log.warning("%s: the session had declared this client gone; it is back as a "
                        "new member, %s", previous, self.member, extra=EVENT_EXTRA)
            self.stats["reincarnations"] += 1
            if self.returned:
                actions.append(DropReturned(len(self.returned), tuple(self.returned_ids)))
                self.returned = []
                self.returned_ids = []
        return actions

    def _on_joined(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        client = str(notice["client"])
        users = tuple(str(u) for u in notice["all_users"])
        actions: list[Action] = []
        addresses = notice["addresses"]
        if isinstance(addresses, dict):
            self.addresses.update({str(k): str(v) for k, v in addresses.items()})
        # a name back under a new incarnation: its predecessor is gone (it may have been
        # declared gone while this client was itself out of the session)
        for user in users:
            name = display_name(user)
            old = self.current.get(name)
            if old is not None and old != user:
                if name == self.name:  # our own predecessor: retired, its node replaced
                    self.current.pop(name)
                    self.retired[name] = max(self.retired.get(name, 0),
                                             split_member(old)[1])
                else:
                    actions += self._complete_leave(old)
        if client == self.member and self._new_incarnation:
            # back as a new member after being declared gone: the list is the whole
            # session now, and whoever is not in it left while we were out
            listed = {display_name(u) for u in users}
            for name, old in list(self.current.items()):
                if name not in listed and name != self.name:
                    actions += self._complete_leave(old)
        for user in users:
            self.current[display_name(user)] = user
        joined = MemberJoined(
            client, bool(notice["is_new_session"]), bool(notice["is_new_application"]), users,
            notice.get("wants_state") is True)
        if client == self.member and self.phase in (Phase.JOINING, Phase.REJOINING):
            actions.append(Incarnated(self.member, self._previous, joined))
        else:
            actions.append(joined)
        if client == self.member and self._can("admitted"):
            first = self._move("admitted") == Phase.JOINING
            self._new_incarnation = False
            if first:
                actions.append(JoinDone())
            if self.returned:
                actions.append(ResendReturned(tuple(self.returned)))
                self.returned = []
                self.returned_ids = []
        if self.early:
            actions += self._release_early(None)
        return actions

    def _on_left(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        client = str(notice["client"])
        if client == self.member:
            if not self._can("left"):
                return [Reject("malformed", f"left notice for this client in phase "
                               f"{self.phase.value}")]
            self._move("left")
            return [LeftSession()]
        if self.current.get(display_name(client)) != client:
            return []  # an incarnation already retired (its successor's join came first)
        expected = notice.get("direct_frames")
        if isinstance(expected, bool) or not isinstance(expected, int):
            expected = 0  # left without saying (gone), or relayed only
        if self.direct_received[client] < expected:
            # its last direct frames are still on the way: keep it a member until they
            # are in, so that nothing it sent before leaving is refused as unknown
            log.debug("%s: %s left; waiting for %d more of its direct frames", self.member,
                      client, expected - self.direct_received[client])
            self.departing[client] = (expected, now + self.depart_wait)
            return []
        return self._complete_leave(client)

    def _on_error(self, notice: Mapping[str, Any], now: float) -> list[Action]:
        detail = f"{notice['reason']}: {notice['detail']}"
        if self.phase == Phase.JOINING:
            self._move("refused")
            return [JoinDone(detail)]
        if notice["reason"] == "not_a_member" and self.phase != Phase.LEFT:
            return self._rejoin(now)
        if notice["reason"] == "replaced" and self._can("replaced"):
            # a new start of this client's name took it over while this one was stalled:
            # it is out of the session for good (rejoining would take the name back)
            self._move("replaced")
            self.stats["replaced"] += 1
            log.error("%s: %s; this client is no longer in the session", self.member,
                      notice["detail"])
            return [LeftSession("replaced")]
        log.error("%s: server error: %s", self.member, detail)
        self.stats[f"server_error_{notice['reason']}"] += 1
        return []

    def _rejoin(self, now: float) -> list[Action]:
        """The server does not know us (it restarted, or it declared us gone): join
        again, at most once a heartbeat, asking to keep our incarnation."""
        if not self._can("unknown_to_server"):
            return []  # not a member yet, or on its way out: nothing to rejoin
        self._move("unknown_to_server")
        if now - self._last_rejoin < self.heartbeat_interval:
            return []
        self._last_rejoin = now
        self.stats["rejoins"] += 1
        log.warning("%s: the session server does not know this client (restarted, or it "
                    "declared this client gone); joining again", self.member,
                    extra=EVENT_EXTRA)
        return [SendCommand("join", self._join_fields())]

    def _stale(self, message: ReceivedMessage, note: str = "") -> Reject:
        self.stats["stale_frames"] += 1
        return Reject("stale_incarnation", f"message {message.message_id} from "
                      f"{message.sender}, an incarnation that is gone{note}")

    def _complete_leave(self, member: str) -> list[Action]:
        self.departing.pop(member, None)
        self.direct_received.pop(member, None)
        self.addresses.pop(member, None)
        name, incarnation = split_member(member)
        if self.current.get(name) == member:
            del self.current[name]
        self.retired[name] = max(self.retired.get(name, 0), incarnation)
        return [MemberLeft(member)]

    def _release_early(self, now: float | None) -> list[Action]:
        """Hand over early messages whose sender joined; reject expired and stale ones."""
        members = set(self.current.values())
        ready: list[ReceivedMessage] = []
        actions: list[Action] = []
        keep: list[tuple[float, ReceivedMessage]] = []
        for due, message in self.early:
            if message.sender in members:
                ready.append(message)
            elif self.is_stale(message.sender):
                actions.append(self._stale(message))
            elif now is not None and now >= due:
                actions.append(Reject("unknown_peer", f"sender {message.sender!r} is not a "
                                      f"member (waited {self.early_wait:g}s for its join)"))
            else:
                keep.append((due, message))
        self.early = keep
        if ready:
            actions.insert(0, Arrive(tuple(ready)))
        return actions


def _on_snapshot_request(membership: Membership, notice: Mapping[str, Any],
                         now: float) -> list[Action]:
    request = notice["request"]
    if isinstance(request, bool) or not isinstance(request, int):
        return [Reject("malformed", f"snapshot request numbered {request!r}")]
    return [SnapshotAsked(request)] if membership.joined else []


#: what :class:`Membership` does with each session notice (the server's ops)
_NOTICE_STEPS = {"pong": lambda membership, notice, now: [], "probe": Membership._on_probe,
                 "stored_state": lambda membership, notice, now: [StoredState(notice)],
                 "snapshot_request": _on_snapshot_request,
                 "welcome": Membership._on_welcome, "joined": Membership._on_joined,
                 "left": Membership._on_left, "error": Membership._on_error}
