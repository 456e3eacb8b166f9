"""What a chat line carries and how it is named the same for every viewer (docs/commands.md,
"groupcomm im"): the payload :class:`ChatLine` (text, the time it was said by the sender's
clock, the sender's own count of its lines, a lasting line id), its identity ``ann·3``,
and the person a member id stands for (``ann~2`` and a tab's ``ann:2`` are ``ann``).

Payloads travel pickled inside authenticated frames: :class:`ChatLine` must stay importable
at this module path on every peer. A plain ``str`` from an older peer is still a line (no
time; its identity is its message id, also the same for every viewer)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from groupcomm.core.member_ids import display_name

__all__ = ["ChatLine", "Entry", "clock", "conversation_text", "count_of", "entry", "entry_identity", "identity",
           "person", "said_of", "text_of"]

#: separates a person from their own count of lines in a line's identity (``ann·3``)
IDENTITY_SEPARATOR = "·"
#: one line of the conversation so far: (sender, text, message id, said at, count)
Entry = tuple[str, str, str, float, int]


@dataclass(frozen=True)
class ChatLine:
    """A line to everyone: ``said`` is the sender's clock (seconds since the epoch) when
    it was said, ``n`` the sender's own count of its lines (its identity ``person·n``),
    ``line`` the sender's lasting id for it (a tab sends a line again after a drop under
    the same id, and it is shown once), ``seen`` the latest line to everyone of each
    other person the sender had shown, as (person, n): a receiver whose module holds
    this line names what it waits for (:func:`groupcomm.apps.im_held.causes`)."""

    text: str
    said: float = 0.0
    n: int = 0
    line: str = ""
    seen: tuple[tuple[str, int], ...] = ()


def person(member: str) -> str:
    """The person a member id stands for: ``ann~2`` -> ``ann``; a tab's ``ann:2~3`` ->
    ``ann``."""
    return display_name(member).split(":", 1)[0]


def count_of(payload: Any) -> int:
    """The sender's count of the line ``payload`` (0: an older peer's, uncounted)."""
    n = getattr(payload, "n", 0)
    return n if type(n) is int and n > 0 else 0


def said_of(payload: Any) -> float:
    """When the line was said by its sender's clock (0.0: unknown)."""
    said = getattr(payload, "said", 0.0)
    return float(said) if type(said) in (int, float) and said > 0 else 0.0


def identity(sender: str, payload: Any, message_id: str) -> str:
    """The name every viewer gives this line: ``person·n`` when the payload counts it,
    else (an older peer's line) its message id."""
    n = count_of(payload)
    return f"{person(sender)}{IDENTITY_SEPARATOR}{n}" if n else message_id


def text_of(payload: Any) -> str:
    """The text of a chat payload (a ``str`` from an older peer is its own text)."""
    if isinstance(payload, str):
        return payload
    text = getattr(payload, "text", None)
    return text if isinstance(text, str) else repr(payload)


def clock(said: float) -> str:
    """``HH:MM`` of ``said`` in this viewer's local time; ``--:--`` when unknown."""
    return time.strftime("%H:%M", time.localtime(said)) if said > 0 else "--:--"


def entry(raw: Any) -> Entry:
    """One entry of a conversation handed over, as (sender, text, id, said, n): an older
    peer's has three fields. ``ValueError``/``TypeError`` when it is none."""
    if len(raw) == 3:
        who, text, ident = raw
        return str(who), str(text), str(ident), 0.0, 0
    who, text, ident, said, n = raw
    return str(who), str(text), str(ident), float(said), int(n)


def entry_identity(item: Entry) -> str:
    """The identity of a line of the conversation so far (as :func:`identity`)."""
    who, _, message_id, _, n = item
    return f"{person(who)}{IDENTITY_SEPARATOR}{n}" if n > 0 else message_id


def conversation_text(state: Any, messages: list[tuple[str, Any]]) -> str:
    """The conversation a store keeps as text, one ``[person] text`` a line: the lines
    of the handed-over ``state``, then the ``(sender, payload)`` messages after it that
    went to everyone (a private line is not the conversation's).
    ``TypeError``/``ValueError`` when ``state`` is no conversation."""
    history = [entry(raw) for raw in (state or [])]
    lines = [f"[{person(who)}] {text}" for who, text, *_ in history]
    lines += [f"[{person(sender)}] {text_of(payload)}" for sender, payload in messages
              if isinstance(payload, (str, ChatLine))]
    return "\n".join(lines)
