"""The shared text: an RGA sequence kept as runs in blocks, so an edit costs O(log n + B)
(docs/replicated.md, "How the text is stored")."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.blocks import BlockList
from groupcomm.replicated.collection import Pending
from groupcomm.replicated.ids import IdIndex
from groupcomm.replicated.runs import STABLE, Run, check_int, op_kind
from groupcomm.replicated.stability import Stability
from groupcomm.replicated.text_state import RunRow, read_state, state_of

__all__ = ["STABLE", "TextSequence"]


class TextSequence:
    """An op-based sequence of characters (RGA, Roh et al. 2011); its rules:
    docs/replicated.md, "The types and their rules".

    A character is named by the id of the message that inserted it (the k-th of a run
    inserted at once: ``id+k``). Operations: ``("insert", after_id_or_None, text)`` and
    ``("delete", id)`` or ``("delete", (id, id, ...))``.
    """

    def __init__(self) -> None:
        self._blocks = BlockList()
        self._ids = IdIndex()
        #: the operations and tombstones collection waits for
        self._pending = Pending()
        self._visible = 0
        self._total = 0

    def prepare_insert(self, position: int, text: str) -> tuple[str, str | None, str]:
        """Insert ``text`` so that its first character becomes visible character
        number ``position``."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"insert at least one character, got {text!r}")
        check_int(position, "a position")
        length = self._visible
        if not 0 <= position <= length:
            raise ValueError(f"position {position} is outside the text (0..{length})")
        return ("insert", self.anchor(position), text)

    def prepare_delete(self, position: int, count: int = 1) -> tuple[str, str | tuple[str, ...]]:
        """Delete ``count`` visible characters from ``position`` on."""
        check_int(position, "a position")
        check_int(count, "a count")
        length = self._visible
        if count < 1 or not 0 <= position <= length - count:
            raise ValueError(f"no {count} character(s) at position {position} "
                             f"(the text has {length})")
        first, k = self._blocks.char_at(position)
        if count == 1:
            return ("delete", first.char_id(k))
        ids: list[str] = []
        for run in self._blocks.runs_from(first):
            if run.deleted is not None:
                continue
            for j in range(k, len(run.text)):
                ids.append(run.char_id(j))
                if len(ids) == count:
                    return ("delete", tuple(ids))
            k = 0
        raise AssertionError("the visible count and the runs disagree")

    def effect(self, op: Any, tag: Tag, op_id: str, sender: str) -> None:
        """Apply an operation with the tag, id and sender of its message (the member
        whose entry of the tag counts it); ``ValueError`` (and no change) for one of the
        wrong shape or that names a character not here (without causal delivery)."""
        inserting = isinstance(op, tuple) and len(op) > 0 and op[0] == "insert"
        kind = op_kind(op, ("insert", "delete"), 3 if inserting else 2)
        if kind == "delete":
            self._delete(op[1], tag)
            self._pending.applied(tag, None, sender)
            return
        _, after, text = op
        if not isinstance(text, str) or not text:
            raise ValueError(f"an insert carries at least one character, got {text!r}")
        if not isinstance(op_id, str) or not op_id:
            raise ValueError(f"an insert's id is a non-empty string, got {op_id!r:.80}")
        ids = self._ids
        if op_id in ids.ops or ids.in_chain(op_id) is not None:
            raise ValueError(f"{op_id} inserted twice")
        found = None
        if after is not None:
            found = ids.locate(after)
            if found is None:
                raise ValueError(f"insert after {after}, which has not been inserted here")
        clock = tag.clock
        total = sum(clock.values())
        stamp = (total, op_id)
        blocks = self._blocks.blocks
        if found is None:
            block, i = blocks[0], 0
        else:
            run, k = found
            block = run.block
            i = block.runs.index(run) + 1
            # the rest of ``after``'s run is skipped like a later sibling if it is larger
            if k < len(run.text) - 1 and (run.tag is None or (run.sum, run.op) < stamp):
                self._split(run, k + 1)
        # skip the runs inserted after the same character with a larger timestamp (and
        # what follows them), as RGA does; a stable run's is the smallest
        while True:
            runs = block.runs
            count = len(runs)
            while i < count:
                other = runs[i]
                if other.tag is None or (other.sum, other.op) < stamp:
                    break
                i += 1
            if i < count or block.index + 1 == len(blocks):
                break
            block, i = blocks[block.index + 1], 0
        run = Run(op_id, 0, text, total, tag, None, block)
        self._blocks.place(run, block, i)
        self._visible += len(text)
        self._total += len(text)
        ids.ops[op_id] = run
        self._pending.applied(tag, op_id, sender)

    def _delete(self, target: Any, tag: Tag) -> None:
        ids = (target,) if isinstance(target, str) else target
        if not isinstance(ids, tuple) or not ids or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"a delete names characters by id, got {target!r:.80}")
        # every id is found before anything changes; consecutive ids make one range, so
        # a long delete splits each run at most twice
        ranges: list[list[Any]] = []
        locate = self._ids.locate
        for ident in ids:
            found = locate(ident)
            if found is None:
                raise ValueError(f"delete of {ident}, which has not been inserted here")
            run, k = found
            offset = run.start + k
            last = ranges[-1] if ranges else None
            if (last is not None and last[0] == run.op and last[1] == run.chain
                    and last[3] == offset):
                last[3] = offset + 1
            else:
                ranges.append([run.op, run.chain, offset, offset + 1])
        for op, chain, low, high in ranges:
            self._hide(op, chain, low, high, tag)

    def _hide(self, op: str, chain: bool, low: int, high: int, tag: Tag) -> None:
        """Mark characters ``low..high`` of insert (or chain prefix) ``op`` deleted by
        ``tag`` (those already deleted keep their first delete)."""
        for run in self._ids.pieces(op, chain, low, high):
            end = run.start + len(run.text)
            first, last = max(low, run.start), min(high, end)
            if first >= last or run.deleted is not None:
                continue
            if last < end:
                self._split(run, last - run.start)
            if first > run.start:
                run = self._split(run, first - run.start)
            run.deleted = tag
            self._pending.deleted(tag, run)
            self._visible -= len(run.text)
            self._blocks.hidden(run)

    def _split(self, run: Run, k: int) -> Run:
        """Cut ``run`` before its ``k``-th character; returns the second part (the block
        may grow past its limit: the caller splits it)."""
        right = Run(run.op, run.start + k, run.text[k:], run.sum, run.tag, run.deleted,
                    run.block, run.chain)
        run.text = run.text[:k]
        runs = run.block.runs
        runs.insert(runs.index(run) + 1, right)
        self._ids.add_piece(run, right)
        if right.deleted is not None:
            self._pending.split(run, right)
        return right

    def visible_length(self) -> int:
        return self._visible

    @property
    def value(self) -> str:
        return "".join([run.text for block in self._blocks.blocks for run in block.runs
                        if run.deleted is None])

    def slice(self, start: int, stop: int) -> str:
        """Visible characters ``start`` to ``stop`` (excluded) without building the
        whole text; ``ValueError`` for a negative bound."""
        check_int(start, "a slice's start")
        check_int(stop, "a slice's stop")
        if start < 0 or stop < 0:
            raise ValueError(f"a slice of the text is taken between positions >= 0, got "
                             f"{start}..{stop}")
        stop = min(stop, self._visible)
        if start >= stop:
            return ""
        first, k = self._blocks.char_at(start)
        wanted = stop - start
        parts: list[str] = []
        for run in self._blocks.runs_from(first):
            if run.deleted is not None:
                continue
            piece = run.text[k:k + wanted]
            parts.append(piece)
            wanted -= len(piece)
            if not wanted:
                break
            k = 0
        return "".join(parts)

    @property
    def tombstones(self) -> int:
        return self._total - self._visible

    def __len__(self) -> int:
        """Characters kept, tombstones included."""
        return self._total

    def anchor(self, position: int) -> str | None:
        """The id of the visible character before ``position`` (``None``: the start): a
        place that stays put while others edit around it."""
        check_int(position, "a position")
        if position <= 0:
            return None
        if position > self._visible:
            raise ValueError(f"position {position} is outside the text (0..{self._visible})")
        run, k = self._blocks.char_at(position - 1)
        return run.char_id(k)

    def position(self, anchor: str | None) -> int | None:
        """Where ``anchor`` is now: the visible characters up to and including it;
        ``None`` if it is not here."""
        if anchor is None:
            return 0
        found = self._ids.locate(anchor)
        if found is None:
            return None
        run, k = found
        return self._blocks.position_of(run) + (k + 1 if run.deleted is None else 0)

    def tags_of(self, ident: Any) -> tuple[Tag | None, Tag | None] | None:
        """The tags of the insert of character ``ident`` (None once stable) and of the
        delete that hid it (None while visible); ``None`` if it is not here."""
        found = self._ids.locate(ident)
        if found is None:
            return None
        run = found[0]
        return run.tag, run.deleted

    def items(self) -> Iterator[list[Any]]:
        """Every character kept, in document order, as ``[id, timestamp, character,
        delete tag, insert tag]``, for tests."""
        for run in self._blocks.runs():
            stamp = STABLE if run.tag is None else (run.sum, run.op)
            for k, char in enumerate(run.text):
                yield [run.char_id(k), stamp, char, run.deleted, run.tag]

    def collect(self, stability: Stability) -> int:
        """Forget what causal stability makes useless (docs/replicated.md); returns how
        many tombstones went."""
        dropped = self._pending.collect(self._ids, self._blocks, stability)
        self._total -= dropped
        return dropped

    def state(self) -> dict[str, Any]:
        """What a newcomer continues from, as plain data (docs/replicated.md)."""
        return state_of(self._blocks.runs())

    @classmethod
    def from_state(cls, state: Any) -> TextSequence:
        """A replica continuing from another's :meth:`state`; ``ValueError`` saying
        what is wrong."""
        # the cyclic collector would walk every run built so far again and again
        paused = gc.isenabled()
        gc.disable()
        try:
            text = cls()
            text._load(read_state(state))
            return text
        finally:
            if paused:
                gc.enable()

    def _load(self, rows: list[RunRow]) -> None:
        built: list[Run] = []
        unstable: dict[str, Tag] = {}  # an insert's runs share its tag
        tombs: list[Run] = []
        first = self._blocks.blocks[0]
        for op, start, chars, inserted, deleted, chain in rows:
            total = 0 if inserted is None else sum(inserted.clock.values())
            run = Run(op, start, chars, total, inserted, deleted, first, chain)
            built.append(run)
            if deleted is not None:
                tombs.append(run)
            else:
                self._visible += len(chars)
            self._total += len(chars)
            if inserted is not None and not chain:
                unstable[op] = inserted
        self._blocks.load(self._ids.load(built))
        self._pending.load(list(unstable.items()), tombs)
