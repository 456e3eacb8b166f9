"""An example third-party plugin for groupcomm.

It adds a causality module, ``counting-none`` (arrival order, counting what passes),
and an extra receive filter, ``shout`` (upper-cases string payloads), through the
``groupcomm.plugins`` entry-point group, with no change to the framework.
"""

from __future__ import annotations

from typing import Any

from groupcomm.core.filtering import FilterHost, MessageFilter, MessageFilterCreator
from groupcomm.filters.none import NoneManager, NoneModule, NoneReceiveFilter
from groupcomm.plugins import hookimpl


class CountingReceiveFilter(NoneReceiveFilter):
    """Delivers in arrival order and counts deliveries."""

    def on_user_message(self, message: Any) -> None:
        self.manager.delivered = getattr(self.manager, "delivered", 0) + 1
        self.forward(message)


class CountingNoneModule(NoneModule):
    """``none`` plus a delivery counter on the manager."""

    name = "counting-none"
    description = "example plugin: arrival order, counting deliveries"

    def create_receive_filter(self, manager: NoneManager) -> CountingReceiveFilter:
        return CountingReceiveFilter(manager)


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
