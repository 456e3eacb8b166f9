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
    """Return the causality modules this plugin provides: a list (or tuple) of
    :class:`groupcomm.core.causality.CausalityModule` subclasses, each with a unique
    ``name`` and a one-line ``description``. Called when a name is first resolved and
    again whenever the set of plugins changes; an entry that is not such a class, or a
    hook that raises, is reported as a failed plugin (the rest still loads)."""


@hookspec
def groupcomm_filters() -> list[dict[str, Any]]:
    """Return the extra filters this plugin provides: dicts with ``name``, a one-line
    ``description``, ``send`` and/or ``receive`` (callables taking keyword options and
    returning a :class:`groupcomm.core.filtering.MessageFilterCreator` for that side)
    and optionally ``options``, a list of :class:`groupcomm.core.registry.FilterOption`:
    the registry then converts ``--filter NAME:key=value`` strings to their types and
    fills in defaults (docs/writing-a-module.md); without it the callables get the
    strings as given. Called and checked like :func:`groupcomm_causality_modules`."""
