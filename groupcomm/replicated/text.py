"""The shared text: an RGA sequence kept as runs in blocks, so an edit costs O(log n + B).

The rules are those of RGA (Roh et al. 2011) as :class:`TextSequence` documents them;
this module is about how they are kept. The characters of one insert share its id,
timestamp and tag, so they are kept together as a *run* (``_Run``: the insert's id,
the offset of the run's first character in it, the characters, the timestamp's sum,
the insert's tag and the delete's tag); a run is split where an insert lands inside it
or a delete covers only part of it, so every character of a run is in the same state.
Runs sit in document order in *blocks* (``_Block``) of at most :data:`BLOCK_LIMIT` runs;
a Fenwick tree over the blocks' visible counts finds the block holding a visible
position, and the run's block plus the block's own count finds a run's position. An
id finds its run through a dict from insert id to that insert's runs (one, or a list
sorted by offset), so nothing is re-indexed when text moves. This is the shape of Yjs'
item lists with their search markers and of diamond-types' ranges of ids, fitted to
Python: few objects per edit, list operations that run in C within a block.

Typing makes one insert per keystroke, each with the next message id of its author
(``p1#7``, ``p1#8``, ...). Once such inserts are causally stable their timestamps and
tags are gone, and what is left of neighbours whose ids count up is merged into one
*chain* run (as Yjs squashes the items of one client with consecutive clocks), found
through a dict from id prefix to its chains sorted by first number; a chain grows to
at most :data:`CHAIN_LIMIT` characters, so merging one more copies little. A typed
document is then a few thousand runs rather than one per character, in memory and in
:meth:`TextSequence.state`.

Causal stability is collected incrementally: the inserts not yet stable and the
tombstones are kept apart, so :meth:`TextSequence.collect` scans those, not the text.
"""

from __future__ import annotations

import gc
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.ops import op_kind
from groupcomm.replicated.stability import Stability

#: the timestamp of a character whose insert is causally stable: smaller than any other
STABLE = (0, "")
#: the most runs a block holds; a block that grows past it is split in two
BLOCK_LIMIT = 128
#: the most characters a chain grows to by merging (a merge copies its characters)
CHAIN_LIMIT = 512
#: the version of the run-length state :meth:`TextSequence.state` returns
STATE_VERSION = 1


class _Run:
    """Consecutive characters of one insert, in one state (see the module doc); or a
    *chain*: consecutive stable, visible single-character inserts whose ids count up
    (``p1#7``, ``p1#8``, ...: what typing leaves), kept as one run.

    ``op`` is the insert's id (a chain: the ids' common prefix, ``p1#``), ``start`` the
    offset of the run's first character in the insert (a chain: the number in its
    first id). ``sum`` is the sum of the insert's clock, ``tag`` its tag; both are
    dropped (0 and ``None``) once the insert is causally stable, which makes the
    timestamp :data:`STABLE`. ``deleted`` is the tag of the delete that hid the
    characters."""

    __slots__ = ("op", "start", "text", "sum", "tag", "deleted", "block", "chain")

    def __init__(self, op: str, start: int, text: str, total: int, tag: Tag | None,
                 deleted: Tag | None, block: _Block, chain: bool = False) -> None:
        self.op = op
        self.start = start
        self.text = text
        self.sum = total
        self.tag = tag
        self.deleted = deleted
        self.block = block
        self.chain = chain

    def char_id(self, k: int) -> str:
        """The id of this run's ``k``-th character."""
        offset = self.start + k
        if self.chain:
            return f"{self.op}{offset}"
        return self.op if offset == 0 else f"{self.op}+{offset}"


class _Block:
    """A stretch of runs in document order, with its visible count and its place."""

    __slots__ = ("runs", "visible", "index")

    def __init__(self, runs: list[_Run], index: int) -> None:
        self.runs = runs
        self.visible = sum(len(r.text) for r in runs if r.deleted is None)
        self.index = index


def _check_int(value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} is an integer, got {value!r:.40}")


def _start_of(run: _Run) -> int:
    return run.start


def _numbered(ident: str) -> tuple[str, int] | None:
    """``(prefix, number)`` of an id that ends in a number written as Python writes it
    (``p1#12`` -> ``("p1#", 12)``), else ``None``: the ids a chain can hold."""
    digits = len(ident) - len(ident.rstrip("0123456789"))
    if not digits or (digits > 1 and ident[-digits] == "0"):
        return None
    return ident[:-digits], int(ident[-digits:])


def _split_id(ident: str) -> tuple[str, int]:
    """``(insert id, offset)`` of a character id (``id`` or ``id+k``)."""
    base, plus, suffix = ident.rpartition("+")
    if plus and suffix.isascii() and suffix.isdigit() and suffix[0] != "0":
        return base, int(suffix)
    return ident, 0


class TextSequence:
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

    Operations on the wire: ``("insert", after_id_or_None, text)`` and
    ``("delete", id)`` or ``("delete", (id, id, ...))``. Finding a position, applying
    an edit and reading a cursor cost O(log n) plus a scan of one block (see the
    module doc), not O(n).
    """

    def __init__(self) -> None:
        self._blocks: list[_Block] = [_Block([], 0)]
        #: Fenwick tree over the blocks' visible counts (1-based)
        self._tree: list[int] = [0, 0]
        #: insert id -> its run, or its runs sorted by offset once it was split
        self._ops: dict[str, _Run | list[_Run]] = {}
        #: id prefix -> the chains of ids with that prefix, sorted by first number
        self._chains: dict[str, list[_Run]] = {}
        #: insert id -> tag, for inserts not known to be causally stable yet
        self._unstable: dict[str, Tag] = {}
        #: the runs that are tombstones
        self._tombs: set[_Run] = set()
        self._visible = 0
        self._total = 0

    # -- operations ----------------------------------------------------------------------
    def prepare_insert(self, position: int, text: str) -> tuple[str, str | None, str]:
        """Insert ``text`` (one or more characters) so that its first character becomes
        visible character number ``position``."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"insert at least one character, got {text!r}")
        _check_int(position, "a position")
        length = self._visible
        if not 0 <= position <= length:
            raise ValueError(f"position {position} is outside the text (0..{length})")
        return ("insert", self.anchor(position), text)

    def prepare_delete(self, position: int, count: int = 1) -> tuple[str, str | tuple[str, ...]]:
        """Delete ``count`` visible characters from ``position`` on."""
        _check_int(position, "a position")
        _check_int(count, "a count")
        length = self._visible
        if count < 1 or not 0 <= position <= length - count:
            raise ValueError(f"no {count} character(s) at position {position} "
                             f"(the text has {length})")
        first, k = self._char_at(position)
        if count == 1:
            return ("delete", first.char_id(k))
        ids: list[str] = []
        for run in self._runs_from(first):
            if run.deleted is not None:
                continue
            for j in range(k, len(run.text)):
                ids.append(run.char_id(j))
                if len(ids) == count:
                    return ("delete", tuple(ids))
            k = 0
        raise AssertionError("the visible count and the runs disagree")

    def effect(self, op: Any, tag: Tag, op_id: str) -> None:
        """Apply an operation with the tag of its send and the id of its message;
        ``ValueError`` (and no change) for one of the wrong shape or that names a
        character not here."""
        inserting = isinstance(op, tuple) and len(op) > 0 and op[0] == "insert"
        kind = op_kind(op, ("insert", "delete"), 3 if inserting else 2)
        if kind == "delete":
            self._delete(op[1], tag)
            return
        _, after, text = op
        if not isinstance(text, str) or not text:
            raise ValueError(f"an insert carries at least one character, got {text!r}")
        if not isinstance(op_id, str) or not op_id:
            raise ValueError(f"an insert's id is a non-empty string, got {op_id!r:.80}")
        if op_id in self._ops or self._in_chain(op_id) is not None:
            raise ValueError(f"{op_id} inserted twice")
        found = None
        if after is not None:
            found = self._locate(after)
            if found is None:
                raise ValueError(f"insert after {after}, which has not been inserted here")
        total = sum(tag.clock.values())
        stamp = (total, op_id)
        if found is None:
            block, i = self._blocks[0], 0
        else:
            run, k = found
            block = run.block
            i = block.runs.index(run) + 1
            if k < len(run.text) - 1:
                # the rest of ``after``'s run follows it unless its timestamp is larger
                # (then it is skipped like any later sibling)
                if run.tag is None or (run.sum, run.op) < stamp:
                    self._split(run, k + 1)
                    self._place(_Run(op_id, 0, text, total, tag, None, block), block, i)
                    self._unstable[op_id] = tag
                    return
        # skip the runs inserted after the same character with a larger timestamp (and
        # what follows them), as RGA does; a stable run's timestamp is the smallest
        blocks = self._blocks
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
        self._place(_Run(op_id, 0, text, total, tag, None, block), block, i)
        self._unstable[op_id] = tag

    def _place(self, run: _Run, block: _Block, i: int) -> None:
        """Put a new insert's run at ``i`` in ``block``."""
        run.block = block
        block.runs.insert(i, run)
        n = len(run.text)
        block.visible += n
        self._tree_add(block.index, n)
        self._visible += n
        self._total += n
        self._ops[run.op] = run
        if len(block.runs) > BLOCK_LIMIT:
            self._split_block(block)

    def _delete(self, target: Any, tag: Tag) -> None:
        ids = (target,) if isinstance(target, str) else target
        if not isinstance(ids, tuple) or not ids or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"a delete names characters by id, got {target!r:.80}")
        # every id is found before anything changes; consecutive ids of one insert make
        # one range, so a long delete splits each run at most twice
        ranges: list[list[Any]] = []
        for ident in ids:
            found = self._locate(ident)
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
        """Mark the characters ``low..high`` (offsets; numbers for a chain) of insert
        (or chain prefix) ``op`` deleted by ``tag`` (those already deleted keep their
        first delete)."""
        if chain:
            chains = self._chains[op]
            at = max(0, bisect_right(chains, low, key=_start_of) - 1)
            pieces = []
            while at < len(chains) and chains[at].start < high:
                pieces.append(chains[at])
                at += 1
        else:
            entry = self._ops[op]
            pieces = [entry] if isinstance(entry, _Run) else list(entry)
        for run in pieces:
            end = run.start + len(run.text)
            first, last = max(low, run.start), min(high, end)
            if first >= last or run.deleted is not None:
                continue
            if last < end:
                self._split(run, last - run.start)
            if first > run.start:
                run = self._split(run, first - run.start)
            run.deleted = tag
            self._tombs.add(run)
            n = len(run.text)
            run.block.visible -= n
            self._tree_add(run.block.index, -n)
            self._visible -= n
            if len(run.block.runs) > BLOCK_LIMIT:
                self._split_block(run.block)

    # -- runs and blocks ---------------------------------------------------------------------
    def _locate(self, ident: Any) -> tuple[_Run, int] | None:
        """The run holding character ``ident`` and its index in the run, or ``None``."""
        if not isinstance(ident, str):
            return None
        entry = self._ops.get(ident)
        offset = 0
        if entry is None:
            op, offset = _split_id(ident)
            entry = self._ops.get(op) if offset else None
            if entry is None:
                return self._in_chain(ident)
        if isinstance(entry, _Run):
            run = entry
        else:
            at = bisect_right(entry, offset, key=_start_of) - 1
            if at < 0:
                return None
            run = entry[at]
        k = offset - run.start
        return (run, k) if 0 <= k < len(run.text) else None

    def _in_chain(self, ident: str) -> tuple[_Run, int] | None:
        """The chain holding character ``ident`` and its index in it, or ``None``."""
        numbered = _numbered(ident)
        if numbered is None:
            return None
        chains = self._chains.get(numbered[0])
        if not chains:
            return None
        at = bisect_right(chains, numbered[1], key=_start_of) - 1
        if at < 0:
            return None
        run = chains[at]
        k = numbered[1] - run.start
        return (run, k) if k < len(run.text) else None

    def _split(self, run: _Run, k: int) -> _Run:
        """Cut ``run`` before its ``k``-th character; returns the second part, placed
        right after it (the block may grow past its limit: the caller splits it)."""
        right = _Run(run.op, run.start + k, run.text[k:], run.sum, run.tag, run.deleted,
                     run.block, run.chain)
        run.text = run.text[:k]
        runs = run.block.runs
        runs.insert(runs.index(run) + 1, right)
        if run.chain:
            insort(self._chains[run.op], right, key=_start_of)
            return self._tombstone(right)
        entry = self._ops[run.op]
        if isinstance(entry, _Run):
            self._ops[run.op] = [entry, right]
        else:
            insort(entry, right, key=_start_of)
        return self._tombstone(right)

    def _tombstone(self, run: _Run) -> _Run:
        """Keep ``run`` among the tombstones if it is one."""
        if run.deleted is not None:
            self._tombs.add(run)
        return run

    def _forget(self, run: _Run) -> None:
        """Drop ``run`` from the id lookup (its block is the caller's business)."""
        if run.chain:
            self._unchain(run)
            return
        entry = self._ops[run.op]
        if isinstance(entry, _Run):
            del self._ops[run.op]
            return
        entry.remove(run)
        if len(entry) == 1:
            self._ops[run.op] = entry[0]

    def _split_block(self, block: _Block) -> None:
        runs = block.runs
        parts = [runs[at:at + BLOCK_LIMIT // 2] for at in range(0, len(runs), BLOCK_LIMIT // 2)]
        block.runs = parts[0]
        block.visible = sum(len(r.text) for r in parts[0] if r.deleted is None)
        new = [_Block(part, 0) for part in parts[1:]]
        for added in new:
            for run in added.runs:
                run.block = added
        self._blocks[block.index + 1:block.index + 1] = new
        self._rebuild_tree(block.index + 1)

    def _rebuild_tree(self, start: int = 0) -> None:
        """Renumber the blocks from ``start`` on and rebuild the Fenwick tree (after
        blocks came or went): O(blocks), in C as far as it goes."""
        blocks = self._blocks
        for i in range(start, len(blocks)):
            blocks[i].index = i
        prefix = [0, *accumulate([block.visible for block in blocks])]
        # a Fenwick node i holds the counts of the blocks (i - lowbit(i), i]
        self._tree = [0, *[prefix[i] - prefix[i & (i - 1)] for i in range(1, len(prefix))]]

    def _tree_add(self, index: int, delta: int) -> None:
        tree = self._tree
        i, n = index + 1, len(tree)
        while i < n:
            tree[i] += delta
            i += i & -i

    def _visible_before(self, index: int) -> int:
        """Visible characters in the blocks before block ``index``."""
        tree = self._tree
        total, i = 0, index
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total

    def _char_at(self, position: int) -> tuple[_Run, int]:
        """The run holding visible character ``position`` (0-based, in the text) and the
        character's index in it."""
        tree = self._tree
        n = len(tree) - 1
        index, before = 0, 0
        step = 1 << (n.bit_length() - 1)
        while step:  # the last block whose predecessors hold at most ``position``
            nxt = index + step
            if nxt <= n and before + tree[nxt] <= position:
                index, before = nxt, before + tree[nxt]
            step >>= 1
        rest = position - before
        for run in self._blocks[index].runs:
            if run.deleted is None:
                n = len(run.text)
                if rest < n:
                    return run, rest
                rest -= n
        raise AssertionError("the block counts and the runs disagree")

    def _runs_from(self, run: _Run) -> Iterator[_Run]:
        """``run`` and every run after it, in document order."""
        blocks = self._blocks
        i = run.block.runs.index(run)
        for b in range(run.block.index, len(blocks)):
            runs = blocks[b].runs
            for j in range(i, len(runs)):
                yield runs[j]
            i = 0

    def _runs(self) -> Iterator[_Run]:
        for block in self._blocks:
            yield from block.runs

    # -- reading ---------------------------------------------------------------------------
    def visible_length(self) -> int:
        return self._visible

    @property
    def value(self) -> str:
        return "".join([run.text for block in self._blocks for run in block.runs
                        if run.deleted is None])

    def slice(self, start: int, stop: int) -> str:
        """Visible characters ``start`` to ``stop`` (excluded), without building the
        whole text: what an editor shows of a long one. ``stop`` past the end is the
        end; ``ValueError`` for a negative bound."""
        _check_int(start, "a slice's start")
        _check_int(stop, "a slice's stop")
        if start < 0 or stop < 0:
            raise ValueError(f"a slice of the text is taken between positions >= 0, got "
                             f"{start}..{stop}")
        stop = min(stop, self._visible)
        if start >= stop:
            return ""
        first, k = self._char_at(start)
        wanted = stop - start
        parts: list[str] = []
        for run in self._runs_from(first):
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
        """Characters kept, tombstones included (the metadata :meth:`collect` bounds)."""
        return self._total

    def anchor(self, position: int) -> str | None:
        """The id of the visible character just before ``position`` (``None``: the
        start): a place in the text that stays put while others edit around it."""
        _check_int(position, "a position")
        if position <= 0:
            return None
        if position > self._visible:
            raise ValueError(f"position {position} is outside the text "
                             f"(0..{self._visible})")
        run, k = self._char_at(position - 1)
        return run.char_id(k)

    def position(self, anchor: str | None) -> int | None:
        """Where ``anchor`` (from :meth:`anchor`) is now: the number of visible
        characters up to and including it; ``None`` if it is not (or no longer) here."""
        if anchor is None:
            return 0
        found = self._locate(anchor)
        if found is None:
            return None
        run, k = found
        block = run.block
        before = self._visible_before(block.index)
        for other in block.runs:
            if other is run:
                break
            if other.deleted is None:
                before += len(other.text)
        return before + (k + 1 if run.deleted is None else 0)

    def items(self) -> Iterator[list[Any]]:
        """Every character kept, tombstones included, in document order, as
        ``[id, timestamp, character, delete tag or None, insert tag or None]`` (the
        timestamp is :data:`STABLE` once the insert is stable): for adapters and tests
        that want one row per character; O(n)."""
        for run in self._runs():
            stamp = STABLE if run.tag is None else (run.sum, run.op)
            for k, char in enumerate(run.text):
                yield [run.char_id(k), stamp, char, run.deleted, run.tag]

    # -- state transfer --------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything a newcomer needs to continue from this replica, as plain data
        (msgpack or pickle can carry it): ``{"version": 1, "runs": [[insert id, offset,
        characters, insert clock or None, delete clock or None], ...]}`` in document
        order, one row per run (an insert clock of ``None``: the insert is stable). A
        chain (what typing leaves once stable) is one row of six, ``[id of its first
        character, 0, characters, None, delete clock or None, number of characters]``:
        its characters' ids count up from the first (``p1#7``, ``p1#8``, ...)."""
        rows: list[list[Any]] = []
        for run in self._runs():
            deleted = None if run.deleted is None else run.deleted.clock
            if run.chain:
                rows.append([f"{run.op}{run.start}", 0, run.text, None, deleted,
                             len(run.text)])
            else:
                rows.append([run.op, run.start, run.text,
                             None if run.tag is None else run.tag.clock, deleted])
        return {"version": STATE_VERSION, "runs": rows}

    @classmethod
    def from_state(cls, state: Any) -> TextSequence:
        """A replica continuing from :meth:`state` of another (or the one-row-per-
        character list older replicas sent); ``ValueError`` saying what is wrong if it
        does not have that shape."""
        # the cyclic garbage collector would walk every run built so far again and
        # again while a large text is built (none of them is garbage): it waits
        paused = gc.isenabled()
        gc.disable()
        try:
            return cls._from_state(state)
        finally:
            if paused:
                gc.enable()

    @classmethod
    def _from_state(cls, state: Any) -> TextSequence:
        if isinstance(state, list):
            return cls._from_items(state)
        if not isinstance(state, dict) or set(state) != {"version", "runs"}:
            raise ValueError("not the state of a TextSequence: expected a dict with "
                             "'version' and 'runs'")
        if state["version"] != STATE_VERSION:
            raise ValueError(f"not the state of a TextSequence: version "
                             f"{state['version']!r}, this replica reads {STATE_VERSION}")
        rows = state["runs"]
        if not isinstance(rows, (list, tuple)):  # msgpack may decode arrays as tuples
            raise ValueError("not the state of a TextSequence: 'runs' is not a list")
        text = cls()
        tags: dict[tuple, Tag] = {}

        def tag_of(clock: Any, row: int, what: str) -> Tag | None:
            if clock is None:
                return None
            if not isinstance(clock, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    for k, v in clock.items()):
                raise ValueError(f"not the state of a TextSequence: run {row}: the "
                                 f"{what} clock is not a dict of member -> count")
            key = tuple(sorted(clock.items()))
            if key not in tags:  # runs split from one operation share its tag
                tags[key] = Tag(clock)
            return tags[key]

        runs = []
        for number, row in enumerate(rows):
            if not isinstance(row, (list, tuple)) or len(row) not in (5, 6):
                raise ValueError(f"not the state of a TextSequence: run {number} is not "
                                 f"a list of 5 fields (6 for a chain)")
            op, start, chars, inserted, deleted = row[:5]
            if not isinstance(op, str) or not op:
                raise ValueError(f"not the state of a TextSequence: run {number}: the "
                                 f"insert id is not a non-empty string")
            if not isinstance(start, int) or isinstance(start, bool) or start < 0:
                raise ValueError(f"not the state of a TextSequence: run {number}: the "
                                 f"offset is not an integer >= 0")
            if not isinstance(chars, str) or not chars:
                raise ValueError(f"not the state of a TextSequence: run {number}: no "
                                 f"characters")
            insert_tag = tag_of(inserted, number, "insert")
            delete_tag = tag_of(deleted, number, "delete")
            if len(row) == 5:
                runs.append((op, start, chars, insert_tag, delete_tag, False))
                continue
            numbered = _numbered(op)
            if (row[5] != len(chars) or start != 0 or insert_tag is not None
                    or numbered is None):
                raise ValueError(f"not the state of a TextSequence: run {number}: a chain "
                                 f"is [first id ending in a number, 0, characters, None, "
                                 f"delete clock or None, number of characters]")
            runs.append((numbered[0], numbered[1], chars, None, delete_tag, True))
        text._load(runs)
        return text

    @classmethod
    def _from_items(cls, items: list) -> TextSequence:
        """The one-row-per-character state of older replicas."""
        if not all(
                isinstance(item, list) and len(item) == 5 and isinstance(item[0], str)
                and isinstance(item[1], tuple) and isinstance(item[2], str)
                and len(item[2]) == 1 and (item[3] is None or isinstance(item[3], Tag))
                and (item[4] is None or isinstance(item[4], Tag)) for item in items):
            raise ValueError("not the state of a TextSequence")
        text = cls()
        runs: list[Any] = []
        for ident, _, char, deleted, inserted in items:
            op, offset = _split_id(ident)
            last = runs[-1] if runs else None
            if (last is not None and last[0] == op and last[1] + len(last[2]) == offset
                    and last[3] == inserted and last[4] == deleted):
                last[2] += char  # the characters of one insert in one state: one run
            else:
                runs.append([op, offset, char, inserted, deleted, False])
        text._load(runs)
        return text

    def _load(self, runs: list[tuple[str, int, str, Tag | None, Tag | None, bool]]) -> None:
        """Fill an empty replica with ``runs`` in document order (chains merged)."""
        built: list[_Run] = []
        for op, start, chars, inserted, deleted, chain in runs:
            total = 0 if inserted is None else sum(inserted.clock.values())
            run = _Run(op, start, chars, total, inserted, deleted, self._blocks[0], chain)
            built.append(run)
            if deleted is not None:
                self._tombs.add(run)
            else:
                self._visible += len(chars)
            self._total += len(chars)
            if chain:
                continue
            entry = self._ops.get(op)
            if entry is None:
                self._ops[op] = run
            elif isinstance(entry, _Run):
                self._ops[op] = [entry, run]
            else:
                entry.append(run)
            if inserted is not None:
                self._unstable[op] = inserted
        for op, entry in self._ops.items():
            if isinstance(entry, list):
                entry.sort(key=_start_of)
                for before, after in zip(entry, entry[1:], strict=False):
                    if before.start + len(before.text) > after.start:
                        raise ValueError(f"not the state of a TextSequence: characters "
                                         f"of {op} appear twice (offset {after.start})")
                    if (before.tag is None) != (after.tag is None):
                        raise ValueError(f"not the state of a TextSequence: runs of {op} "
                                         f"disagree on whether it is stable")
        built = self._chain_all(built)
        for prefix, chains in self._chains.items():
            chains.sort(key=_start_of)
            for before, after in zip(chains, chains[1:], strict=False):
                if before.start + len(before.text) > after.start:
                    raise ValueError(f"not the state of a TextSequence: {prefix}"
                                     f"{after.start} appears twice")
        for op in self._ops:
            if self._in_chain(op) is not None:
                raise ValueError(f"not the state of a TextSequence: {op} appears twice")
        self._load_blocks(built)

    def _chainable(self, run: _Run) -> tuple[str, int] | None:
        """``run``'s id as ``(prefix, number)`` if it can join a chain: a whole, stable,
        visible single-character insert whose id ends in a number."""
        if (run.chain or run.tag is not None or run.deleted is not None or run.start
                or len(run.text) != 1 or self._ops.get(run.op) is not run):
            return None
        return _numbered(run.op)

    def _chain_all(self, runs: list[_Run]) -> list[_Run]:
        """``runs`` (document order) with neighbouring chainable inserts and chains
        merged; registers the chains."""
        kept: list[_Run] = []
        parts: list[str] = []  # the characters of kept[-1] while it is a growing chain
        end = 0  # the number after the last id of that chain
        for run in runs:
            numbered = self._chainable(run)
            if numbered is not None:
                del self._ops[run.op]
                run.op, run.start, run.chain = numbered[0], numbered[1], True
            last = kept[-1] if kept else None
            if (run.chain and last is not None and last.chain and last.deleted is None
                    and run.deleted is None and last.op == run.op and end == run.start
                    and end - last.start < CHAIN_LIMIT):
                parts.append(run.text)
                end += len(run.text)
                continue
            if len(parts) > 1:
                last.text = "".join(parts)
            kept.append(run)
            parts = [run.text]
            end = run.start + len(run.text)
        if len(parts) > 1:
            kept[-1].text = "".join(parts)
        for run in kept:
            if run.chain:
                self._chains.setdefault(run.op, []).append(run)
        return kept

    def _chain(self, run: _Run, touched: set[_Block]) -> None:
        """Merge ``run`` into the chains next to it (in its block or the next one), or
        make it a chain of one, if it is chainable (just made stable)."""
        numbered = self._chainable(run)
        if numbered is None:
            return
        prefix, number = numbered
        del self._ops[run.op]
        before = self._neighbour(run, -1)
        if (before is not None and before.chain and before.deleted is None
                and before.op == prefix and before.start + len(before.text) == number
                and len(before.text) < CHAIN_LIMIT):
            before.text += run.text
            self._move_count(run.block, before.block, len(run.text))
            run.block.runs.remove(run)
            touched.add(run.block)
            run = before
        else:
            run.op, run.start, run.chain = prefix, number, True
            insort(self._chains.setdefault(prefix, []), run, key=_start_of)
        after = self._neighbour(run, 1)
        if (after is not None and after.chain and after.deleted is None
                and after.op == prefix and run.start + len(run.text) == after.start
                and len(run.text) + len(after.text) <= CHAIN_LIMIT):
            run.text += after.text
            self._move_count(after.block, run.block, len(after.text))
            after.block.runs.remove(after)
            touched.add(after.block)
            self._unchain(after)

    def _unchain(self, run: _Run) -> None:
        """Drop chain ``run`` from the chain lookup (found by its first number: a
        search of the list by identity would compare with every chain)."""
        chains = self._chains[run.op]
        at = bisect_left(chains, run.start, key=_start_of)
        if at == len(chains) or chains[at] is not run:
            raise AssertionError(f"chain {run.op}{run.start} is not where it should be")
        del chains[at]
        if not chains:
            del self._chains[run.op]

    def _neighbour(self, run: _Run, step: int) -> _Run | None:
        """The run before (``step`` -1) or after (1) ``run`` in document order."""
        runs = run.block.runs
        at = runs.index(run) + step
        if 0 <= at < len(runs):
            return runs[at]
        blocks = self._blocks
        b = run.block.index + step
        while 0 <= b < len(blocks):
            if blocks[b].runs:
                return blocks[b].runs[-1 if step < 0 else 0]
            b += step
        return None

    def _move_count(self, source: _Block, target: _Block, count: int) -> None:
        """``count`` visible characters went from block ``source`` to ``target``."""
        if source is not target:
            source.visible -= count
            target.visible += count
            self._tree_add(source.index, -count)
            self._tree_add(target.index, count)

    # -- causal stability --------------------------------------------------------------------
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

        It scans the inserts not yet stable and the tombstones, not the text: its cost
        is linear in what this replica keeps for concurrency, whatever the text's size.
        """
        is_stable = stability.is_stable
        settled = [op for op, tag in self._unstable.items() if is_stable(tag)]
        touched: set[_Block] = set()
        for op in settled:
            del self._unstable[op]
            entry = self._ops[op]
            for run in ([entry] if isinstance(entry, _Run) else entry):
                run.tag, run.sum = None, 0
            if isinstance(entry, _Run):
                self._chain(entry, touched)
        self._thin(touched)  # chaining may have emptied blocks
        touched = set()
        verdicts: dict[int, bool] = {}  # a range delete's runs share one tag
        candidates = []
        for run in self._tombs:
            if run.tag is None:
                verdict = verdicts.get(id(run.deleted))
                if verdict is None:
                    verdict = verdicts[id(run.deleted)] = is_stable(run.deleted)
                if verdict:
                    candidates.append(run)
        if not candidates:
            return 0
        # from the end of the text backwards, as each decision reads the character kept
        # after the tombstone, and that may be a tombstone dropped just before
        candidates.sort(key=lambda r: (r.block.index, r.block.runs.index(r)), reverse=True)
        blocks = self._blocks
        #: block index -> a later block index, past blocks emptied on the way (path
        #: compressed: a long deleted stretch is walked once, not once per tombstone)
        skip: dict[int, int] = {}

        def first_after(b: int) -> _Run | None:
            path = []
            while b < len(blocks) and (b in skip or not blocks[b].runs):
                path.append(b)
                b = skip.get(b, b + 1)
            for passed in path:
                skip[passed] = b
            return blocks[b].runs[0] if b < len(blocks) else None

        dropped = 0
        for run in candidates:
            runs = run.block.runs
            at = runs.index(run)
            follower = (runs[at + 1] if at + 1 < len(runs)
                        else first_after(run.block.index + 1))
            if follower is not None and follower.tag is not None:
                # the character after it may still be named with its timestamp: the
                # run's last character stays as the marker the scan stops at
                cut = len(run.text) - 1
                if cut:
                    run.start += cut
                    run.text = run.text[cut:]
                    self._total -= cut
                    dropped += cut
                continue
            del runs[at]
            touched.add(run.block)
            self._tombs.discard(run)
            self._forget(run)
            self._total -= len(run.text)
            dropped += len(run.text)
        self._thin(touched)
        return dropped

    def _thin(self, touched: set[_Block]) -> None:
        """Drop the ``touched`` blocks that collection emptied and merge those it left
        nearly empty into the block before them (tombstones hold no visible count, so
        only the blocks' places change)."""
        blocks = self._blocks
        first = None
        for block in sorted(touched, key=lambda b: b.index, reverse=True):
            at = block.index
            if not block.runs:
                del blocks[at]
            elif (len(block.runs) < BLOCK_LIMIT // 8 and at > 0
                  and len(blocks[at - 1].runs) + len(block.runs) <= BLOCK_LIMIT):
                before = blocks[at - 1]
                for run in block.runs:
                    run.block = before
                before.runs.extend(block.runs)
                before.visible += block.visible
                del blocks[at]
            else:
                continue
            first = at
        if first is not None:
            if not blocks:
                blocks.append(_Block([], 0))
            self._rebuild_tree(max(0, first - 1))

    def _load_blocks(self, runs: list[_Run]) -> None:
        step = BLOCK_LIMIT // 2
        self._blocks = [_Block(runs[at:at + step], 0)
                        for at in range(0, len(runs), step)] or [_Block([], 0)]
        for block in self._blocks:
            for run in block.runs:
                run.block = block
        self._rebuild_tree()
