"""How the shared text finds a character by its id, and how causally stable typing (ids
counting up: ``p1#7``, ``p1#8``, ...) becomes *chain* runs, as Yjs squashes items."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any

from groupcomm.replicated.blocks import BlockList
from groupcomm.replicated.runs import Block, Run, numbered, split_id, start_of
from groupcomm.replicated.text_state import not_a_state

#: the most characters a chain grows to by merging (a merge copies its characters)
CHAIN_LIMIT = 512


class IdIndex:
    """Insert id -> its runs, and id prefix -> its chains."""

    def __init__(self) -> None:
        #: insert id -> its run, or its runs sorted by offset once it was split
        self.ops: dict[str, Run | list[Run]] = {}
        #: id prefix -> the chains of ids with that prefix, sorted by first number
        self.chains: dict[str, list[Run]] = {}

    def locate(self, ident: Any) -> tuple[Run, int] | None:
        """The run holding character ``ident`` and its index in the run, or ``None``."""
        if not isinstance(ident, str):
            return None
        entry = self.ops.get(ident)
        offset = 0
        if entry is None:
            op, offset = split_id(ident)
            entry = self.ops.get(op) if offset else None
            if entry is None:
                return self.in_chain(ident)
        if isinstance(entry, Run):
            run = entry
        else:
            at = bisect_right(entry, offset, key=start_of) - 1
            if at < 0:
                return None
            run = entry[at]
        k = offset - run.start
        return (run, k) if 0 <= k < len(run.text) else None

    def in_chain(self, ident: str) -> tuple[Run, int] | None:
        """The same for a character in a chain."""
        found = numbered(ident)
        if found is None:
            return None
        chains = self.chains.get(found[0])
        if not chains:
            return None
        at = bisect_right(chains, found[1], key=start_of) - 1
        if at < 0:
            return None
        run = chains[at]
        k = found[1] - run.start
        return (run, k) if k < len(run.text) else None

    def pieces(self, op: str, chain: bool, low: int, high: int) -> list[Run]:
        """The runs of insert (or chain prefix) ``op`` that may hold ``low..high``."""
        if not chain:
            entry = self.ops[op]
            return [entry] if isinstance(entry, Run) else list(entry)
        chains = self.chains[op]
        at = max(0, bisect_right(chains, low, key=start_of) - 1)
        found = []
        while at < len(chains) and chains[at].start < high:
            found.append(chains[at])
            at += 1
        return found

    def add_piece(self, run: Run, right: Run) -> None:
        if run.chain:
            insort(self.chains[run.op], right, key=start_of)
            return
        entry = self.ops[run.op]
        if isinstance(entry, Run):
            self.ops[run.op] = [entry, right]
        else:
            insort(entry, right, key=start_of)

    def forget(self, run: Run) -> None:
        """Drop ``run`` from the lookup (not from its block)."""
        if run.chain:
            self.unchain(run)
            return
        entry = self.ops[run.op]
        if isinstance(entry, Run):
            del self.ops[run.op]
            return
        entry.remove(run)
        if len(entry) == 1:
            self.ops[run.op] = entry[0]

    def unchain(self, run: Run) -> None:
        """Drop chain ``run`` (found by bisection, not by identity)."""
        chains = self.chains[run.op]
        at = bisect_left(chains, run.start, key=start_of)
        if at == len(chains) or chains[at] is not run:
            raise AssertionError(f"chain {run.op}{run.start} is not where it should be")
        del chains[at]
        if not chains:
            del self.chains[run.op]

    def chainable(self, run: Run) -> tuple[str, int] | None:
        """``run``'s ``(prefix, number)`` if it is a whole, stable, visible
        single-character insert whose id ends in a number."""
        if (run.chain or run.tag is not None or run.deleted is not None or run.start
                or len(run.text) != 1 or self.ops.get(run.op) is not run):
            return None
        return numbered(run.op)

    def chain(self, run: Run, blocks: BlockList, touched: set[Block]) -> None:
        """Merge chainable ``run`` into the chains next to it, or make it a chain of
        one; the blocks it leaves go into ``touched``."""
        found = self.chainable(run)
        if found is None:
            return
        prefix, number = found
        del self.ops[run.op]
        before = blocks.neighbour(run, -1)
        if (before is not None and before.chain and before.deleted is None
                and before.op == prefix and before.start + len(before.text) == number
                and len(before.text) < CHAIN_LIMIT):
            before.text += run.text
            blocks.move_count(run.block, before.block, len(run.text))
            run.block.runs.remove(run)
            touched.add(run.block)
            run = before
        else:
            run.op, run.start, run.chain = prefix, number, True
            insort(self.chains.setdefault(prefix, []), run, key=start_of)
        after = blocks.neighbour(run, 1)
        if (after is not None and after.chain and after.deleted is None
                and after.op == prefix and run.start + len(run.text) == after.start
                and len(run.text) + len(after.text) <= CHAIN_LIMIT):
            run.text += after.text
            blocks.move_count(after.block, run.block, len(after.text))
            after.block.runs.remove(after)
            touched.add(after.block)
            self.unchain(after)

    def load(self, runs: list[Run]) -> list[Run]:
        """Index ``runs`` (document order, from a state) with neighbouring chainable
        runs merged; returns the runs left. ``ValueError`` for a character twice."""
        ops = self.ops
        for run in runs:
            if run.chain:
                continue
            entry = ops.get(run.op)
            if entry is None:
                ops[run.op] = run
            elif isinstance(entry, Run):
                ops[run.op] = [entry, run]
            else:
                entry.append(run)
        for op, entry in ops.items():
            if isinstance(entry, list):
                entry.sort(key=start_of)
                for before, after in zip(entry, entry[1:], strict=False):
                    if before.start + len(before.text) > after.start:
                        raise not_a_state(f"characters of {op} appear twice (offset "
                                          f"{after.start})")
                    if (before.tag is None) != (after.tag is None):
                        raise not_a_state(f"runs of {op} disagree on whether it is stable")
        kept = self._chain_all(runs)
        for prefix, chains in self.chains.items():
            chains.sort(key=start_of)
            for before, after in zip(chains, chains[1:], strict=False):
                if before.start + len(before.text) > after.start:
                    raise not_a_state(f"{prefix}{after.start} appears twice")
        for op in ops:
            if self.in_chain(op) is not None:
                raise not_a_state(f"{op} appears twice")
        return kept

    def _chain_all(self, runs: list[Run]) -> list[Run]:
        kept: list[Run] = []
        parts: list[str] = []  # the characters of kept[-1] while it is a growing chain
        end = 0  # the number after the last id of that chain
        for run in runs:
            found = self.chainable(run)
            if found is not None:
                del self.ops[run.op]
                run.op, run.start, run.chain = found[0], found[1], True
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
                self.chains.setdefault(run.op, []).append(run)
        return kept
