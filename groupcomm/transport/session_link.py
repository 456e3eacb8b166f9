"""The communicator's side of the session protocol: join, leave, heartbeat, rejoin.

It reads the server's session notices (joined, left, error, pong), keeps the membership
the communicator checks arrivals against (early senders whose join notice has not
arrived yet, departing members whose last direct frames are still on the way, peers'
direct addresses), notices a silent server and joins again after a server restart.
Runs on the I/O thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from groupcomm.core.messages import ReceivedMessage
from groupcomm.wire.frames import SESSION, FrameRejected, kind_of
from groupcomm.wire.session import open_session, seal_session

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")

#: Heartbeats without an answer before the server is reported unreachable.
SERVER_SILENCE_HEARTBEATS = 4
#: Messages from a sender whose join notice has not arrived yet are kept this long ...
EARLY_WAIT = 5.0
#: ... and at most this many of them (then they are rejected as unknown_peer).
MAX_EARLY_MESSAGES = 10_000
#: A member that left gracefully may still have direct frames on their way here (the
#: server's "left" notice can overtake them): it stays a member until they have all
#: arrived, or this many seconds have passed.
DEPART_WAIT = 10.0


class SessionLink:
    """Session membership and the link to the server, a part of
    :class:`~groupcomm.transport.communicator.Communicator` (I/O thread)."""

    def _init_session_link(self) -> None:
        #: (expiry, message) from senders not yet known to be members (see _hold_early)
        self._early: list[tuple[float, ReceivedMessage]] = []
        self._addresses: dict[str, str] = {}
        #: frames received directly from each sender; a graceful leave says how many
        #: were sent, so receivers know when a leaver's last direct frame has arrived
        self._direct_received: Counter[str] = Counter()
        #: members that left while some of their direct frames were still on the way:
        #: name -> (frames they sent here, when to stop waiting)
        self._departing: dict[str, tuple[int, float]] = {}
        self._joined = threading.Event()
        self._join_error: str | None = None
        self._left = threading.Event()
        self._server_seen = time.monotonic()
        self._last_rejoin = 0.0
        #: True while the session server has not answered for a few heartbeats.
        self.server_unreachable = False

    def _send_session(self, op: str, **fields: Any) -> None:
        self._send_parts(self._dealer, [
            seal_session(self.codec, op, client=self.name, application=self.application,
                         session=self.session, **fields)
        ])

    def _send_leave(self) -> None:
        self._flush_outbox()
        self._send_session("leave", direct_frames=dict(self._direct_sent))

    def _check_server(self, now: float) -> None:
        """Notice a silent server (it answers every heartbeat) and say so once."""
        silent = now - self._server_seen
        if silent > SERVER_SILENCE_HEARTBEATS * self.heartbeat_interval:
            if not self.server_unreachable:
                self.server_unreachable = True
                self.stats["server_outages"] += 1
                log.warning("%s: no answer from the session server for %.1fs; retrying "
                            "(direct traffic goes on; relayed frames wait)", self.name, silent)

    def _rejoin(self) -> None:
        """The server does not know us (it restarted): join again, at most once a beat."""
        now = time.monotonic()
        if now - self._last_rejoin < self.heartbeat_interval:
            return
        self._last_rejoin = now
        self.stats["rejoins"] += 1
        log.warning("%s: the session server does not know this client (restarted?); "
                    "joining again", self.name)
        self._send_session("join", address=self.direct_address)

    def _handle_session_frame(self, frame: bytes) -> None:
        try:
            body, _, _ = self.codec.open(frame)
            if kind_of(body) != SESSION:
                raise FrameRejected("malformed", "expected a session frame from the server")
            notice = open_session(body)
        except FrameRejected as error:
            self.rejects.reject(error.reason, error.detail, "server")
            return
        op = notice["op"]
        self._server_seen = time.monotonic()
        if self.server_unreachable:
            self.server_unreachable = False
            log.warning("%s: the session server answers again", self.name)
        if op == "pong":
            return
        if op == "joined":
            self._on_joined(notice)
        elif op == "left":
            self._on_left(notice)
        elif op == "error":
            self._on_error(notice)
        elif op == "welcome":
            log.debug("%s: welcomed by server %s", self.name, notice["server_id"])
        else:
            self.rejects.reject("malformed", f"unexpected session op {op!r}", "server")

    def _hold_early(self, message: ReceivedMessage) -> None:
        """A signed message from a client we have not yet been told joined: with direct
        routing its first frames can overtake the server's join notice. Keep it (bounded,
        briefly) and hand it over when the join arrives; reject it after that."""
        if len(self._early) >= MAX_EARLY_MESSAGES:
            self.rejects.reject("unknown_peer", f"sender {message.sender!r} is not a member "
                                f"(and {len(self._early)} early messages already wait)")
            return
        self._early.append((time.monotonic() + EARLY_WAIT, message))

    def _release_early(self, now: float | None = None) -> None:
        """Hand over early messages whose sender joined; reject the expired ones."""
        if not self._early:
            return
        members = set(self.node.members)
        keep: list[tuple[float, ReceivedMessage]] = []
        for due, message in self._early:
            if message.sender in members:
                self.stats["messages_received"] += 1
                self.node.arrived(message)
            elif now is not None and now >= due:
                self.rejects.reject("unknown_peer", f"sender {message.sender!r} is not a "
                                    f"member (waited {EARLY_WAIT:g}s for its join)")
            else:
                keep.append((due, message))
        self._early = keep
        self._drain_node()

    def _on_joined(self, notice: dict[str, Any]) -> None:
        if notice["client"] in self._departing:  # back under the same name: a new member
            self._complete_leave(notice["client"])
        addresses = notice["addresses"]
        if isinstance(addresses, dict):
            self._addresses.update({str(k): str(v) for k, v in addresses.items()})
        users = [str(u) for u in notice["all_users"]]
        self.node.client_joined(
            notice["client"],
            is_new_session=bool(notice["is_new_session"]),
            is_new_application=bool(notice["is_new_application"]),
            all_users=users,
        )
        if notice["client"] == self.name:
            self._joined.set()
        self._release_early()

    def _on_left(self, notice: dict[str, Any]) -> None:
        client = notice["client"]
        if client == self.name:
            self._left.set()
            return
        expected = notice.get("direct_frames")
        if isinstance(expected, bool) or not isinstance(expected, int):
            expected = 0  # left without saying (gone), or relayed only
        if self._direct_received[client] < expected:
            # its last direct frames are still on the way: keep it a member until they
            # are in, so that nothing it sent before leaving is refused as unknown
            log.debug("%s: %s left; waiting for %d more of its direct frames", self.name,
                      client, expected - self._direct_received[client])
            self._departing[client] = (expected, time.monotonic() + DEPART_WAIT)
            return
        self._complete_leave(client)

    def _expire_departing(self, now: float) -> None:
        for client, (expected, due) in list(self._departing.items()):
            if now >= due:
                missing = expected - self._direct_received[client]
                self.stats["departed_frames_missing"] += missing
                log.warning("%s: %s left; %d of the %d frames it sent here directly never "
                            "arrived (waited %gs)", self.name, client, missing, expected,
                            DEPART_WAIT)
                self._complete_leave(client)

    def _complete_leave(self, client: str) -> None:
        self._departing.pop(client, None)
        self._direct_received.pop(client, None)
        self._addresses.pop(client, None)
        self._drop_peer(client)
        self.node.client_left(client)

    def _on_error(self, notice: dict[str, Any]) -> None:
        detail = f"{notice['reason']}: {notice['detail']}"
        if not self._joined.is_set():
            self._join_error = detail
            self._joined.set()
            return
        if notice["reason"] == "not_a_member" and not self._closed:
            self._rejoin()
            return
        log.error("%s: server error: %s", self.name, detail)
        self.stats[f"server_error_{notice['reason']}"] += 1
