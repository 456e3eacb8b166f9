"""Which member name a tab gets when the tabs of one session are spread over several
gateways (docs/deploy.md, "Tabs of one session on several gateways").

A gateway names a person's tabs ``ann``, ``ann:2``, ... A second gateway serving the
same session cannot see the first one's tabs, only the session's members, so it skips
the names its own members of that session see in use, and when the session still
refuses a name (``duplicate_name``: a tab on the other gateway took it a moment before,
or none of this gateway's members is in the session yet to see it) it tries the next.
A name whose holder does not answer (its gateway died) is taken over by the session
server after half its heartbeat timeout, as for any client restarted under its name."""

from __future__ import annotations

from collections.abc import Iterable

from groupcomm.core.member_ids import display_name
from groupcomm.transport.communicator import JoinError

#: the session server's refusal of a name held by a member that answers
DUPLICATE_NAME = "duplicate_name:"


def names_in_use(member_lists: Iterable[Iterable[str]]) -> set[str]:
    """The client names (``ann:2``, not ``ann:2~3``) of the members in any of the lists
    (each local tab member's view of the session)."""
    return {display_name(member) for members in member_lists for member in members}


def is_name_taken(error: JoinError) -> bool:
    """True when the join was refused because the name is held by a live member."""
    return str(error).startswith(DUPLICATE_NAME)
