"""Own edits the session may not hold, carried onto a text received from another member:
which ones it already holds (by operation id), which go again as new operations and
after which character, which have nothing left to do (docs/replicated.md, "Edits made
while cut off"). No I/O: the terminal editor and the web gateway's mirror share it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from groupcomm.core.messages import Tag
from groupcomm.replicated.text import TextSequence

#: the most characters one insert carries (the editor's RUN_LIMIT)
RUN_LIMIT = 16_384


@dataclass(frozen=True, slots=True)
class OwnOperation:
    """An own text operation the session may not hold: its id, the operation, the member
    id that made it (an earlier incarnation's, ``ann``, after a return as ``ann~2``) and
    the tag of its send (``None``: made while cut off, never sent)."""

    op_id: str
    op: tuple
    maker: str
    tag: Tag | None


@dataclass
class Rebased:
    """What :func:`rebase` found.

    ``ops`` go as new operations, in this order. Each names characters of the received
    text, except that an insert's anchor may be the old id of a character an earlier
    insert of the list carries again: the sender replaces it with that character's new
    id (:meth:`moved`). ``sources[i]`` are the old ids of the characters ``ops[i]``
    carries again (empty for a delete). Every own operation ends held, carried again or
    void: in the text an insert always finds a place and a delete is done or moot."""

    ops: list[tuple] = field(default_factory=list)
    sources: list[tuple[str, ...]] = field(default_factory=list)
    #: ids of own operations the received text already holds
    held: list[str] = field(default_factory=list)
    #: ids of own operations with nothing left to do (typed and erased while cut off)
    void: list[str] = field(default_factory=list)
    #: old id of a character absent from the received text -> the old id of the nearest
    #: character before it that is visible there or carried again (None: the start)
    landing: dict[str, str | None] = field(default_factory=dict)

    @property
    def characters(self) -> int:
        """Characters carried again."""
        return sum(len(ids) for ids in self.sources)

    def moved(self, sent_ids: Sequence[str]) -> dict[str, str]:
        """Old character id -> new one, given the ids the first ``len(sent_ids)`` of
        :attr:`ops` were sent with (the k-th character of an insert sent as ``id`` is
        ``id`` then ``id+k``)."""
        moved: dict[str, str] = {}
        for sources, new in zip(self.sources, sent_ids, strict=False):
            for k, old in enumerate(sources):
                moved[old] = new if k == 0 else f"{new}+{k}"
        return moved

    def resolve(self, op: tuple, moved: Mapping[str, str]) -> tuple:
        """``op`` with an anchor carried again replaced by its new id."""
        if op[0] == "insert" and op[1] in moved:
            return ("insert", moved[op[1]], op[2])
        return op

    def place(self, anchor: str | None, moved: Mapping[str, str]) -> str | None:
        """Where a place in the old text (the id of the character before it) is in the
        received text once :attr:`ops` are sent: the same character, its new id, or the
        nearest character before it that is there."""
        if anchor is None:
            return None
        if anchor in moved:
            return moved[anchor]
        if anchor in self.landing:
            target = self.landing[anchor]
            return None if target is None else moved.get(target, target)
        return anchor


def _chars(op_id: str, text: str) -> list[str]:
    return [op_id if k == 0 else f"{op_id}+{k}" for k in range(len(text))]


def _held(own: OwnOperation, seen: Mapping[str, int] | None, received: TextSequence) -> bool:
    """Whether the received text holds ``own``: by its id against the clock of what the
    text's maker had applied when there is one, else by its characters."""
    if own.tag is None:
        return False  # never sent
    if seen is not None:
        return seen.get(own.maker, 0) >= own.tag.clock.get(own.maker, 0) > 0
    if own.op[0] == "insert":
        return received.tags_of(own.op_id) is not None
    return False  # a delete's effect is judged character by character


def rebase(old: TextSequence, received: TextSequence, own: Iterable[OwnOperation],
           seen: Mapping[str, int] | None = None) -> Rebased:
    """Carry the own operations ``own`` (in the order they were made, all applied in
    ``old``) onto ``received``. ``seen``: the clock of the operations the received
    text's maker had applied (``None`` when not known: then an insert counts as held
    when its characters are there).

    The rule: an insert the received text does not hold goes again with the characters
    of it still visible in ``old``, in runs after the nearest character before them in
    ``old`` that is visible in the received text; a delete it does not hold goes again
    for the characters it named that are visible in the received text (the others are
    gone there already)."""
    own = list(own)
    result = Rebased()
    resend: set[str] = set()   # own characters to carry again
    deletes: list[OwnOperation] = []
    for operation in own:
        if _held(operation, seen, received):
            result.held.append(operation.op_id)
        elif operation.op[0] == "insert":
            resend.update(_chars(operation.op_id, operation.op[2]))
        else:
            deletes.append(operation)
    visible_resent: set[str] = set()
    run: list[str] = []
    letters: list[str] = []
    run_after: str | None = None
    last_present: str | None = None
    last_landing: str | None = None

    def close() -> None:
        if not run:
            return
        after = run_after
        for start in range(0, len(run), RUN_LIMIT):
            ids = tuple(run[start:start + RUN_LIMIT])
            result.ops.append(("insert", after, "".join(letters[start:start + RUN_LIMIT])))
            result.sources.append(ids)
            after = ids[-1]
        run.clear()
        letters.clear()

    for ident, _, letter, deleted, _ in old.items():
        tags = received.tags_of(ident)
        if tags is not None:
            if tags[1] is None:
                close()
                last_present = last_landing = ident
            # a tombstone there is never named: once its delete is stable the others
            # may have forgotten it (a run goes after the visible character before)
            continue
        result.landing[ident] = last_landing
        if ident in resend and deleted is None:
            if not run:
                run_after = last_present
            run.append(ident)
            letters.append(letter)
            visible_resent.add(ident)
            last_landing = ident
    close()
    # an insert whose characters were all erased while cut off has nothing to do
    by_op: dict[str, bool] = {}
    for operation in own:
        if operation.op[0] == "insert" and operation.op_id not in result.held:
            chars = _chars(operation.op_id, operation.op[2])
            by_op[operation.op_id] = any(c in visible_resent for c in chars)
    result.void.extend(op_id for op_id, carried in by_op.items() if not carried)
    for operation in deletes:
        named = operation.op[1]
        ids = (named,) if isinstance(named, str) else tuple(named)
        targets: list[str] = []
        for ident in ids:
            tags = received.tags_of(ident)
            if tags is not None and tags[1] is None and ident not in targets:
                targets.append(ident)
        if targets:
            result.ops.append(("delete", targets[0] if len(targets) == 1 else tuple(targets)))
            result.sources.append(())
        else:  # deleted there already, forgotten, or one of its own not carried again
            result.void.append(operation.op_id)
    return result
