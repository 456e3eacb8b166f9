"""Causality modules and extra filters by name.

The built-in modules are registered through the same plugin hooks as third-party
ones (see :mod:`plugins`); this module is the lookup the rest of the framework uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator


class UnknownModuleError(LookupError):
    """A causality module or filter name is not installed."""


@dataclass(frozen=True)
class ModuleInfo:
    """A registered causality module."""

    name: str
    factory: Callable[[], CausalityModule]
    description: str
    origin: str


@dataclass(frozen=True)
class FilterInfo:
    """A registered extra filter (send side, receive side, or both)."""

    name: str
    send: Callable[..., MessageFilterCreator[Any]] | None
    receive: Callable[..., MessageFilterCreator[Any]] | None
    description: str
    origin: str


_lock = threading.Lock()
_loaded = False
_modules: dict[str, ModuleInfo] = {}
_filters: dict[str, FilterInfo] = {}


def _ensure_loaded() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        from plugins.manager import collect  # late: plugins import the framework

        modules, filters = collect()
        _modules.update(modules)
        _filters.update(filters)
        _loaded = True


def reload() -> None:
    """Forget what was discovered and ask the plugins again (tests, after installs)."""
    global _loaded
    with _lock:
        _loaded = False
        _modules.clear()
        _filters.clear()
    _ensure_loaded()


def available_modules() -> dict[str, ModuleInfo]:
    """Installed causality modules by name."""
    _ensure_loaded()
    return dict(_modules)


def available_filters() -> dict[str, FilterInfo]:
    """Installed extra filters by name."""
    _ensure_loaded()
    return dict(_filters)


def get_module(name: str) -> CausalityModule:
    """A fresh instance of the causality module ``name``.

    Raises :class:`UnknownModuleError` listing what is installed.
    """
    modules = available_modules()
    info = modules.get(name)
    if info is None:
        raise UnknownModuleError(
            f"unknown causality module {name!r}; installed: {', '.join(sorted(modules))}"
        )
    return info.factory()


def get_filter(name: str) -> FilterInfo:
    """The extra filter ``name``; raises :class:`UnknownModuleError` listing what exists."""
    filters = available_filters()
    info = filters.get(name)
    if info is None:
        raise UnknownModuleError(
            f"unknown filter {name!r}; installed: {', '.join(sorted(filters)) or '(none)'}"
        )
    return info


def install(name: str) -> CausalityModule:
    """Set both selectors to the module ``name`` (one call) and return it."""
    module = get_module(name)
    module.install()
    return module
