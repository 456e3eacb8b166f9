"""The session server's store (``groupcomm serve --store``, docs/storage.md): it carries
out :class:`~groupcomm.protocol.store_rules.StoreRules` against a backend. The server
hands it every input and the actions the registry answered; it keeps the relayed
messages and snapshots in the backend's open transaction, and :meth:`StoreHost.commit`
ends the transaction before the server sends anything of that turn (the durability
point). A store that fails is set aside with one line in the log and a counter: the
server goes on serving without it, what was committed stays intact, and it is tried
again (after 1 s, doubling to 30 s). When it works again every session is marked behind
in it until a member holding the session's state gives a snapshot (docs/storage.md).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter

from groupcomm.core.member_ids import display_name, split_member
from groupcomm.protocol.registry import SessionRegistry
from groupcomm.protocol.registry_events import (
    Action,
    Input,
    Join,
    KeepSnapshot,
    Notify,
    Rejected,
    Relay,
    StateHeld,
)
from groupcomm.protocol.store_rules import (
    DEFAULT_SNAPSHOT_EVERY,
    DEFAULT_SNAPSHOT_SECONDS,
    StorePolicy,
    StoreRules,
)
from groupcomm.store.backend import StoreBackend, StoredMessage, StoredSnapshot, StoreError
from groupcomm.store.tap import FrameTap
from groupcomm.wire.frames import NONCE_SIZE, SIGNATURE_SIZE, sealed_body
from groupcomm.wire.parts import DEFAULT_MAX_STATE

__all__ = ["DEFAULT_SNAPSHOT_EVERY", "DEFAULT_SNAPSHOT_SECONDS", "StoreHost", "StorePolicy"]

log = logging.getLogger(__name__)

#: the notices the store looks at
_WATCHED = ("welcome", "left")
#: seconds before the first attempt to use a failed store again, and the longest wait
RETRY_FIRST = 1.0
RETRY_MAX = 30.0
#: what a newcomer into a session behind, with no member holding its state, is told
BEHIND_REFUSAL = ("the session server's store missed messages of this session while it "
                  "failed, and no member present holds its whole state: it gives none "
                  "rather than one with a hole")


def new_generation() -> str:
    """A fresh generation id: 64 random bits."""
    return os.urandom(8).hex()


class StoreHost:
    """``max_frame``: the largest frame a client accepts; ``max_state``: the largest
    stored state handed to a newcomer (it travels in parts of half a frame)."""

    def __init__(self, backend: StoreBackend, registry: SessionRegistry, *,
                 policy: StorePolicy | None = None, max_frame: int,
                 max_state: int = DEFAULT_MAX_STATE, now: float | None = None, retry_first: float = RETRY_FIRST,
                 retry_max: float = RETRY_MAX) -> None:
        self.backend = backend
        self.registry = registry
        self.rules = StoreRules(policy or StorePolicy(), new_generation)
        self.tap = FrameTap(max_frame)
        self.max_frame = max_frame
        self.max_state = max_state
        self.stats: Counter[str] = Counter()
        #: why the store failed (None while it works)
        self.failed: str | None = None
        self.retry_first, self.retry_max = retry_first, retry_max
        #: the next attempt to use the failed store, and the wait after it
        self._retry_at = 0.0
        self._retry_wait = retry_first
        self._resumed_at = -float("inf")
        #: sessions behind whose snapshot this turn keeps: whole once it commits
        self._whole: list[tuple[str, str, str]] = []
        self._check_due = False
        now = time.monotonic() if now is None else now
        behind = backend.behind()
        for info in backend.sessions():
            key = (info.application, info.session)
            self.rules.loaded(*key, info.generation, messages=info.messages,
                              has_snapshot=info.snapshot_size is not None, now=now,
                              behind=key in behind)
            self._learn_incarnations(info.application, info.session)

    def _learn_incarnations(self, app: str, session: str) -> None:
        """Tell the registry the incarnations the stored session names (senders, the
        snapshot's clock and reflected ids): after a restart, a new process under one
        of those names must not send under its predecessor's message ids."""
        stored = self.backend.load(app, session)
        if stored is None:
            return
        ids = {m.sender for m in stored.messages}
        if stored.snapshot is not None:
            ids.update(member for member, _ in stored.snapshot.clock)
            ids.update(r.rpartition("#")[0] for r in stored.snapshot.reflected)
        known = self.registry.stored_incarnations
        for member in ids - {""}:
            name, incarnation = split_member(member)
            key = (app, session, name)
            known[key] = max(known.get(key, 0), incarnation)

    def _look_up(self, app: str, session: str) -> None:
        """A join to a session this server does not follow: another server sharing the
        store may have kept it since this one started (it was that session's server and
        died, docs/deploy.md): follow it from the store, its generation kept."""
        if (app, session) in self.rules.sessions or self.failed is not None:
            return
        try:
            stored = self.backend.load(app, session)
            if stored is None:
                return
            info = stored.info
            self.rules.loaded(app, session, info.generation, messages=info.messages,
                              has_snapshot=info.snapshot_size is not None,
                              now=time.monotonic(), behind=info.behind)
            self._learn_incarnations(app, session)
            self.stats["sessions_taken_over"] += 1
        except StoreError as error:
            self._fail(error)

    @property
    def working(self) -> bool:
        return self.failed is None

    def counters(self) -> dict[str, int]:
        """``store_down`` is 1 while the store fails (``store_relays_not_stored`` counts
        the relayed frames not kept meanwhile), ``store_sessions_behind`` the sessions
        whose kept history has a hole until a holder's snapshot is kept."""
        return {**{f"store_{k}": v for k, v in self.stats.items()},
                "store_down": int(self.failed is not None),
                "store_sessions_behind": len(self.rules.behind()),
                **{f"store_unreadable_{k}": v for k, v in self.tap.unreadable.items()}}

    # -- before and after the registry ---------------------------------------------------------
    def refuse(self, event: Input) -> list[Action] | None:
        """The actions instead of the registry's for an input the store refuses."""
        if type(event) is Join:
            self._look_up(event.application, event.session)
            why = self.rules.refuse_join(event.address)
            if why is not None:
                self.stats["refused_direct"] += 1
                return [Rejected("direct_refused", "a join with direct routing",
                                 f"{event.client}@{event.session}"),
                        Notify(event.conn, "error", {"reason": "direct_refused",
                                                     "detail": why})]
        return None

    def after(self, event: Input, actions: list[Action]) -> list[Action]:
        """Keep what ``event`` relayed; complete the registry's ``actions`` (the store's
        fields in a welcome, the stored state after it); returns the actions to send.
        While the store fails, the rules go on following members and holders (who
        can give the snapshot that makes a session whole again), and nothing is kept."""
        try:
            if type(event) is Relay and actions and self.registry.by_conn.get(event.conn):
                self._keep_relayed(event)
            elif type(event) is StateHeld:
                member = self._member_id(event.conn)
                if member is not None:
                    self.stats["states_held"] += 1
                    self.rules.state_held(event.application, event.session, member)
            if any(type(a) is KeepSnapshot or (type(a) is Notify and a.op in _WATCHED)
                   for a in actions):
                return self._complete(actions, event)
        except StoreError as error:
            self._fail(error)
            return [a for a in actions if type(a) is not KeepSnapshot]
        return actions

    def _keep_relayed(self, relay: Relay) -> None:
        if self.failed is not None:
            self.stats["relays_not_stored"] += 1
            return
        frame = relay.frame
        start = SIGNATURE_SIZE + 1
        app, session, candidates = self.tap.read(frame[start:start + NONCE_SIZE],
                                                 sealed_body(frame))
        if not candidates:
            return
        if (app, session) != (relay.application, relay.session):
            self.stats["wrong_session"] += 1
            return
        kept = self.rules.keep(app, session, self.registry.members_of(app, session),
                               candidates)
        if not kept:
            return
        added = self.backend.append(app, session, [
            StoredMessage(c.message_id, c.sender, c.fmt, c.payload, vc=c.vc) for c in kept])
        self.stats["messages"] += len(added)
        self.rules.stored(app, session, len(added))
        if self.rules.sessions[(app, session)].since_snapshot >= (
                self.rules.policy.every_messages):
            self._check_due = True

    def _complete(self, actions: list[Action], event: Input) -> list[Action]:
        out: list[Action] = []
        welcomes: dict[object, int] = {}
        for action in actions:
            if type(action) is KeepSnapshot:
                self._keep_snapshot(action, event)
                continue
            out.append(action)
            if type(action) is not Notify:
                continue
            if action.op == "welcome":
                welcomes[action.conn] = len(out) - 1
            elif action.op == "joined" and action.conn in welcomes:
                fields = action.fields
                if fields.get("client") != self._member_id(action.conn):
                    continue
                out += self._admitted(action, out, welcomes.pop(action.conn))
            elif action.op == "left":
                self.rules.member_left(action.fields["application"],
                                       action.fields["session"], action.fields["client"])
        return out

    def _member_id(self, conn: object) -> str | None:
        known = self.registry.by_conn.get(conn)
        if known is None:
            return None
        session = self.registry.sessions.get(known[:2])
        member = session.members.get(known[2]) if session else None
        return member.member_id if member else None

    def _admitted(self, joined: Notify, out: list[Action], at: int) -> list[Action]:
        """The member ``joined`` tells about is admitted: the store's fields in its
        welcome (``out[at]``), and the stored state after this notice when it gets it."""
        app, name, client = self.registry.by_conn[joined.conn]
        member = self.registry.sessions[(app, name)].members[client]
        verdict = self.rules.admitted(
            app, name, member.member_id,
            others=[u for u in joined.fields["all_users"] if u != member.member_id],
            wants_state=member.wants_state, has_state=member.has_state,
            generation=member.generation, now=time.monotonic())
        if verdict.create:
            self.backend.create_session(app, name, verdict.generation, time.time())
            self.stats["sessions_created"] += 1
        if verdict.refused:
            self.stats["newcomers_refused"] += 1
            log.warning("store: %s joins %s/%s, which is behind with no member holding its "
                        "state: no state from the store", member.member_id, app, name)
        if verdict.changed:
            self.stats["generation_changes"] += 1
            log.warning("%s comes back to %s/%s with state of another store generation "
                        "(%s, now %s): it gets a fresh state transfer", member.member_id,
                        app, name, member.generation, verdict.generation)
        welcome = out[at]
        assert type(welcome) is Notify
        out[at] = Notify(welcome.conn, "welcome", {
            **welcome.fields, "generation": verdict.generation,
            # refused: it waits for the store's answer, which says why there is none
            "stored": verdict.send_state or verdict.refused,
            "generation_changed": verdict.changed,
            "kept": self.rules.sessions[(app, name)].has_content})
        if verdict.refused:
            return [Notify(joined.conn, "stored_state", {
                "generation": verdict.generation, "available": False,
                "refused": BEHIND_REFUSAL})]
        if not verdict.send_state:
            return []
        return [Notify(joined.conn, "stored_state", self._stored_state(app, name))]

    def _stored_state(self, app: str, name: str) -> dict[str, object]:
        stored = self.backend.load(app, name)
        generation = self.rules.sessions[(app, name)].generation
        if stored is None:
            return {"generation": generation, "available": False}
        snapshot = stored.snapshot
        messages = stored.messages
        if snapshot is not None:
            messages = [messages[i] for i in self.rules.replayed(
                snapshot.reflected, [m.message_id for m in messages])]
        size = sum(len(m.payload) + len(m.message_id) + 64 for m in messages)
        fields: dict[str, object] = {
            "generation": generation, "available": True,
            "messages": [[m.message_id, m.sender, m.fmt, m.payload, [list(p) for p in m.vc]]
                         for m in messages]}
        if snapshot is not None:
            size += len(snapshot.data) + sum(len(r) + 2 for r in snapshot.reflected)
            fields.update(fmt=snapshot.fmt, data=snapshot.data,
                          reflected=list(snapshot.reflected),
                          clock=[list(p) for p in snapshot.clock])
        if size > self.max_state:
            self.stats["state_too_large"] += 1
            log.error("store: the stored state of %s/%s (%d bytes) is larger than max_state "
                      "(%d); the newcomer goes on without it", app, name, size,
                      self.max_state)
            return {"generation": generation, "available": False,
                    "refused": f"the stored state ({size:,} bytes) is larger than the "
                               f"server's max_state ({self.max_state:,})"}
        self.stats["states_sent"] += 1
        self.stats["messages_sent"] += len(messages)
        return fields

    def _keep_snapshot(self, keep: KeepSnapshot, event: Input) -> None:
        if self.failed is not None:  # asked before the failure: what it covers is lost
            self.stats["snapshots_ignored"] += 1
            return
        given = keep.given
        now = time.monotonic()
        if not self.rules.answered(given.application, given.session, keep.member,
                                   given.request, available=given.available, now=now):
            if given.available:
                self.stats["snapshots_ignored"] += 1
            else:
                self.stats["snapshots_declined"] += 1
            return
        snapshot = StoredSnapshot(given.fmt, given.data, given.reflected, given.clock,
                                  time.time(), keep.member)
        dropped = self.backend.put_snapshot(given.application, given.session, snapshot,
                                            given.reflected)
        kept = self.rules.sessions[(given.application, given.session)]
        if kept.behind:  # whole again once this transaction commits
            self.backend.set_behind(given.application, given.session, False)
            self._whole.append((given.application, given.session, keep.member))
        self.stats["snapshots"] += 1
        self.stats["messages_dropped"] += dropped
        self.rules.snapshot_kept(given.application, given.session, dropped, now)

    # -- time ----------------------------------------------------------------------------------
    def tick(self, now: float, force: bool = True) -> list[Action]:
        """Snapshot requests due (``force`` False: only when a session reached its count);
        a failed store is tried again when its time came."""
        if self.failed is not None:
            if now < self._retry_at or not self._resume(now):
                return []
            force = True  # the sessions behind ask their holders at once
        if not (force or self._check_due):
            return []
        self._check_due = False
        out: list[Action] = []
        for ask in self.rules.due(now, self.registry.members_of):
            session = self.registry.sessions.get((ask.application, ask.session))
            member = session.members.get(display_name(ask.member)) if session else None
            if member is None:
                continue
            self.stats["snapshot_requests"] += 1
            out.append(Notify(member.conn, "snapshot_request", {"request": ask.request}))
        return out

    def next_due(self) -> float | None:
        return self._retry_at if self.failed is not None else self.rules.next_due()

    # -- the durability point ----------------------------------------------------------------
    def commit(self) -> None:
        """End this turn's transaction: what it kept is durable when this returns."""
        if self.failed is not None:
            return
        started = time.perf_counter()
        try:
            self.backend.commit()
            self.stats["commits"] += 1
            self.stats["commit_us"] += int((time.perf_counter() - started) * 1e6)
        except StoreError as error:
            self._whole.clear()
            self._fail(error)
            return
        for app, name, member in self._whole:
            self.stats["sessions_whole_again"] += 1
            log.warning("store: %s/%s is whole again (a snapshot from %s)", app, name, member)
        self._whole.clear()

    def _fail(self, error: StoreError) -> None:
        self._whole.clear()
        self.stats["failures"] += 1
        self.failed = str(error)
        self.rules.store_down()
        now = time.monotonic()
        # a store failing again soon after it resumed (a disk that fills at once) keeps
        # doubling its wait, so that it is not tried, and logged, every second
        self._retry_wait = (self.retry_first if now - self._resumed_at > self.retry_max
                            else min(self._retry_wait * 2, self.retry_max))
        self._retry_at = now + self._retry_wait
        log.error("%s; the server goes on without its store (what was committed is intact) "
                  "and tries it again in %g s: until then nothing is stored", error,
                  self._retry_wait)
        self.backend.rollback()

    def _resume(self, now: float) -> bool:
        """Try the failed store: mark every session behind in it (creating those made
        meanwhile) and commit. True when it works again; else the next attempt waits
        twice as long (up to ``retry_max``)."""
        rules = self.rules
        try:
            self.backend.rollback()
            stored = {(i.application, i.session): (i.generation, i.messages,
                                                   i.snapshot_size is not None)
                      for i in self.backend.sessions()}
            for key, kept in rules.sessions.items():
                if key not in stored:
                    self.backend.create_session(*key, kept.generation, time.time())
                    stored[key] = (kept.generation, 0, False)
                self.backend.set_behind(*key, True)
            self.backend.commit()
        except StoreError as error:
            self.backend.rollback()
            self._retry_wait = min(self._retry_wait * 2, self.retry_max)
            self._retry_at = now + self._retry_wait
            self.stats["retries_failed"] += 1
            log.info("%s; the store is tried again in %g s", error, self._retry_wait)
            return False
        rules.store_up(stored, now)
        self.failed = None
        self._resumed_at = now
        self.stats["resumed"] += 1
        log.warning("store %s works again: %d session(s) behind until a member holding "
                    "the state gives a snapshot", self.backend.location,
                    len(rules.sessions))
        return True

    def close(self) -> None:
        if self.failed is None:
            self.commit()
        self.backend.close()
