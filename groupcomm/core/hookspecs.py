"""The hooks a groupcomm plugin implements (pluggy project ``groupcomm``).

A plugin is a module or object named by an entry point of the ``groupcomm.plugins``
group, whose functions are marked with :data:`hookimpl` (also importable from
``groupcomm.plugins`` and ``groupcomm.module_kit``). The built-in modules come through
the same group and the same hooks (``groupcomm.plugins.builtin``). The plugin manager
that loads plugins and calls these hooks is the registry, :mod:`groupcomm.core.registry`;
the specifications live in the core beside it because the core imports nothing of the
packages above it.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "groupcomm"
#: The version of the plugin API (these hooks, the module base classes of
#: :mod:`groupcomm.core.causality` and :mod:`groupcomm.module_kit`) as (major, minor).
#: A plugin states the version it was written against as a module-level
#: ``GROUPCOMM_PLUGIN_API = (2, 0)`` beside its hooks; the registry refuses it (reported
#: like any failed plugin) when the major version differs or its minor version is newer
#: than this one. A plugin that states none is loaded unchecked. The minor version grows
#: when something is added; the major one when something is removed or changes meaning.
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
    ``options``, a list of :class:`groupcomm.core.plugin_entries.FilterOption` (name, type,
    default, help): the registry then converts each ``--filter NAME:key=value`` string
    to its type (``int``, ``float``, ``bool`` or ``str``), passes the defaults of those
    not given, refuses an unknown key or a value that does not convert (one line naming
    the option, its type and what was given), and ``groupcomm filters`` lists them.
    Without ``options`` the callables get the strings as given. Called like
    :func:`groupcomm_causality_modules`, with the same reporting of bad entries.
    """
