"""Hook specifications of groupcomm plugins (the built-in modules use them too)."""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "groupcomm"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def groupcomm_causality_modules() -> list[type[Any]]:
    """Called once at start-up when the registry is first used.

    Return a list of :class:`groupcomm.core.causality.CausalityModule` subclasses (each with a
    unique ``name`` and a one-line ``description``), or an empty list.
    """


@hookspec
def groupcomm_filters() -> list[dict[str, Any]]:
    """Called once at start-up when the registry is first used.

    Return a list of extra filters, each a dict with ``name`` (str), ``description``
    (one line), and ``send`` and/or ``receive``: callables taking keyword options and
    returning a :class:`groupcomm.core.filtering.MessageFilterCreator` for that side.
    """
