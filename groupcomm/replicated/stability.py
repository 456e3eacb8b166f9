"""Causal stability: which operations every current member has delivered, learnt from
the tags of their operations and from their acknowledgements of their clocks
(docs/replicated.md, "Causal stability")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from groupcomm.core.messages import Tag


class Stability:
    """Per member, the merge of the tags of its operations delivered here; a tag is
    stable when every current member's entry covers it, that is when the *frontier*
    (per entry, the least any current member's merge holds) covers it."""

    def __init__(self, me: str, members: Iterable[str]) -> None:
        self.me = me
        self.members = set(members) | {me}
        self._seen: dict[str, dict[str, int]] = {m: {} for m in self.members}
        self._frontier: dict[str, int] | None = None  # None: to be worked out again

    def delivered(self, sender: str, tag: Tag) -> None:
        """An operation of ``sender`` with ``tag`` took effect here (own ones too)."""
        clock = tag.clock
        self.merge(sender, clock)
        if sender != self.me:
            self.merge(self.me, clock)

    def acknowledged(self, member: str, clock: Mapping[str, int]) -> bool:
        """``member`` said its application had delivered what ``clock`` covers (an
        acknowledgement, not an operation: it says nothing of what this member has
        delivered). True when its merge moved; one from a non-member is ignored."""
        if member not in self.members or member not in self._seen:
            return False
        return self.merge(member, clock)

    def merge(self, who: str, clock: Mapping[str, int]) -> bool:
        """Merge ``clock`` into what ``who`` is known to have delivered; True when it
        moved (the frontier is then worked out again)."""
        seen = self._seen.setdefault(who, {})
        moved = False
        for k, v in clock.items():
            if seen.get(k, 0) < v:
                seen[k] = v
                moved = True
        if moved:
            self._frontier = None
        return moved

    def member_joined(self, member: str) -> None:
        self.members.add(member)
        self._seen.setdefault(member, {})
        self._frontier = None

    def member_left(self, member: str) -> None:
        self.members.discard(member)
        self._seen.pop(member, None)
        self._frontier = None

    def frontier(self) -> dict[str, int]:
        """Per entry, the least that every current member's merge covers (kept until a
        delivery or a membership change moves it)."""
        if self._frontier is None:
            seens = [self._seen.get(m, {}) for m in self.members]
            self._frontier = {k: min(seen.get(k, 0) for seen in seens)
                              for k in set().union(*seens)}
        return self._frontier

    def is_stable(self, tag: Tag) -> bool:
        frontier = self.frontier()
        return all(frontier.get(k, 0) >= v for k, v in tag.clock.items())
