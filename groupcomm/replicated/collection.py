"""What causal stability lets the shared text forget (docs/replicated.md, "Causal
stability and what the text forgets")."""

from __future__ import annotations

from groupcomm.core.messages import Tag
from groupcomm.replicated.blocks import BlockList
from groupcomm.replicated.ids import IdIndex
from groupcomm.replicated.runs import Block, Run
from groupcomm.replicated.stability import Stability


def collect_stable(unstable: dict[str, Tag], tombs: set[Run], ids: IdIndex,
                   blocks: BlockList, stability: Stability) -> int:
    """Settle the inserts of ``unstable`` that are stable now (dropped from it) and drop
    the tombstones of ``tombs`` that may go; returns how many characters went."""
    is_stable = stability.is_stable
    settled = [op for op, tag in unstable.items() if is_stable(tag)]
    touched: set[Block] = set()
    for op in settled:
        del unstable[op]
        entry = ids.ops[op]
        for run in ([entry] if isinstance(entry, Run) else entry):
            run.tag, run.sum = None, 0
        if isinstance(entry, Run):
            ids.chain(entry, blocks, touched)
    blocks.thin(touched)  # chaining may have emptied blocks
    verdicts: dict[int, bool] = {}  # a range delete's runs share one tag
    candidates = []
    for run in tombs:
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

    touched = set()
    dropped = 0
    for run in candidates:
        runs = run.block.runs
        at = runs.index(run)
        follower = runs[at + 1] if at + 1 < len(runs) else first_after(run.block.index + 1)
        if follower is not None and follower.tag is not None:
            # the next character may still be named with its timestamp: the last
            # character stays as the marker the scan stops at
            cut = len(run.text) - 1
            if cut:
                run.start += cut
                run.text = run.text[cut:]
                dropped += cut
            continue
        del runs[at]
        touched.add(run.block)
        tombs.discard(run)
        ids.forget(run)
        dropped += len(run.text)
    blocks.thin(touched)
    return dropped

