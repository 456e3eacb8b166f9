"""The shared text's runs in document order: blocks of runs, and a Fenwick tree over the
blocks' visible counts, so a visible position is found in O(log n) plus one block."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate

from groupcomm.replicated.runs import Block, Run

#: the most runs a block holds; a block that grows past it is split in two
BLOCK_LIMIT = 128


class BlockList:
    def __init__(self) -> None:
        self.blocks: list[Block] = [Block([], 0)]
        #: Fenwick tree over the blocks' visible counts (1-based)
        self.tree: list[int] = [0, 0]

    def place(self, run: Run, block: Block, i: int) -> None:
        """Put a new, visible run at ``i`` in ``block``."""
        run.block = block
        block.runs.insert(i, run)
        n = len(run.text)
        block.visible += n
        self.add(block.index, n)
        if len(block.runs) > BLOCK_LIMIT:
            self.split_block(block)

    def hidden(self, run: Run) -> None:
        """``run``'s characters were just deleted."""
        n = len(run.text)
        block = run.block
        block.visible -= n
        self.add(block.index, -n)
        if len(block.runs) > BLOCK_LIMIT:
            self.split_block(block)

    def move_count(self, source: Block, target: Block, count: int) -> None:
        """``count`` visible characters went from block ``source`` to ``target``."""
        if source is not target:
            source.visible -= count
            target.visible += count
            self.add(source.index, -count)
            self.add(target.index, count)

    def split_block(self, block: Block) -> None:
        runs = block.runs
        half = BLOCK_LIMIT // 2
        parts = [runs[at:at + half] for at in range(0, len(runs), half)]
        block.runs = parts[0]
        block.visible = sum(len(r.text) for r in parts[0] if r.deleted is None)
        new = [Block(part, 0) for part in parts[1:]]
        for added in new:
            for run in added.runs:
                run.block = added
        self.blocks[block.index + 1:block.index + 1] = new
        self.rebuild(block.index + 1)

    def thin(self, touched: set[Block]) -> None:
        """Drop the ``touched`` blocks that were emptied and merge those nearly empty
        into the block before them."""
        blocks = self.blocks
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
                blocks.append(Block([], 0))
            self.rebuild(max(0, first - 1))

    def load(self, runs: list[Run]) -> None:
        """Hold ``runs`` (document order) in half-full blocks."""
        step = BLOCK_LIMIT // 2
        self.blocks = [Block(runs[at:at + step], 0)
                       for at in range(0, len(runs), step)] or [Block([], 0)]
        for block in self.blocks:
            for run in block.runs:
                run.block = block
        self.rebuild()

    def rebuild(self, start: int = 0) -> None:
        """Renumber the blocks from ``start`` on and rebuild the Fenwick tree."""
        blocks = self.blocks
        for i in range(start, len(blocks)):
            blocks[i].index = i
        prefix = [0, *accumulate([block.visible for block in blocks])]
        # a Fenwick node i holds the counts of the blocks (i - lowbit(i), i]
        self.tree = [0, *[prefix[i] - prefix[i & (i - 1)] for i in range(1, len(prefix))]]

    def add(self, index: int, delta: int) -> None:
        tree = self.tree
        i, n = index + 1, len(tree)
        while i < n:
            tree[i] += delta
            i += i & -i

    def position_of(self, run: Run) -> int:
        """Visible characters before ``run``."""
        block = run.block
        tree = self.tree
        before, i = 0, block.index
        while i > 0:
            before += tree[i]
            i -= i & -i
        for other in block.runs:
            if other is run:
                break
            if other.deleted is None:
                before += len(other.text)
        return before

    def char_at(self, position: int) -> tuple[Run, int]:
        """The run holding visible character ``position`` and the index in it."""
        tree = self.tree
        n = len(tree) - 1
        index, before = 0, 0
        step = 1 << (n.bit_length() - 1)
        while step:  # the last block whose predecessors hold at most ``position``
            nxt = index + step
            if nxt <= n and before + tree[nxt] <= position:
                index, before = nxt, before + tree[nxt]
            step >>= 1
        rest = position - before
        for run in self.blocks[index].runs:
            if run.deleted is None:
                n = len(run.text)
                if rest < n:
                    return run, rest
                rest -= n
        raise AssertionError("the block counts and the runs disagree")

    def runs_from(self, run: Run) -> Iterator[Run]:
        blocks = self.blocks
        i = run.block.runs.index(run)
        for b in range(run.block.index, len(blocks)):
            runs = blocks[b].runs
            for j in range(i, len(runs)):
                yield runs[j]
            i = 0

    def runs(self) -> Iterator[Run]:
        for block in self.blocks:
            yield from block.runs

    def neighbour(self, run: Run, step: int) -> Run | None:
        """The run before (``step`` -1) or after (1) ``run`` in document order."""
        runs = run.block.runs
        at = runs.index(run) + step
        if 0 <= at < len(runs):
            return runs[at]
        blocks = self.blocks
        b = run.block.index + step
        while 0 <= b < len(blocks):
            if blocks[b].runs:
                return blocks[b].runs[-1 if step < 0 else 0]
            b += step
        return None
