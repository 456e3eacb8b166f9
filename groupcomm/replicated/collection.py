"""What causal stability lets the shared text forget (docs/replicated.md, "Causal
stability and what the text forgets")."""

from __future__ import annotations

from collections import deque
from typing import Any

from groupcomm.core.messages import Tag
from groupcomm.replicated.blocks import BlockList
from groupcomm.replicated.ids import IdIndex
from groupcomm.replicated.runs import Block, Run
from groupcomm.replicated.stability import Stability

#: an operation collection waits for: its tag, and the insert's id (``None``: a delete)
Waiting = tuple[Tag, Any]


class Pending:
    """The operations not known stable yet, each sender's in the order they were applied,
    and the tombstones whose delete is stable but that stay (their insert or the
    character after them is not stable yet), so that a collect costs what it settles,
    not what is still unstable.

    A sender's operations come in causal order, each tag covering the one before, so
    they become stable in that order: a collect asks about the first of each sender's
    queue until one is not stable. The sender of an operation is its message's, given
    where it is applied (an operation applied before one of its sender's that its tag
    covers, without causal delivery, only waits for that one to be stable too); an
    operation loaded from a state, whose sender is not kept, waits in ``loose``, asked
    about at every collect."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[Waiting]] = {}
        self.loose: list[Waiting] = []
        #: id of a delete's tag (kept alive by its queue entry) -> the runs it hid
        self.hidden: dict[int, list[Run]] = {}
        #: tombstones whose delete is stable
        self.dead: set[Run] = set()

    def applied(self, tag: Tag, op: str | None, sender: str) -> None:
        """Insert ``op`` (``None``: a delete) of ``sender`` with ``tag`` took effect."""
        queue = self.queues.get(sender)
        if queue is None:
            queue = self.queues[sender] = deque()
        queue.append((tag, op))

    def deleted(self, tag: Tag, run: Run) -> None:
        """``run`` was just hidden by the delete with ``tag``."""
        runs = self.hidden.get(id(tag))
        if runs is None:
            runs = self.hidden[id(tag)] = []
        runs.append(run)

    def split(self, run: Run, right: Run) -> None:
        """Tombstone ``run`` was cut and ``right`` is its second part."""
        if run in self.dead:
            self.dead.add(right)
        else:
            self.deleted(right.deleted, right)

    def load(self, unstable: list[tuple[str, Tag]], tombs: list[Run]) -> None:
        """What a state holds that is not stable: inserts with their tags, tombstones."""
        for op, tag in unstable:
            self.loose.append((tag, op))
        for run in tombs:
            if id(run.deleted) not in self.hidden:
                self.loose.append((run.deleted, None))
            self.deleted(run.deleted, run)

    def collect(self, ids: IdIndex, blocks: BlockList, stability: Stability) -> int:
        """Settle the inserts that are stable now and drop the tombstones that may go;
        returns how many characters went."""
        is_stable = stability.is_stable
        settled: list[Waiting] = []
        for queue in self.queues.values():
            while queue and is_stable(queue[0][0]):
                settled.append(queue.popleft())
        if self.loose:
            keep = []
            for waiting in self.loose:
                (settled if is_stable(waiting[0]) else keep).append(waiting)
            self.loose = keep
        if not settled:
            return 0
        dead = self.dead
        candidates: set[Run] = set()
        touched: set[Block] = set()
        for tag, op in settled:
            if op is None:
                for run in self.hidden.pop(id(tag), ()):
                    dead.add(run)
                    candidates.add(run)
                continue
            entry = ids.ops[op]
            runs = [entry] if isinstance(entry, Run) else entry
            for run in runs:
                run.tag, run.sum = None, 0
                if run in dead:
                    candidates.add(run)
                if dead:  # a tombstone before it may have been kept for it (a marker)
                    before = blocks.neighbour(run, -1)
                    if before is not None and before in dead:
                        candidates.add(before)
            if isinstance(entry, Run):
                ids.chain(entry, blocks, touched)
        blocks.thin(touched)  # chaining may have emptied blocks
        return drop_tombstones([r for r in candidates if r.tag is None], dead, ids, blocks)


def drop_tombstones(candidates: list[Run], dead: set[Run], ids: IdIndex,
                    blocks: BlockList) -> int:
    """Drop the tombstones of ``candidates`` (stable insert and delete) whose next
    character is stable too, or that are last; the others are cut to their last
    character, the marker the placement scan stops at. Returns how many characters went."""
    if not candidates:
        return 0
    # from the end of the text backwards, as each decision reads the character kept
    # after the tombstone, and that may be a tombstone dropped just before
    candidates.sort(key=lambda r: (r.block.index, r.block.runs.index(r)), reverse=True)
    in_blocks = blocks.blocks
    skip: dict[int, int] = {}  # block index -> a later block index

    def first_after(b: int) -> Run | None:
        """The first run from block ``b`` on (path compressed: a long deleted stretch
        is walked once, not once per tombstone)."""
        path = []
        while b < len(in_blocks) and (b in skip or not in_blocks[b].runs):
            path.append(b)
            b = skip.get(b, b + 1)
        for passed in path:
            skip[passed] = b
        return in_blocks[b].runs[0] if b < len(in_blocks) else None

    touched: set[Block] = set()
    dropped = 0
    for run in candidates:
        runs = run.block.runs
        at = runs.index(run)
        follower = runs[at + 1] if at + 1 < len(runs) else first_after(run.block.index + 1)
        if follower is not None and follower.tag is not None:
            # the next character may still be named with its timestamp: the last
            # character stays as the marker the scan stops at, until it is stable
            cut = len(run.text) - 1
            if cut:
                run.start += cut
                run.text = run.text[cut:]
                dropped += cut
            continue
        del runs[at]
        touched.add(run.block)
        dead.discard(run)
        ids.forget(run)
        dropped += len(run.text)
    blocks.thin(touched)
    return dropped
