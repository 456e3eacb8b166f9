"""An example third-party plugin for groupcomm.

It adds a causality module, ``counting-none`` (arrival order, counting what passes),
and an extra receive filter, ``shout`` (upper-cases string payloads), through the
``groupcomm.plugins`` entry-point group, with no change to the framework.
"""

from __future__ import annotations

from typing import Any

from groupcomm.filters.none import NoneManager, NoneModule
from groupcomm.module_kit import (
    FilterHost,
    MessageFilter,
    MessageFilterCreator,
    ReceivedMessage,
    hookimpl,
)


class CountingNoneManager(NoneManager):
    """Delivers in arrival order and counts deliveries."""

    def __init__(self, host: FilterHost) -> None:
        super().__init__(host)
        self.delivered = 0

    def on_receive(self, message: ReceivedMessage) -> None:
        self.delivered += 1
        self.deliver_upstream(message)


class CountingNoneModule(NoneModule):
    """``none`` plus a delivery counter on the manager."""

    name = "counting-none"
    manager_class = CountingNoneManager
    description = "example plugin: arrival order, counting deliveries"


class ShoutFilter(MessageFilter[Any]):
    """Upper-cases string payloads."""

    def filter_message(self, message: Any) -> None:
        if message.is_user_message() and isinstance(message.user_message, str):
            message = message.replace(user_message=message.user_message.upper())
        self.forward(message)


class ShoutCreator(MessageFilterCreator[Any]):
    description = "upper-cases string payloads"

    def get_message_filter(self, host: FilterHost) -> ShoutFilter:
        return ShoutFilter()


@hookimpl
def groupcomm_causality_modules() -> list[type[Any]]:
    return [CountingNoneModule]


@hookimpl
def groupcomm_filters() -> list[dict[str, Any]]:
    return [{"name": "shout", "receive": lambda **_: ShoutCreator(),
             "description": "example plugin: upper-cases string payloads"}]
