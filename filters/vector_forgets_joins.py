"""``vector-forgets-joins`` (KNOWN BAD): ``vector`` whose late joiner ignores the bases.

A newcomer starts with an empty vector and ignores the ``base`` control messages the
members send it (see :mod:`filters.vector`, "Late joiners"), so it waits for messages
that were broadcast before it joined and were never addressed to it: the first message
that depends on one is held for ever. Everything else is ``vector``'s. Kept for the
model checker to catch with ``groupcomm check --join`` (a liveness counterexample) and
for the trace analysis to confirm (an undelivered message to a member that stayed).
"""

from __future__ import annotations

from collections.abc import Sequence

from groupcomm.filters.vector import VectorManager, VectorModule
from groupcomm.module_kit import ReceivedMessage

NAME = "vector-forgets-joins"


class ForgetfulVectorManager(VectorManager):
    """Joins late as if the session had just started."""

    def client_joined(
        self, client_name: str, application_name: str, session_name: str,
        is_new_session: bool, is_new_application: bool, all_users: Sequence[str],
    ) -> None:
        super().client_joined(client_name, application_name, session_name, is_new_session,
                              is_new_application, all_users)
        self.awaiting_base.clear()  # the defect: nothing is learnt from the members

    def on_control(self, message: ReceivedMessage) -> None:
        if message.user_message.kind == "base":
            return  # the defect: the members' counts are thrown away
        super().on_control(message)


class VectorForgetsJoinsModule(VectorModule):
    """KNOWN BAD: vector whose newcomer waits for messages sent before it joined."""

    name = NAME
    manager_class = ForgetfulVectorManager
    description = "KNOWN BAD: vector whose late joiner waits for messages sent before it joined"
    known_bad = True
