"""``cykas``: sender-side causal order with eager sends and secret mode (004 §2.2). The
state (OB, UNACK, MODE, EAGER_SENT, named as in the paper) and the rules:
docs/protocols.md.

Choices where the source is silent:

* Multicasts are sent as successive unicasts (``unicast_events``); self-addressed copies
  are delivered through the local loop in OB order, with no ACK.
* MODE is also kept per eager sender (``yct_from``), so that a peer leaving while we wait
  for its YCT does not leave us in secret mode for ever. A departed peer's ACK counts as
  received; unsent messages to it, and one that reaches the head of OB after it left, are
  dropped and counted in ``stats["undeliverable"]``.
* The paper's group is fixed. Here UNACK, EAGER_SENT and MODE only name members that
  existed when each entry was made, so a join changes no existing wait and adds none.

``CykasSecretSendsModule`` (``cykas-secret-sends``) is the broken variant of 004 §2.3: in
secret mode it still sends to the peer that put it there (Figure 3 of the paper).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable

from groupcomm.module_kit import (
    CausalityError,
    CausalityManager,
    CausalityModule,
    FilterHost,
    GroupMessage,
    ProtocolViolation,
    ReceivedMessage,
    SentMessage,
    control_message,
    drop_unsent_to,
    gone_before_sending,
)

log = logging.getLogger(__name__)

NAME = "cykas"


class CykasManager(CausalityManager):
    """OB, UNACK, MODE and EAGER_SENT of one process."""

    #: the known-bad variant sends to its eager sender while in secret mode
    secret_sends = False
    protocol = NAME

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.ob: deque[SentMessage] = deque()
        self.unack: dict[str, str] = {}
        self.mode = 0
        self.yct_from: dict[str, int] = {}
        self.eager_sent: dict[str, deque[set[str]]] = {}

    # -- sending ------------------------------------------------------------------------
    def on_send(self, message: SentMessage) -> None:
        """Append to OB, then try to send."""
        if len(message.destinations) != 1:
            raise CausalityError(f"{self.protocol}: {message.message_id} must have one "
                                 "destination (the node splits multicasts for this module)")
        self.ob.append(message)
        if not self.try_send(first=message):
            self.host.trace("buffer", message, side="send", waiting_for=self._blockers())

    def try_send(self, first: SentMessage | None = None) -> bool:
        """Send from the head of OB while the rules allow (after every send, ACK and
        YCT); True when ``first`` (just enqueued) went out at once."""
        me = self.host.name
        sent_first = False
        while self.ob:
            message = self.ob[0]
            (dest,) = message.destinations
            if self.mode > 0 and not (dest == me or (self.secret_sends
                                                      and self.yct_from.get(dest, 0) > 0)):
                break
            if dest in self.unack:
                break
            self.ob.popleft()
            if message is first:
                sent_first = True
            else:
                self.host.trace("unbuffer", message, side="send")
            if gone_before_sending(self, message):
                continue
            if dest == me:
                self.send_downstream(message)
                continue
            if self.unack:
                awaited = set(self.unack) | {dest}
                self.eager_sent.setdefault(dest, deque()).append(awaited)
                message = message.replace(kind="eager")  # type: ignore[assignment]
            self.unack[dest] = message.message_id
            self.send_downstream(message)
        return sent_first

    def _blockers(self) -> list[str]:
        if not self.ob:
            return []
        (dest,) = self.ob[0].destinations
        if self.mode > 0:
            return sorted(p for p, n in self.yct_from.items() if n > 0)
        return [dest] if dest in self.unack else []

    # -- receiving ----------------------------------------------------------------------
    def on_receive(self, message: ReceivedMessage) -> None:
        """Deliver at once and ACK; an eager message puts this process in secret mode."""
        sender = message.sender
        if message.kind not in ("normal", "eager"):
            raise ProtocolViolation(
                f"{self.protocol}: {message.message_id} from {sender} has kind "
                f"{message.kind!r}; expected normal or eager"
            )
        if sender != self.host.name:
            if message.kind == "eager":
                self.mode += 1
                self.yct_from[sender] = self.yct_from.get(sender, 0) + 1
            self.send_downstream(
                control_message(self, self.protocol, "ack", sender, about=message.message_id)
            )
        self.deliver_upstream(message)

    def on_control(self, message: ReceivedMessage) -> None:
        kind = message.user_message.kind
        if kind == "ack":
            self.on_ack(message)
        elif kind == "yct":
            self.on_yct(message)
        else:
            super().on_control(message)

    def on_ack(self, message: ReceivedMessage) -> None:
        sender = message.sender
        about = message.user_message.about
        if self.unack.get(sender) != about:
            raise ProtocolViolation(
                f"{self.protocol}: unexpected ack from {sender} for {about!r} "
                f"(awaiting {self.unack.get(sender)!r})"
            )
        self._acked(sender)
        self.try_send()

    def _acked(self, peer: str) -> None:
        self.unack.pop(peer, None)
        for waiting in self.eager_sent.values():
            for awaited in waiting:
                awaited.discard(peer)
        for target in sorted(self.eager_sent):
            queue = self.eager_sent[target]
            while queue and not queue[0]:
                queue.popleft()
                if target in self.members or target == self.host.name:
                    self.send_downstream(control_message(self, self.protocol, "yct", target))
            if not queue:
                del self.eager_sent[target]

    def on_yct(self, message: ReceivedMessage) -> None:
        sender = message.sender
        if self.yct_from.get(sender, 0) < 1:
            raise ProtocolViolation(
                f"{self.protocol}: unexpected yct from {sender} (not in secret mode for it)"
            )
        self._yct(sender)
        self.try_send()

    def _yct(self, peer: str) -> None:
        self.yct_from[peer] -= 1
        if not self.yct_from[peer]:
            del self.yct_from[peer]
        self.mode -= 1

    # -- membership ---------------------------------------------------------------------
    def member_removed(self, name: str) -> None:
        self.ob = drop_unsent_to(self, self.ob, name, log)
        self.eager_sent.pop(name, None)  # no YCT can reach it any more
        if name in self.unack:
            self._acked(name)
        while self.yct_from.get(name, 0):
            log.info("%s: %s left while we waited for its YCT; leaving secret mode for it",
                     self.host.name, name)
            self._yct(name)
        self.try_send()

    # -- introspection ------------------------------------------------------------------
    def held(self) -> list[GroupMessage]:
        return list(self.ob)

    def holds_sends(self) -> bool:
        return bool(self.ob)

    def waiting_for(self) -> dict[str, list[str]]:
        blockers = self._blockers()
        return {m.message_id: blockers for m in self.ob}

    def snapshot(self) -> Hashable:
        return (
            tuple(self.ob),
            tuple(sorted(self.unack.items())),
            self.mode,
            tuple(sorted(self.yct_from.items())),
            tuple((p, tuple(tuple(sorted(s)) for s in q))
                  for p, q in sorted(self.eager_sent.items())),
            self.control_count,
        )

    def restore(self, snapshot: Hashable) -> None:
        ob, unack, self.mode, yct_from, eager, self.control_count = snapshot  # type: ignore[misc]
        self.ob = deque(ob)
        self.unack = dict(unack)
        self.yct_from = dict(yct_from)
        self.eager_sent = {p: deque(set(s) for s in q) for p, q in eager}


class CykasSecretSendsManager(CykasManager):
    """The known-bad variant (004 §2.3): sends to its eager sender in secret mode."""

    secret_sends = True
    protocol = "cykas-secret-sends"


class CykasModule(CausalityModule):
    name = NAME
    manager_class = CykasManager
    description = "sender-side causal order with eager sends and secret mode (Cykas)"
    unicast_events = True
    acknowledged_sends = True
    symmetry_headers = {}


class CykasSecretSendsModule(CykasModule):
    name = "cykas-secret-sends"
    manager_class = CykasSecretSendsManager
    description = "KNOWN BAD (Cykas paper, §2.3): cykas that sends to its eager sender in secret mode"
    known_bad = True
    symmetry_headers = {}
