"""The buffer drain of receiver-side modules: which held message may be delivered next,
without a pass over every stamp for every message still waiting on the same member
(docs/writing-a-module.md, section 5)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["blocking", "first_deliverable", "take_first_deliverable"]

def blocking(blocker: Callable[[Iterator[T]], T | None], entries: Iterable[T]) -> list[T]:
    """Every one of ``entries`` that holds a message, by a module's delivery rule.

    ``blocker(entries)`` is the rule for one message: it reads the entries in order and
    returns the first that holds the message (None: none does), so called again on the
    same iterator it goes on after that one; the rule is a conjunction over its entries,
    so what it finds this way is exactly the entries that hold the message each alone."""
    rest = iter(entries)
    found = []
    while (entry := blocker(rest)) is not None:
        found.append(entry)
    return found


def first_deliverable(buffer: Sequence[tuple], held_by: dict[str, Hashable],
                      holder: Callable[[tuple], Hashable | None],
                      still_held: Callable[[tuple, Hashable], bool]) -> int | None:
    """The index of the first entry of ``buffer`` (``(message, ...)``) that nothing holds
    any more, or None: the one a full scan would find.

    ``holder(entry)`` names what keeps an entry's message from delivery now (None:
    deliverable), ``still_held(entry, what)`` whether that still does (the module's rule
    on the whole stamp, and on the part that held it). ``held_by``, the caller's cache
    (emptied when its buffer is replaced), keeps per message id what held it at the last
    look, so a message still waiting on the same member costs one test."""
    for index, entry in enumerate(buffer):
        message_id = entry[0].message_id
        what = held_by.get(message_id)
        if what is not None and still_held(entry, what):
            continue
        what = holder(entry)
        if what is None:
            held_by.pop(message_id, None)
            return index
        held_by[message_id] = what
    return None


def take_first_deliverable(buffer: list[tuple], held_by: dict[str, Hashable],
                           buffered_ids: set[str],
                           holder: Callable[[tuple], Hashable | None],
                           still_held: Callable[[tuple, Hashable], bool]) -> tuple | None:
    """:func:`first_deliverable`'s entry taken out of ``buffer`` (and its id out of
    ``buffered_ids``, the set a module keeps to find duplicates without a scan), or None."""
    index = first_deliverable(buffer, held_by, holder, still_held)
    if index is None:
        return None
    entry = buffer.pop(index)
    buffered_ids.discard(entry[0].message_id)
    return entry
