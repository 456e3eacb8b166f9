"""Which session server a session meets at, without I/O (docs/deploy.md).

Placement is rendezvous (highest-random-weight) hashing of the session name over the
configured server list: every member computes the same order from the same list, the
first server in it is the session's home, and removing a server moves only the sessions
it was home to (each goes to its next server in order). :class:`Failover` is one
client's walk along that order when its server falls silent, and its way back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_PROBE_EVERY", "Failover", "rendezvous_order", "session_home"]

#: seconds between asks of the servers ranked before the one in use (a client that
#: moved goes back to the first one that answers)
DEFAULT_PROBE_EVERY = 5.0


def _weight(session: str, server: str) -> int:
    # a keyed hash, not Python's hash(): the same in every process and on every machine
    digest = hashlib.blake2b(f"{server}\x00{session}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_order(session: str, servers: Iterable[str]) -> tuple[str, ...]:
    """``servers`` (duplicates dropped) from the session's home to its last resort:
    highest weight first, ties by address so that the order never depends on the
    list's order. ``ValueError`` for an empty list."""
    unique = set(servers)
    if not unique:
        raise ValueError("no session server given")
    return tuple(sorted(unique, key=lambda s: (-_weight(session, s), s)))


def session_home(session: str, servers: Iterable[str]) -> str:
    """The server every member of ``session`` meets at while it answers."""
    return rendezvous_order(session, servers)[0]


class Failover:
    """One client's choice of server along a session's rendezvous order.

    The rule (the same in every member, so that they converge): use the first server in
    the order that answers. A client starts at the first one; when the one in use is
    silent for the client's silence limit (:meth:`silent`) it moves to the next one
    (after the last, back to the first); while not on the first, it asks the servers
    ranked before its own every ``probe_every`` seconds (:meth:`probes_due`) and moves to
    one that answers (:meth:`answered`). Members that see the same servers alive thus
    meet at the same one, and come back together when the home server returns.
    """

    def __init__(self, order: Sequence[str], *, probe_every: float = DEFAULT_PROBE_EVERY,
                 now: float = 0.0) -> None:
        if not order:
            raise ValueError("no session server given")
        if probe_every <= 0:
            raise ValueError(f"probe_every must be positive, not {probe_every!r}")
        self.order = tuple(order)
        self.index = 0
        self.probe_every = probe_every
        self._next_probe = now + probe_every
        #: moves made, by why: "silent" or "preferred"
        self.moves = {"silent": 0, "preferred": 0}

    @property
    def current(self) -> str:
        return self.order[self.index]

    def silent(self, now: float) -> str | None:
        """The server in use did not answer for the silence limit: the next one to use,
        or None when there is no other."""
        if len(self.order) == 1:
            return None
        self.index = (self.index + 1) % len(self.order)
        self.moves["silent"] += 1
        self._next_probe = now + self.probe_every
        return self.current

    def probes_due(self, now: float) -> tuple[str, ...]:
        """The servers ranked before the one in use, when it is time to ask them again
        (else nothing)."""
        if self.index == 0 or now < self._next_probe:
            return ()
        self._next_probe = now + self.probe_every
        return self.order[:self.index]

    def answered(self, server: str) -> str | None:
        """``server`` answered a probe: the server to move to (it, when ranked before the
        one in use), or None to stay."""
        if server not in self.order[:self.index]:
            return None
        self.index = self.order.index(server)
        self.moves["preferred"] += 1
        return self.current
