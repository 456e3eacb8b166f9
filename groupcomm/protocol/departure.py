"""The ``release_after`` policy, without I/O: what still waits on a member that left is
held (``release_after`` None) or delivered that many seconds after it left
(docs/sessions.md). :class:`Departures` keeps when each departed member's messages are
due; :class:`~groupcomm.protocol.client.ClientProtocol` releases them.
"""

from __future__ import annotations

__all__ = ["Departures"]


class Departures:
    """When to release what waits on each member that left. ``release_after``: None
    holds such messages; seconds: they are released that long after the member left."""

    def __init__(self, release_after: float | None) -> None:
        if release_after is not None and release_after < 0:
            raise ValueError("release_after must be >= 0 seconds (or None: hold)")
        self.release_after = release_after
        #: departed member -> when to release what still waits on it
        self.due: dict[str, float] = {}

    def __bool__(self) -> bool:
        """Some departed member's release is still to come (it waits on time)."""
        return bool(self.due)

    def left(self, member: str, now: float) -> None:
        """``member`` left at ``now``."""
        if self.release_after is not None:
            self.due[member] = now + self.release_after

    def ready(self, now: float) -> list[str]:
        """The departed members whose time came at ``now`` (their times are forgotten)."""
        ready = [member for member, due in self.due.items() if now >= due]
        for member in ready:
            del self.due[member]
        return ready
