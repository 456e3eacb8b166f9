"""The session server over ZeroMQ: a ROUTER socket that verifies and decodes each frame,
hands it to :class:`~groupcomm.protocol.registry.SessionRegistry` (every rule) as a typed
input and carries out the actions it answers with, on one thread, so every member hears
of joins and leaves in the same order. Bad frames are dropped, counted by reason and
logged. A connection signing with another session key is told so (at most once a
second) in a notice it cannot verify: that is how the client knows the keys differ."""

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
from groupcomm.protocol.registry_events import BadCommand
from groupcomm.protocol.rejects import RejectLog
from groupcomm.transport.address import endpoint
from groupcomm.transport.curve import ServerKeys, start_authenticator
from groupcomm.wire.frames import DEFAULT_MAX_FRAME, FORWARDED, FrameCodec, FrameRejected
from groupcomm.wire.session import seal_session

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
                 curve: ServerKeys | None = None) -> None:
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
                                        authenticated=curve is not None)
        self.rejects = RejectLog("session server")
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
        finally:
            self.socket.close(linger=0)
            if self._auth is not None:
                self._auth.stop()

    def stop(self) -> None:
        """Ask the loop to end (call from the serving thread or a signal handler)."""
        self._stopping = True

    def tick(self, now: float | None = None) -> None:
        """Let time pass in the registry: due takeovers, silent clients, parked frames."""
        now = time.monotonic() if now is None else now
        self._carry_out(self.registry.handle(Tick(now, self._caught_up_at)))

    def handle(self, parts: list[bytes], user: str | None = None) -> None:
        """Handle one multipart message from a client: ``[identity, frame]``; ``user``
        is the authenticated client name with per-client keys."""
        if len(parts) != 2:
            self.rejects.reject("malformed", f"{len(parts) - 1} frames in one message: a "
                                "frame travels alone")
            return
        identity, frame = parts
        try:
            actions = self.registry.handle_frame(self.codec, identity, frame,
                                                 time.monotonic(), user)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, self.registry.describe(identity))
            if error.reason == "bad_signature":
                self._tell_key_mismatch(identity)
            return
        except BadCommand as error:
            self.rejects.reject("malformed", str(error), self.registry.describe(identity))
            return
        self._carry_out(actions)

    def _carry_out(self, actions: list[Action]) -> None:
        send = self.socket.send_multipart
        for action in actions:
            if isinstance(action, Forward):
                if self.curve is None:
                    send([action.conn, FORWARDED, action.frame])
                else:  # attest who sent it: the receiver checks the signed sender against it
                    send([action.conn, FORWARDED, action.frame, action.sender.encode()])
            elif isinstance(action, Notify):
                send([action.conn, seal_session(self.codec, action.op, **action.fields)])
            elif isinstance(action, Rejected):
                self.rejects.reject(action.reason, action.detail, action.peer)
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
