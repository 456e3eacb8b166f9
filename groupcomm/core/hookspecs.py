"""The hooks a groupcomm plugin implements (pluggy project ``groupcomm``), marked with
:data:`hookimpl`; the registry (:mod:`groupcomm.core.registry`) loads plugins and calls
them. The specifications live in the core because the core imports nothing above it."""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "groupcomm"
#: The version of the plugin API (these hooks, the module base classes and
#: :mod:`groupcomm.module_kit`) as (major, minor): the minor version grows when something
#: is added, the major one when something is removed or changes meaning. A plugin states
#: the version it was written against as ``GROUPCOMM_PLUGIN_API = (2, 0)``; the registry
#: refuses another major version or a newer minor one (docs/writing-a-module.md).
PLUGIN_API: tuple[int, int] = (2, 0)
#: the attribute a plugin declares its API version in
PLUGIN_API_ATTRIBUTE = "GROUPCOMM_PLUGIN_API"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def groupcomm_causality_modules() -> list[type[Any]]:
    """Return the causality modules this plugin provides.

    A list (or tuple) of :class:`groupcomm.core.causality.CausalityModule` subclasses,
    each with a unique ``name`` and a one-line ``description``; or an empty list. The
    registry calls it when it first resolves a name and again whenever the set of
    plugins changes. An entry that is not such a class, or a hook that raises, is
    reported as a failed plugin (the other entries and plugins still load).
    """


@hookspec
def groupcomm_filters() -> list[dict[str, Any]]:
    """Return the extra filters this plugin provides.

    A list of dicts with ``name`` (str), ``description`` (one line), and ``send`` and/or
    ``receive``: callables taking keyword options and returning a
    :class:`groupcomm.core.filtering.MessageFilterCreator` for that side; optionally
    ``options``, a list of :class:`groupcomm.core.registry.FilterOption` (name, type,
    default, help): the registry then converts each ``--filter NAME:key=value`` string
    to its type (``int``, ``float``, ``bool`` or ``str``), passes the defaults of those
    not given, refuses an unknown key or a value that does not convert (one line naming
    the option, its type and what was given), and ``groupcomm filters`` lists them.
    Without ``options`` the callables get the strings as given. Called like
    :func:`groupcomm_causality_modules`, with the same reporting of bad entries.
    """
