"""Discovery: the plugin manager that asks built-in and third-party plugins, and fills
the registry with what they return (:func:`discover`, declared in the
``groupcomm.discovery`` entry-point group that :mod:`groupcomm.core.registry` reads)."""

from __future__ import annotations

import logging
from typing import Any

import pluggy

from groupcomm.core.registry import (
    FilterInfo,
    ModuleInfo,
    RegistrationError,
    register_filter,
    register_module,
)
from groupcomm.plugins import builtin, hookspecs

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "groupcomm.plugins"


class PluginError(RuntimeError):
    """A plugin is broken (misspelt hook, bad return value, duplicate name)."""


def plugin_manager(extra: tuple[Any, ...] = ()) -> pluggy.PluginManager:
    """A manager with the built-ins, every ``groupcomm.plugins`` entry point and the
    ``extra`` plugin objects loaded.

    Raises :class:`PluginError` when a plugin implements a hook that does not exist
    (a misspelt hook name would otherwise be silently ignored).
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(builtin, name="builtin")
    try:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    except Exception as error:  # an entry point that does not import names itself
        raise PluginError(f"a groupcomm plugin failed to load: {error!r}") from None
    for plugin in extra:
        manager.register(plugin)
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as error:
        raise PluginError(f"a groupcomm plugin is broken: {error}") from None
    return manager


def _origin(manager: pluggy.PluginManager, plugin: Any) -> str:
    for plugin_obj, dist in manager.list_plugin_distinfo():
        if plugin_obj is plugin:
            return f"{dist.project_name} {dist.version}"
    return "built-in" if plugin is builtin else getattr(plugin, "__name__", repr(plugin))


def collect() -> tuple[dict[str, Any], dict[str, Any]]:
    """Ask every plugin for its modules and filters; returns registry entries by name."""
    manager = plugin_manager()
    modules: dict[str, ModuleInfo] = {}
    filters: dict[str, FilterInfo] = {}
    for impl in manager.hook.groupcomm_causality_modules.get_hookimpls():
        origin = _origin(manager, impl.plugin)
        for cls in impl.function() or []:
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {origin} returned a module without a name: {cls!r}")
            if name in modules:
                log.warning("causality module %r from %s replaces the one from %s",
                            name, origin, modules[name].origin)
            modules[name] = ModuleInfo(name, cls, getattr(cls, "description", ""), origin)
    for impl in manager.hook.groupcomm_filters.get_hookimpls():
        origin = _origin(manager, impl.plugin)
        for entry in impl.function() or []:
            try:
                name = entry["name"]
                filters[name] = FilterInfo(
                    name, entry.get("send"), entry.get("receive"),
                    entry.get("description", ""), origin,
                )
            except (KeyError, TypeError) as error:
                raise PluginError(f"plugin {origin} returned a bad filter entry: {error}") from None
    return modules, filters


def discover() -> None:
    """Fill the registry with every plugin's modules and filters (built-ins first, so a
    third-party module of the same name replaces the built-in one, with a warning)."""
    modules, filters = collect()
    try:
        for info in modules.values():
            register_module(info.factory, info.origin)
        for info in filters.values():
            register_filter(info.name, info.send, info.receive, info.description, info.origin)
    except RegistrationError as error:
        raise PluginError(str(error)) from None
