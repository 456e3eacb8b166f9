"""The text sequence as it was before runs and blocks: one list item per character,
re-indexed on every insert (O(n) an edit). Kept as the reference model that the tests
compare :class:`groupcomm.replicated.TextSequence` with; not used by the package."""

from __future__ import annotations

from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.runs import op_kind as _kind
from groupcomm.replicated.stability import Stability

#: the timestamp of a character whose insert is causally stable: smaller than any other
STABLE = (0, "")


class ReferenceText:
    """An op-based sequence of characters (RGA, Roh et al. 2011), for shared text.

    Every inserted character is identified by the id of the message that inserted it
    (``message.app_message_id``; the k-th character of a run typed or pasted at once is
    ``id+k``) and ordered by a timestamp taken from its tag: the sum of the tag's clock
    (larger for a send that happened after another), ties broken by the id. An insert
    names the character it goes after (``None``: the start); among inserts after the
    same character the one with the larger timestamp comes first, so concurrent inserts
    at one place end in the same order everywhere. The characters of one run follow
    each other: nothing can have been inserted after one of them before the run itself
    was delivered. A delete hides characters and keeps them as tombstones, so inserts
    that refer to them still find their place; an insert concurrent with a delete of its
    left neighbour survives. Causal delivery guarantees that the characters an operation
    names have been delivered first; without it an operation can name one that is not
    here yet, and :meth:`effect` raises ``ValueError`` (the operation fails, nothing
    changes).
    """

    def __init__(self) -> None:
        #: [id, timestamp, character, tag of its delete or None, tag of its insert or
        #: None once stable] in document order, tombstones included
        self._items: list[list[Any]] = []
        self._index: dict[str, int] = {}

    # -- operations ----------------------------------------------------------------------
    def prepare_insert(self, position: int, text: str) -> tuple[str, str | None, str]:
        """Insert ``text`` (one or more characters) so that its first character becomes
        visible character number ``position``."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"insert at least one character, got {text!r}")
        length = self.visible_length()
        if not 0 <= position <= length:
            raise ValueError(f"position {position} is outside the text (0..{length})")
        return ("insert", self.anchor(position), text)

    def prepare_delete(self, position: int, count: int = 1) -> tuple[str, str | tuple[str, ...]]:
        """Delete ``count`` visible characters from ``position`` on."""
        visible = self._visible()
        if count < 1 or not 0 <= position <= len(visible) - count:
            raise ValueError(f"no {count} character(s) at position {position} "
                             f"(the text has {len(visible)})")
        ids = tuple(item[0] for item in visible[position:position + count])
        return ("delete", ids[0] if count == 1 else ids)

    def effect(self, op: Any, tag: Tag, op_id: str, sender: str) -> None:
        inserting = isinstance(op, tuple) and len(op) > 0 and op[0] == "insert"
        kind = _kind(op, ("insert", "delete"), 3 if inserting else 2)
        if kind == "delete":
            self._delete(op[1], tag)
            return
        _, after, text = op
        if not isinstance(text, str) or not text:
            raise ValueError(f"an insert carries at least one character, got {text!r}")
        if op_id in self._index:
            raise ValueError(f"{op_id} inserted twice")
        if after is None:
            place = 0
        elif after in self._index:
            place = self._index[after] + 1
        else:
            raise ValueError(f"insert after {after}, which has not been inserted here")
        stamp = (sum(tag.clock.values()), op_id)
        items = self._items
        while place < len(items) and items[place][1] > stamp:
            place += 1
        run = [[op_id, stamp, ch, None, tag] if k == 0 else
               [f"{op_id}+{k}", stamp, ch, None, tag] for k, ch in enumerate(text)]
        items[place:place] = run
        index = self._index
        for k in range(place, len(items)):
            index[items[k][0]] = k

    def _delete(self, target: Any, tag: Tag) -> None:
        ids = (target,) if isinstance(target, str) else target
        if not isinstance(ids, tuple) or not ids or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"a delete names characters by id, got {target!r:.80}")
        missing = [i for i in ids if i not in self._index]
        if missing:
            raise ValueError(f"delete of {missing[0]}, which has not been inserted here")
        for i in ids:
            item = self._items[self._index[i]]
            if item[3] is None:
                item[3] = tag

    # -- reading ---------------------------------------------------------------------------
    def _visible(self) -> list[list[Any]]:
        return [item for item in self._items if item[3] is None]

    def visible_length(self) -> int:
        return sum(1 for item in self._items if item[3] is None)

    @property
    def value(self) -> str:
        return "".join(item[2] for item in self._items if item[3] is None)

    @property
    def tombstones(self) -> int:
        return sum(1 for item in self._items if item[3] is not None)

    def __len__(self) -> int:
        """Characters kept, tombstones included (the metadata :meth:`collect` bounds)."""
        return len(self._items)

    def anchor(self, position: int) -> str | None:
        """The id of the visible character just before ``position`` (``None``: the
        start): a place in the text that stays put while others edit around it."""
        if position <= 0:
            return None
        seen = 0
        for item in self._items:
            if item[3] is None:
                seen += 1
                if seen == position:
                    return item[0]
        raise ValueError(f"position {position} is outside the text (0..{seen})")

    def position(self, anchor: str | None) -> int | None:
        """Where ``anchor`` (from :meth:`anchor`) is now: the number of visible
        characters up to and including it; ``None`` if it is not (or no longer) here."""
        if anchor is None:
            return 0
        where = self._index.get(anchor)
        if where is None:
            return None
        return sum(1 for item in self._items[:where + 1] if item[3] is None)

    # -- state transfer --------------------------------------------------------------------
    def state(self) -> list[list[Any]]:
        """Everything a newcomer needs to continue from this replica (a copy)."""
        return [list(item) for item in self._items]

    @classmethod
    def from_state(cls, state: Any) -> ReferenceText:
        """A replica continuing from :meth:`state` of another; ``ValueError`` if it
        does not have that shape."""
        if not isinstance(state, list) or not all(
                isinstance(item, list) and len(item) == 5 and isinstance(item[0], str)
                and isinstance(item[1], tuple) and isinstance(item[2], str)
                and len(item[2]) == 1 and (item[3] is None or isinstance(item[3], Tag))
                and (item[4] is None or isinstance(item[4], Tag)) for item in state):
            raise ValueError("not the state of a TextSequence")
        text = cls()
        text._items = [list(item) for item in state]
        text._index = {item[0]: k for k, item in enumerate(text._items)}
        return text

    def collect(self, stability: Stability) -> int:
        """Forget what causal stability makes useless; returns how many tombstones went.

        Once an insert is stable (every member has delivered it), every operation still
        to come happened after it: a later insert at the same place has a larger
        timestamp anyway, so the character's timestamp and tag are replaced by
        :data:`STABLE`, which stops the placement scan just as the real one would. A
        tombstone whose delete is stable is never named again; it goes when the
        character after it is stable too (or it is the last): the scan stopped at it
        and now stops at that character, one place later among tombstones only, so
        every insert still lands between the same visible characters.
        """
        is_stable = stability.is_stable
        for item in self._items:
            if item[4] is not None and is_stable(item[4]):
                item[1], item[4] = STABLE, None
        kept_reversed: list[list[Any]] = []
        for item in reversed(self._items):
            if (item[3] is not None and item[4] is None
                    and (not kept_reversed or kept_reversed[-1][4] is None)
                    and is_stable(item[3])):
                continue
            kept_reversed.append(item)
        dropped = len(self._items) - len(kept_reversed)
        if dropped:
            self._items = kept_reversed[::-1]
            self._index = {item[0]: k for k, item in enumerate(self._items)}
        return dropped
