"""Causal stability: which operations every current member has delivered, learnt from
the tags of their operations (docs/replicated.md, "Causal stability")."""

from __future__ import annotations

from collections.abc import Iterable

from groupcomm.core.messages import Tag


class Stability:
    """Per member, the merge of the tags of its operations delivered here; a tag is
    stable when every current member's entry covers it."""

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
        for member in self.members:
            seen = self._seen.get(member, {})
            if any(seen.get(k, 0) < v for k, v in clock.items()):
                return False
        return True
