"""One colour per person, the same in every browser tab and in the terminal editor: a
slot of a six-colour palette chosen by a hash of the person's name (its tab number and
incarnation suffix left off), so it does not depend on who was seen first.
``groupcomm/web/static/colours.js`` computes the same slot; a test checks they agree."""

from __future__ import annotations

#: the palette's slots: the terminal's colour names, in the web page's order (``c0``..)
SLOTS = 6

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def person(member: str) -> str:
    """The person a member stands for: ``ann:2~3`` (ann's second tab, third
    incarnation) is ``ann``."""
    return member.split("~")[0].split(":")[0]


def colour_slot(member: str) -> int:
    """The palette slot (0..SLOTS-1) of ``member``'s person: FNV-1a (32 bits) of the
    name's UTF-8 bytes, modulo :data:`SLOTS`."""
    value = _FNV_OFFSET
    for byte in person(member).encode("utf-8"):
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value % SLOTS
