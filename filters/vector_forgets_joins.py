"""``vector-forgets-joins`` (KNOWN BAD): ``vector`` whose late joiner starts from an
empty vector and ignores the members' ``base`` counts, so it waits for ever for messages
broadcast before it joined (docs/protocols.md, "Known-bad modules"); caught by
``groupcomm check --join`` and by the trace analysis.
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
