"""The communicator's outbound path: from the send pipeline's end to the sockets.

Messages leaving the send pipeline (:meth:`Outbox._transmit`) are queued per destination
set and encoded, signed and sent once per turn of the I/O loop, or once
:data:`MAX_OUTBOX_MESSAGES` wait: a burst becomes one frame per destination set.
``relayed`` routing sends each frame to the server with a signed relay command;
``direct`` routing pushes it to each peer's PULL socket. Injected delays (testing) hold
serialized messages per peer. A frame a socket cannot take yet waits in that socket's
ordered backlog. Runs on the I/O thread.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque

import zmq

from groupcomm.core.messages import SentMessage, Withdrawn
from groupcomm.transport.delays import DelayPlan
from groupcomm.wire.envelopes import (
    PackedEnvelope,
    PayloadTooLarge,
    pack_envelope,
    pack_envelopes,
)
from groupcomm.wire.session import seal_session

# the communicator's logger: its messages keep the name they always had
log = logging.getLogger("groupcomm.transport.communicator")

#: A frame carries at most this many bytes of messages (and at most half the maximum
#: frame size, so that receivers never refuse a batch that single messages would pass).
MAX_BATCH_BYTES = 512 * 1024
#: Messages queued for the network are encoded and sent once this many wait (otherwise
#: once per turn of the I/O loop).
MAX_OUTBOX_MESSAGES = 4096
#: bytes of a frame that are not the message envelope: the body's head (application,
#: session and sender names) and the signature
FRAME_HEADROOM = 4096


class Outbox:
    """Batching, routing, delays and backlogs, a part of
    :class:`~groupcomm.transport.communicator.Communicator` (I/O thread)."""

    def _init_outbox(self, max_frame: int) -> None:
        self.delays = DelayPlan()
        # messages waiting to leave, by destination tuple; flushed once per loop turn so
        # that a burst of sends is encoded in one call and becomes one signed frame per
        # destination set (see _flush_outbox)
        self._outbox: dict[tuple[str, ...], list[SentMessage | PackedEnvelope]] = {}
        self._outbox_count = 0
        self._batch_budget = min(MAX_BATCH_BYTES, max_frame // 2)
        #: the largest message envelope a frame carries (room left for the body's head
        #: and the signature)
        self._frame_limit = max_frame - min(FRAME_HEADROOM, max_frame // 8)
        # frames a socket could not take yet (a slow peer), per socket, in order
        self._backlogs: dict[zmq.Socket, deque[list[bytes]]] = {}
        self._backlog_frames = 0
        #: PUSH socket per peer (direct routing), connected on the first frame
        self._pushes: dict[str, zmq.Socket] = {}
        #: frames pushed directly to each peer; a graceful leave carries these counts,
        #: so receivers know when a leaver's last direct frame has arrived
        self._direct_sent: Counter[str] = Counter()

    def _transmit(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        # queued as is: encoding waits for _flush_outbox, which encodes the whole batch
        # in one call (this runs for every message sent)
        self.stats["messages_sent"] += len(dests)
        if self.delays.active:
            self._transmit_delayed(message, dests)
            return
        outbox = self._outbox
        if len(dests) == 1 or self.routing == "relayed":  # one frame carries it
            queued = outbox.get(dests)
            if queued is None:
                outbox[dests] = [message]
            else:
                queued.append(message)
        else:  # direct multicast: one frame per peer, the message serialized once
            envelope = self._pack_one(message)
            for dest in dests:
                outbox.setdefault((dest,), []).append(envelope)
        self._outbox_count += 1
        if self._outbox_count >= MAX_OUTBOX_MESSAGES:
            self._flush_outbox()

    def _transmit_delayed(self, message: SentMessage, dests: tuple[str, ...]) -> None:
        """Injected delays (testing): the message is serialized now, as when it leaves
        at once, and waits per peer in the delay plan."""
        envelope = self._pack_one(message)
        now = time.monotonic()
        ready = tuple(d for d in dests if not self.delays.schedule(now, d, envelope))
        if not ready:
            return
        outbox = self._outbox
        if self.routing == "relayed":
            outbox.setdefault(ready, []).append(envelope)
        else:
            for dest in ready:
                outbox.setdefault((dest,), []).append(envelope)
        self._outbox_count += 1
        if self._outbox_count >= MAX_OUTBOX_MESSAGES:
            self._flush_outbox()

    def _unencodable(self, message: SentMessage, error: Exception) -> SentMessage:
        """A message whose payload cannot travel (not serializable, or too large for a
        frame): reported undeliverable, and a stand-in with the same id and headers goes
        instead, so that the receivers' causality modules do not wait for it for ever."""
        self.stats["unencodable"] += 1
        log.error("%s: message %s cannot be sent (%s); its receivers get a stand-in that "
                  "keeps the causal order", self.name, message.message_id, error)
        self._report_undeliverable([message.message_id], f"could not send them: {error}")
        return message.replace(user_message=Withdrawn(f"{type(error).__name__}: {error}"))

    def _pack_one(self, message: SentMessage) -> PackedEnvelope:
        """:func:`pack_envelope`, with a stand-in for a payload that cannot travel."""
        try:
            envelope = pack_envelope(message)
            if len(envelope[1]) > self._frame_limit:
                raise PayloadTooLarge(len(envelope[1]), self._frame_limit)
        except Exception as error:
            envelope = pack_envelope(self._unencodable(message, error))
        return envelope

    def _flush_outbox(self) -> None:
        """Encode, sign and send what is queued: per destination set, the messages in
        one call (:func:`~groupcomm.wire.pack_envelopes`), one frame per batch. Relayed
        frames wait while the server does not know this client (it restarted, and the
        rejoin is not accepted yet): it would return them."""
        if self.routing == "relayed" and not self.membership.may_relay:
            return
        outbox, self._outbox, self._outbox_count = self._outbox, {}, 0
        relayed = self.routing == "relayed"
        seal = self.codec.seal
        for dests, items in outbox.items():
            for body in pack_envelopes(items, self._batch_budget, self._unencodable,
                                       self._frame_limit):
                frame = seal(body)
                if relayed:
                    self._relay(frame, list(dests))
                else:
                    for dest in dests:
                        self._push(dest, frame)

    def _relay(self, frame: bytes, dests: list[str]) -> None:
        command = seal_session(self.codec, "relay", client=self.name,
                               application=self.application, session=self.session,
                               dests=dests)
        # frames_sent / frame_bytes_sent: what this member puts on the wire for message
        # frames (a relayed one is one frame, its relay command's bytes included)
        stats = self.stats
        stats["frames_sent"] += 1
        stats["frame_bytes_sent"] += len(command) + len(frame)
        self._send_parts(self._dealer, [command, frame])

    def _push(self, peer: str, frame: bytes) -> None:
        socket = self._pushes.get(peer)
        if socket is None:
            address = self.membership.addresses.get(peer)
            if not address:
                self.stats["undeliverable"] += 1
                log.error("%s: no direct address for %r; frame dropped", self.name, peer)
                return
            socket = self._context.socket(zmq.PUSH)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(address)
            self._pushes[peer] = socket
        self._direct_sent[peer] += 1
        stats = self.stats
        stats["frames_sent"] += 1
        stats["frame_bytes_sent"] += len(frame)
        self._send_parts(socket, [frame])

    def _send_parts(self, socket: zmq.Socket, parts: list[bytes]) -> None:
        """Send without blocking; what the socket cannot take now waits, in order."""
        backlog = self._backlogs.get(socket)
        if not backlog:
            timeline = self.frame_timeline
            if timeline is not None:
                timeline.append(("send", time.perf_counter_ns()))
            try:
                if len(parts) == 1:  # the common frame: one layer of pyzmq less
                    socket.send(parts[0], zmq.NOBLOCK)
                else:
                    socket.send_multipart(parts, zmq.NOBLOCK)
                if timeline is not None:
                    timeline.append(("sent", time.perf_counter_ns()))
                return
            except zmq.Again:
                backlog = self._backlogs.setdefault(socket, deque())
        backlog.append(parts)
        self._backlog_frames += 1

    def _flush_backlogs(self) -> None:
        for socket, backlog in list(self._backlogs.items()):
            while backlog:
                try:
                    socket.send_multipart(backlog[0], zmq.NOBLOCK)
                except zmq.Again:
                    break
                except zmq.ZMQError:  # the socket was closed (the peer left)
                    self._backlog_frames -= len(backlog)
                    backlog.clear()
                    break
                backlog.popleft()
                self._backlog_frames -= 1
            if not backlog:
                del self._backlogs[socket]

    def _drop_peer(self, peer: str) -> None:
        """Forget ``peer``'s link (it left): its frame count, its socket and its backlog."""
        self._direct_sent.pop(peer, None)  # a later member of that name counts anew
        push = self._pushes.pop(peer, None)
        if push is not None:
            dropped = self._backlogs.pop(push, None)
            if dropped:
                self._backlog_frames -= len(dropped)
            push.close(linger=0)
