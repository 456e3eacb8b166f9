"""The session server over ZeroMQ: a ROUTER socket that verifies and decodes each frame,
hands it to :class:`~groupcomm.protocol.registry.SessionRegistry` (every rule) as a typed
input and carries out the actions it answers with, on one thread, so every member hears
of joins and leaves in the same order. Bad frames are dropped, counted by reason and
logged. A connection signing with another session key is told so (at most once a
second) in a notice it cannot verify: that is how the client knows the keys differ.
With a store (``--store``, docs/storage.md), a turn's actions are sent only after the
store committed what the turn kept (:meth:`SessionServer.flush`)."""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable

import zmq

from groupcomm.protocol.registry import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    Action,
    Forward,
    Notify,
    Rejected,
    Return,
    SessionRegistry,
    Tick,
)
from groupcomm.protocol.registry_events import BadCommand, KeepSnapshot
from groupcomm.protocol.rejects import RejectLog
from groupcomm.protocol.store_rules import StorePolicy
from groupcomm.store.backend import StoreBackend
from groupcomm.transport.address import endpoint
from groupcomm.transport.curve import ServerKeys, start_authenticator
from groupcomm.transport.store_host import StoreHost
from groupcomm.wire.frames import DEFAULT_MAX_FRAME, FORWARDED, FrameCodec, FrameRejected
from groupcomm.wire.parts import DEFAULT_MAX_STATE
from groupcomm.wire.session import seal_session, seal_session_parts

__all__ = ["DEFAULT_HEARTBEAT_TIMEOUT", "SessionServer"]

log = logging.getLogger(__name__)

#: a connection signing with another key is told so at most this often
KEY_MISMATCH_NOTICE_EVERY = 1.0
#: connections remembered for that rate limit (oldest forgotten)
MAX_KEY_MISMATCH_PEERS = 1024


class SessionServer:
    """Runs on the thread that calls :meth:`serve_forever` (it owns the socket)."""

    def __init__(self, key: bytes, bind: str = "tcp://127.0.0.1:0", *,
                 heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
                 max_frame: int = DEFAULT_MAX_FRAME, context: zmq.Context | None = None,
                 curve: ServerKeys | None = None, store: StoreBackend | None = None,
                 store_policy: StorePolicy | None = None,
                 max_state: int = DEFAULT_MAX_STATE) -> None:
        """``max_state``: the most bytes a command arriving in parts (a member's snapshot
        for the store) or a stored state handed to a newcomer may hold."""
        self.codec = FrameCodec(key, max_frame=max_frame)
        self.heartbeat_timeout = heartbeat_timeout
        self._context = context or zmq.Context.instance()
        self.curve = curve
        self._auth = start_authenticator(self._context, curve) if curve else None
        self.socket = self._context.socket(zmq.ROUTER)
        if curve:
            curve.apply(self.socket)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, max_frame * 2 + 4096)
        self.socket.bind(endpoint(bind, "bind address"))
        self.address: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.registry = SessionRegistry(server_id=os.urandom(4).hex(), now=time.monotonic(),
                                        heartbeat_timeout=heartbeat_timeout,
                                        authenticated=curve is not None,
                                        max_state=max_state, notice_stalls=True)
        self.rejects = RejectLog("session server")
        #: the session store (``--store``); its turn's writes commit before anything of
        #: the turn is sent (see :meth:`flush`)
        self.store = (StoreHost(store, self.registry, policy=store_policy,
                                max_frame=max_frame, max_state=max_state)
                      if store is not None else None)
        #: actions of this turn, sent once the store committed (only with a store)
        self._pending: list[Action] = []
        self._stopping = False
        #: when the server last had no input waiting: everything sent before then has
        #: been read, so silence is judged against this, not against the wall clock
        self._caught_up_at = time.monotonic()
        #: connection -> when it was last told that its frames carry another key
        self._told_key_mismatch: OrderedDict[bytes, float] = OrderedDict()

    def serve_forever(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Serve until :meth:`stop` is called or ``should_stop()`` is true."""
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        check_every = max(self.heartbeat_timeout / 4, 0.05)
        next_check = time.monotonic() + check_every
        try:
            while not self._stopping and not should_stop():
                due = next_check
                takeover = self.registry.next_deadline()
                if takeover is not None:
                    due = min(due, takeover)
                if self.store is not None:
                    answer = self.store.next_due()
                    if answer is not None:
                        due = min(due, answer)
                timeout_ms = max(0.0, (due - time.monotonic()) * 1000)
                if not poller.poll(timeout_ms):
                    self._caught_up_at = time.monotonic()
                else:
                    # drain what is ready without going back to poll for each message
                    for _ in range(1000):
                        try:
                            if self.curve is None:
                                parts = self.socket.recv_multipart(zmq.NOBLOCK, copy=True)
                                self.handle(parts)
                            else:  # the User-Id property lives on the frames
                                frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
                                self.handle([f.bytes for f in frames],
                                            user=frames[-1].get("User-Id"))
                        except zmq.Again:
                            self._caught_up_at = time.monotonic()
                            break
                now = time.monotonic()
                if now >= due:
                    self.tick(now)
                    if now >= next_check:
                        next_check = now + check_every
                self.flush()
        finally:
            self.flush()
            if self.store is not None:
                self.store.close()
            self.socket.close(linger=0)
            if self._auth is not None:
                self._auth.stop()

    def stop(self) -> None:
        """Ask the loop to end (call from the serving thread or a signal handler)."""
        self._stopping = True

    def tick(self, now: float | None = None) -> None:
        """Let time pass in the registry: due takeovers, silent clients, parked frames."""
        now = time.monotonic() if now is None else now
        event = Tick(now, self._caught_up_at)
        actions = self.registry.handle(event)
        if self.store is not None:
            actions = self.store.after(event, actions) + self.store.tick(now)
        self._carry_out(actions)

    def flush(self) -> None:
        """End a turn: commit what the store kept, then send the turn's actions (a
        relayed message is stored before any member receives it)."""
        if self.store is None:
            return
        for action in self.store.tick(time.monotonic(), force=False):
            self._pending.append(action)
        self.store.commit()
        pending, self._pending = self._pending, []
        self._send(pending)

    def counters(self) -> dict[str, int]:
        """Frames refused by reason (``rejected_*``) and the store's counts (``store_*``)."""
        return {**{f"rejected_{k}": v for k, v in self.rejects.counts.items()},
                **(self.store.counters() if self.store is not None else {})}

    def handle(self, parts: list[bytes], user: str | None = None) -> None:
        """Handle one multipart message from a client: ``[identity, frame]``; ``user``
        is the authenticated client name with per-client keys."""
        if len(parts) != 2:
            self.rejects.reject("malformed", f"{len(parts) - 1} frames in one message: a "
                                "frame travels alone")
            return
        identity, frame = parts
        try:
            if self.store is None:
                actions = self.registry.handle_frame(self.codec, identity, frame,
                                                     time.monotonic(), user)
            else:
                actions = self._handle_stored(identity, frame, user)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, self.registry.describe(identity))
            if error.reason == "bad_signature":
                self._tell_key_mismatch(identity)
            return
        except BadCommand as error:
            self.rejects.reject("malformed", str(error), self.registry.describe(identity))
            return
        self._carry_out(actions)

    def _handle_stored(self, identity: bytes, frame: bytes, user: str | None) -> list[Action]:
        store = self.store
        assert store is not None
        event, nonce, counter = self.registry.open_frame(self.codec, identity, frame,
                                                         time.monotonic(), user)
        refused = store.refuse(event)
        if refused is not None:
            return refused
        return store.after(event, self.registry.handle_opened(self.codec, event, nonce,
                                                              counter))

    def _carry_out(self, actions: list[Action]) -> None:
        if self.store is not None:
            self._pending += actions  # sent by flush(), after the store's commit
            return
        self._send(actions)

    def _send(self, actions: list[Action]) -> None:
        send = self.socket.send_multipart
        for action in actions:
            if isinstance(action, Forward):
                if self.curve is None:
                    send([action.conn, FORWARDED, action.frame])
                else:  # attest who sent it: the receiver checks the signed sender against it
                    send([action.conn, FORWARDED, action.frame, action.sender.encode()])
            elif isinstance(action, Notify):  # one larger than a frame goes in parts
                for frame in seal_session_parts(self.codec, action.op, **action.fields):
                    send([action.conn, frame])
            elif isinstance(action, Rejected):
                self.rejects.reject(action.reason, action.detail, action.peer)
            elif isinstance(action, KeepSnapshot):  # a server without a store
                self.rejects.reject("malformed", "a snapshot, and this server keeps no "
                                    "store", action.member)
            elif isinstance(action, Return):
                send([action.conn, seal_session(
                    self.codec, "error", reason="not_a_member",
                    detail="relay from a client that is not a member; join again",
                    returned=list(action.dests)), action.frame])

    def _tell_key_mismatch(self, identity: bytes) -> None:
        """Answer a frame signed with another key, at most once a second per connection
        (without it the client would only see silence and keep asking)."""
        now = time.monotonic()
        last = self._told_key_mismatch.get(identity)
        if last is not None and now - last < KEY_MISMATCH_NOTICE_EVERY:
            return
        self._told_key_mismatch[identity] = now
        self._told_key_mismatch.move_to_end(identity)
        if len(self._told_key_mismatch) > MAX_KEY_MISMATCH_PEERS:
            self._told_key_mismatch.popitem(last=False)
        self.socket.send_multipart([identity, seal_session(
            self.codec, "error", reason="bad_signature",
            detail="this server could not verify your frame's signature: it uses another "
            "session key")])
