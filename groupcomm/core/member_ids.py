"""Member ids: how the session names each membership of a client (``carol``, then
``carol~2`` for the same name back after it left or was taken for gone; see
:mod:`groupcomm.protocol.membership`), and which client names are allowed."""

from __future__ import annotations

#: separates a name from its incarnation in a member id (``carol~2``)
INCARNATION_SEPARATOR = "~"
#: characters a client name may not contain: they build member and message ids
RESERVED_IN_NAMES = (INCARNATION_SEPARATOR, "#")


def member_id(name: str, incarnation: int) -> str:
    """The id peers know a membership by: ``name`` for incarnation 1, else ``name~N``."""
    return name if incarnation <= 1 else f"{name}{INCARNATION_SEPARATOR}{incarnation}"


def split_member(member: str) -> tuple[str, int]:
    """``carol~2`` -> ``("carol", 2)``; ``carol`` -> ``("carol", 1)``."""
    name, sep, number = member.rpartition(INCARNATION_SEPARATOR)
    if sep and name and number.isdigit() and int(number) >= 2:
        return name, int(number)
    return member, 1


def display_name(member: str) -> str:
    """The client name of a member id (``carol~2`` -> ``carol``)."""
    return split_member(member)[0]


def check_client_name(name: str) -> None:
    """Raise ``ValueError`` for a name that cannot be a client name."""
    if not name:
        raise ValueError("a client name must not be empty")
    reserved = [c for c in RESERVED_IN_NAMES if c in name]
    if reserved:
        raise ValueError(f"client name {name!r} contains {' and '.join(map(repr, reserved))}, "
                         "which member and message ids use (carol~2#1)")
