"""Causal stability: which operations every current member has delivered.

A message's tag is its sender's application clock at the send, so it says which
operations the sender had delivered by then. This replica keeps, per member, the merge
of the tags of that member's operations it delivered (and its own clock for itself). An
operation is *stable* when every current member's entry covers its tag: everyone has
delivered it, and (causal delivery) nothing concurrent with it is still on its way
here. The types use it to drop what they keep only for concurrent operations
(:meth:`TextSequence.collect` drops tombstones). A member that never sends keeps
everything unstable; a member that leaves stops counting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from groupcomm.core.messages import Tag


def _covers(seen: Mapping[str, int], clock: Mapping[str, int]) -> bool:
    return all(seen.get(k, 0) >= v for k, v in clock.items())


class Stability:
    """What each member is known to have delivered, from the tags of its operations."""

    def __init__(self, me: str, members: Iterable[str]) -> None:
        self.me = me
        self.members = set(members) | {me}
        self._seen: dict[str, dict[str, int]] = {m: {} for m in self.members}

    def delivered(self, sender: str, tag: Tag) -> None:
        """An operation of ``sender`` with ``tag`` took effect here (own ones too)."""
        for who in {sender, self.me}:
            seen = self._seen.setdefault(who, {})
            for k, v in tag.clock.items():
                if seen.get(k, 0) < v:
                    seen[k] = v

    def member_joined(self, member: str) -> None:
        self.members.add(member)
        self._seen.setdefault(member, {})

    def member_left(self, member: str) -> None:
        self.members.discard(member)
        self._seen.pop(member, None)

    def is_stable(self, tag: Tag) -> bool:
        clock = tag.clock
        return all(_covers(self._seen.get(m, {}), clock) for m in self.members)
