"""A session server that stalled (stopped with SIGSTOP, swapped out, its machine
suspended) and resumes: what it does with the members it still lists (docs/deploy.md,
"Failover").

While the server did not run, its members heard nothing from it; past their silence limit
(2 s) they moved to the next server of their session and went on there. The resumed
server must not report them as gone: they would come back to it (once it answers their
probes) as new member ids, their old ids retired. The host ticks the registry at least
every quarter of the heartbeat timeout while it runs, so a gap between two ticks longer
than the heartbeat timeout is a stall. After one, the registry holds its silence
timeouts for a heartbeat timeout (a member still attached sends a heartbeat meanwhile);
then a session none of whose members was heard in the second half of that hold (what
arrives at once on the resumption is what waited in the connections during the stall,
not proof that its sender is still attached) is forgotten as a restarted server forgets it: no departure notices (nobody here would receive them), and
the names' incarnations are kept only as a floor for new processes, so that the members
that moved come back under their ids. A session with a member heard since the
resumption goes on by the usual rules (its silent members time out). A member that comes
back during the hold, under its incarnation, while its old connection is silent, is
taken back under its id at once (the registry's ``_back_after_stall``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StallWatch:
    """Notices stalls from the times of the host's ticks."""

    #: the longest gap between two ticks of a running host (the heartbeat timeout)
    limit: float
    #: the time of the previous tick
    last_tick: float | None = None
    #: the tick that found the host had stalled (None: no stall being handled)
    resumed_at: float | None = None
    stalls: int = 0

    def tick(self, now: float) -> str:
        """``"running"``; ``"holding"`` while silence must not count (a stall ended less
        than ``limit`` ago); ``"decide"`` once at the end of that hold, when the caller
        forgets the sessions nobody spoke in since :meth:`attached_after`."""
        previous, self.last_tick = self.last_tick, now
        if previous is not None and now - previous > self.limit:
            self.resumed_at = now
            self.stalls += 1
            return "holding"
        if self.resumed_at is None:
            return "running"
        if now - self.resumed_at < self.limit:
            return "holding"
        return "decide"

    def attached_after(self) -> float:
        """A member heard after this is still attached to the host (its heartbeats go
        on); what was heard earlier may have been sent before the stall ended."""
        assert self.resumed_at is not None
        return self.resumed_at + self.limit / 2

    def decided(self) -> None:
        self.resumed_at = None
