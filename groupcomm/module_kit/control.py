"""Control messages and departures: what a causality module sends that the application
never sees (a :class:`~groupcomm.core.messages.ControlMessage` payload, handed to the
receiving module's ``on_control``), and what it does with the messages a departure
strands."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping

from groupcomm.core.causality import CausalityManager
from groupcomm.core.messages import (
    ControlMessage,
    HeaderValue,
    SentMessage,
    checked_headers,
    sent_unchecked,
)
from groupcomm.core.tracing import EVENT_EXTRA

__all__ = ["control_message", "drop_unsent_to", "gone_before_sending", "warn_held_on"]

_NO_HEADERS: Mapping[str, HeaderValue] = {}

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
    return sent_unchecked(manager.application_name, manager.session_name,
                          ControlMessage(protocol, kind, about),
                          f"{name}~{kind}{manager.control_count}", name, (), (to,),
                          checked_headers(headers) if headers else _NO_HEADERS)


def warn_held_on(manager: CausalityManager, name: str, log: logging.Logger) -> None:
    """Warn, on the module's ``log``, that ``name`` left while messages held here wait on
    it (receiver-side modules; they stay held until ``release_waiting_on``)."""
    waiting = [mid for mid, on in manager.waiting_for().items() if name in on]
    if waiting:
        # the member's PeerLeft event names them too
        log.warning("%s: %s left; %d held message(s) wait on it: %s (see "
                    "release_waiting_on)", manager.host.name, name, len(waiting),
                    ", ".join(waiting[:10]), extra=EVENT_EXTRA)


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
    addressed to someone who left after the application sent it: a sender-side module
    that sent it anyway would wait for an acknowledgement that can never come, and
    every later send with it (a name never returns: a member that comes back is
    ``NAME~2``)."""
    (dest,) = message.destinations
    if dest == manager.host.name or dest in manager.members:
        return False
    _report_unsent(manager, [message], dest)
    return True


def _report_unsent(manager: CausalityManager, dropped: list[SentMessage], name: str) -> None:
    manager.count("undeliverable", len(dropped))
    manager.host.report_undeliverable([m.message_id for m in dropped if m.is_user_message()],
                                      f"to {name} were not sent: it left")

