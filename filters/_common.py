"""Helpers the causality modules share: control messages, header readers that turn a
peer's wrong-shape metadata into a precise :class:`ProtocolViolation`, and the compact
encodings of clocks and matrices.

Clocks travel keyed by member name, not by position: members join and leave, and a
late joiner does not know who left before it came, so positions would not mean the
same at every member. To stay compact the names are sent once per message and the
entries refer to them by index; only non-zero entries are sent.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any, TypeVar

from groupcomm.core.causality import CausalityManager, ProtocolViolation
from groupcomm.core.messages import (
    ControlMessage,
    GroupMessage,
    HeaderValue,
    SentMessage,
    sent_unchecked,
)

Clock = dict[str, int]
Matrix = dict[str, dict[str, int]]
T = TypeVar("T")


def control_message(
    manager: CausalityManager,
    protocol: str,
    kind: str,
    to: str,
    about: str = "",
    headers: Mapping[str, HeaderValue] | None = None,
) -> SentMessage:
    """A control message of ``protocol`` from this host to ``to`` (never delivered)."""
    manager.control_count += 1
    name = manager.host.name
    if headers is None:  # an ACK per message under mfss and cykas: no field needs checking
        return sent_unchecked(manager.application_name, manager.session_name,
                              ControlMessage(protocol, kind, about),
                              f"{name}~{kind}{manager.control_count}", name, (), (to,))
    return SentMessage(
        application_name=manager.application_name,
        session_name=manager.session_name,
        user_message=ControlMessage(protocol, kind, about),
        message_id=f"{name}~{kind}{manager.control_count}",
        sender=name,
        headers=headers,
        destinations=(to,),
    )


def header(message: GroupMessage, key: str, protocol: str) -> Any:
    """The header ``key`` of ``message``; a missing one breaks the protocol."""
    try:
        return message.headers[key]
    except KeyError:
        raise ProtocolViolation(
            f"{protocol}: message {message.message_id} from {message.sender} carries no "
            f"{key!r} header (is the sender running another causality module?)"
        ) from None


def int_header(message: GroupMessage, key: str, protocol: str, minimum: int = 0) -> int:
    """An integer header no smaller than ``minimum``."""
    value = header(message, key, protocol)
    if type(value) is not int or value < minimum:
        raise ProtocolViolation(
            f"{protocol}: header {key!r} of {message.message_id} from {message.sender} "
            f"must be an integer >= {minimum}, got {value!r}"
        )
    return value


INT_ONLY = frozenset({int})
_STR_ONLY = frozenset({str})


def encode_clock(clock: Mapping[str, int]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``(names, counts)`` of the non-zero entries, names sorted (canonical)."""
    # C-level passes (every send of vector stamps one)
    names = sorted(clock)
    counts = tuple(map(clock.__getitem__, names))
    if 0 in counts:  # a member known to have sent nothing (a base of 0)
        return tuple(compress(names, counts)), tuple(filter(None, counts))
    return tuple(names), counts


def decode_clock(message: GroupMessage, key: str, protocol: str) -> Clock:
    """Inverse of :func:`encode_clock`, validating the shape."""
    value = header(message, key, protocol)
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)} must be a pair (names, counts), got "
            f"{value!r:.80}")
    names, counts = value
    if not (isinstance(names, tuple) and isinstance(counts, tuple)) or len(names) != len(
        counts
    ):
        raise ProtocolViolation(f"{_where(message, key, protocol)}: names and counts must "
                                "be tuples of equal length")
    # checked in C-level passes (this runs for every message that arrives with a clock);
    # the loop that says which entry is bad only runs for a bad one
    if not (_STR_ONLY.issuperset(map(type, names)) and all(names)
            and INT_ONLY.issuperset(map(type, counts)) and (not counts or min(counts) >= 0)):
        for name, count in zip(names, counts, strict=True):
            if type(name) is not str or not name or type(count) is not int or count < 0:
                raise ProtocolViolation(
                    f"{_where(message, key, protocol)}: bad entry {name!r}: {count!r}")
    return dict(zip(names, counts, strict=True))


def _where(message: GroupMessage, key: str, protocol: str) -> str:
    """The start of a bad-metadata error (built only for a bad header: formatting it for
    every message that arrives would cost more than checking it)."""
    return f"{protocol}: header {key!r} of {message.message_id} from {message.sender}"


def encode_matrix(matrix: Mapping[str, Mapping[str, int]]) -> tuple[tuple[str, ...], tuple]:
    """``(names, flat)`` where ``flat`` is ``(row, column, count)`` index triples of the
    non-zero entries; names sorted, entries in row-major order (canonical)."""
    names = sorted(
        {r for r, row in matrix.items() if any(row.values())}
        | {c for row in matrix.values() for c, v in row.items() if v}
    )
    index = {n: i for i, n in enumerate(names)}
    flat: list[int] = []
    for r in sorted(matrix):
        row = matrix[r]
        for c in sorted(row):
            v = row[c]
            if v:
                flat += (index[r], index[c], v)
    return tuple(names), tuple(flat)


def decode_matrix(message: GroupMessage, key: str, protocol: str) -> Matrix:
    """Inverse of :func:`encode_matrix`, validating the shape."""
    value = header(message, key, protocol)
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)} must be a pair (names, entries), got "
            f"{value!r:.80}")
    names, flat = value
    if not (isinstance(names, tuple) and isinstance(flat, tuple)) or len(flat) % 3:
        raise ProtocolViolation(f"{_where(message, key, protocol)}: names must be a tuple "
                                "and entries index triples")
    if not (_STR_ONLY.issuperset(map(type, names)) and all(names)):
        raise ProtocolViolation(
            f"{_where(message, key, protocol)}: names must be non-empty strings")
    size = len(names)
    rows, columns, counts = flat[0::3], flat[1::3], flat[2::3]
    # checked in C-level passes (this runs for every message that arrives with a stamp);
    # the loop below, which says which entry is bad, only runs for a bad stamp
    if not (INT_ONLY.issuperset(map(type, flat))
            and (not flat or (min(flat) >= 0 and max(rows) < size and max(columns) < size))):
        for i in range(0, len(flat), 3):
            r, c, v = flat[i : i + 3]
            if not (
                type(r) is int and type(c) is int and type(v) is int
                and 0 <= r < size and 0 <= c < size and v >= 0
            ):
                raise ProtocolViolation(
                    f"{_where(message, key, protocol)}: bad entry {flat[i : i + 3]!r}")
    matrix: Matrix = {}
    for r, c, v in zip(rows, columns, counts, strict=True):
        row = matrix.get(names[r])
        if row is None:
            row = matrix[names[r]] = {}
        row[names[c]] = v
    return matrix


def freeze_clock(clock: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """A canonical hashable form of a clock (zero entries dropped)."""
    return tuple(sorted((k, v) for k, v in clock.items() if v))


def freeze_matrix(matrix: Mapping[str, Mapping[str, int]]) -> tuple:
    """A canonical hashable form of a matrix (zero entries dropped)."""
    return tuple(
        (r, freeze_clock(row)) for r, row in sorted(matrix.items()) if any(row.values())
    )


def warn_held_on(manager: CausalityManager, name: str, log: logging.Logger) -> None:
    """Warn, on the module's ``log``, that ``name`` left while messages held here wait on
    it (receiver-side modules; they stay held until ``release_waiting_on``)."""
    waiting = [mid for mid, on in manager.waiting_for().items() if name in on]
    if waiting:
        log.warning("%s: %s left; %d held message(s) wait on it: %s (see "
                    "release_waiting_on)", manager.host.name, name, len(waiting),
                    ", ".join(waiting[:10]))


def drop_unsent_to(manager: CausalityManager, unsent: deque[SentMessage], name: str,
                   log: logging.Logger) -> deque[SentMessage]:
    """``unsent`` without the messages addressed to ``name``, who left: no one can receive
    them. They are counted as ``undeliverable`` and named in a warning (sender-side
    modules, whose unsent messages each have one destination), on the module's ``log``."""
    dropped = [m for m in unsent if m.destinations == (name,)]
    if not dropped:
        return unsent
    _report_unsent(manager, dropped, name)
    return deque(m for m in unsent if m.destinations != (name,))


def gone_before_sending(manager: CausalityManager, message: SentMessage) -> bool:
    """True, after reporting it undeliverable, if ``message`` (one destination) is
    addressed to someone who is no longer a member.

    The node checks destinations when the application sends, but the message reaches
    the module later: the member may have left in between, after its departure cleared
    what the module held for it. A sender-side module that sent it anyway would wait
    for an acknowledgement that can never come, and every later send with it (a
    departed name never returns: a member that comes back is ``NAME~2``)."""
    (dest,) = message.destinations
    if dest == manager.host.name or dest in manager.members:
        return False
    _report_unsent(manager, [message], dest)
    return True


def _report_unsent(manager: CausalityManager, dropped: list[SentMessage], name: str) -> None:
    manager.count("undeliverable", len(dropped))
    manager.host.report_undeliverable([m.message_id for m in dropped if m.is_user_message()],
                                      f"to {name} were not sent: it left")


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
    any more, or None.

    ``holder(entry)`` names what keeps an entry's message from delivery now (None:
    deliverable); ``still_held(entry, what)`` tells whether that still does (a module
    passes its delivery rule for both: applied to the whole stamp, and to the part of it
    that held the message). ``held_by``
    keeps, per message id, what held it at the last look, so a message still waiting
    for the same member costs one test instead of a pass over its whole stamp; the first
    deliverable entry found, and so the order of deliveries, is the one a full scan would
    find. The cache is the caller's, emptied when its buffer is replaced."""
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
