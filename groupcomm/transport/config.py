"""What a communicator is built from, checked before any thread or socket exists:
the routing, per-client keys and the filter stacks of both pipelines."""

from __future__ import annotations

import os
from collections.abc import Sequence

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.messages import ReceivedMessage, SentMessage
from groupcomm.transport.curve import ClientKeys, CurveKeyError

ROUTINGS = ("relayed", "direct")


def check_routing(routing: str) -> None:
    """Raise ``ValueError`` for a routing that is not one of :data:`ROUTINGS`."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")


def client_keys(curve_dir: str | os.PathLike[str] | None, routing: str,
                name: str) -> ClientKeys | None:
    """``name``'s per-client keys from ``curve_dir`` (``None`` without one).

    Raises ``ValueError`` with direct routing (direct connections are not authenticated
    per client) and when the keys cannot be read.
    """
    if curve_dir is None:
        return None
    if routing != "relayed":
        raise ValueError("per-client keys (curve_dir) work with relayed routing only: "
                         "direct connections are not authenticated per client")
    try:
        return ClientKeys.from_dir(curve_dir, name)
    except CurveKeyError as error:
        raise ValueError(f"per-client keys: {error}") from None


def filter_stacks(
    causality: str | CausalityModule | None,
    send_filters: Sequence[MessageFilterCreator[SentMessage]] | None,
    receive_filters: Sequence[MessageFilterCreator[ReceivedMessage]] | None,
    extra_send: Sequence[MessageFilterCreator[SentMessage]],
    extra_receive: Sequence[MessageFilterCreator[ReceivedMessage]],
) -> tuple[Sequence[MessageFilterCreator[SentMessage]] | None,
           Sequence[MessageFilterCreator[ReceivedMessage]] | None]:
    """The send and receive filter factories, in pipeline order (see
    :class:`~groupcomm.transport.communicator.Communicator`). ``None`` leaves the choice
    to the selectors (:class:`~groupcomm.core.node.ProtocolNode` asks them)."""
    if causality is not None:
        from groupcomm.core.registry import get_module

        module = get_module(causality) if isinstance(causality, str) else causality
        send_filters = [module.send_creator()]
        receive_filters = [module.receive_creator()]
    if send_filters is not None:
        send_filters = [*send_filters, *extra_send]
    elif extra_send:
        from groupcomm.core.filtering import SendMessageFilterSelector

        send_filters = [SendMessageFilterSelector.get_message_filter_creator(), *extra_send]
    if receive_filters is not None:
        receive_filters = [*extra_receive, *receive_filters]
    elif extra_receive:
        from groupcomm.core.filtering import ReceivedMessageFilterSelector

        receive_filters = [
            *extra_receive, ReceivedMessageFilterSelector.get_message_filter_creator()
        ]
    return send_filters, receive_filters
