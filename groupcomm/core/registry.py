"""Causality modules and extra filters by name.

Plugins fill the registry; the rest of the framework looks things up in it. The
registry does not know who fills it: on the first lookup it calls every function
declared in the ``groupcomm.discovery`` entry-point group (this project declares
:func:`groupcomm.plugins.manager.discover`, which asks the built-in and third-party plugins through
pluggy and calls :func:`register_module` / :func:`register_filter`). Code can also
register directly, for example a test's own module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
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


#: entry-point group of the functions that fill the registry on first use
DISCOVERY_GROUP = "groupcomm.discovery"

log = logging.getLogger(__name__)

# re-entrant: discovery runs under the lock and registers through the same functions
_lock = threading.RLock()
_loaded = False
_modules: dict[str, ModuleInfo] = {}
_filters: dict[str, FilterInfo] = {}


class RegistrationError(ValueError):
    """A module or filter cannot be registered (no name, not a causality module, no
    filter creator on either side)."""


def register_module(module: type[CausalityModule], origin: str = "") -> ModuleInfo:
    """Make the causality module class ``module`` available under its ``name``.

    A later registration under the same name replaces the earlier one (with a warning
    naming both origins). Raises :class:`RegistrationError` for a class that is not a
    :class:`CausalityModule` subclass or has no name.
    """
    if not (isinstance(module, type) and issubclass(module, CausalityModule)):
        raise RegistrationError(f"{origin or 'a plugin'} registered {module!r}, which is "
                                "not a CausalityModule subclass")
    name = getattr(module, "name", None)
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{origin or 'a plugin'} registered a module without a "
                                f"name: {module!r}")
    info = ModuleInfo(name, module, getattr(module, "description", ""), origin)
    with _lock:
        previous = _modules.get(name)
        if previous is not None and previous.factory is not module:
            log.warning("causality module %r from %s replaces the one from %s",
                        name, origin, previous.origin)
        _modules[name] = info
    return info


def register_filter(
    name: str,
    send: Callable[..., MessageFilterCreator[Any]] | None = None,
    receive: Callable[..., MessageFilterCreator[Any]] | None = None,
    description: str = "",
    origin: str = "",
) -> FilterInfo:
    """Make an extra filter available under ``name`` (send side, receive side or both).

    Raises :class:`RegistrationError` without a name or without either side.
    """
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{origin or 'a plugin'} registered a filter without a name")
    if send is None and receive is None:
        raise RegistrationError(f"filter {name!r} from {origin or 'a plugin'} has neither a "
                                "send nor a receive side")
    info = FilterInfo(name, send, receive, description, origin)
    with _lock:
        _filters[name] = info
    return info


def unregister_module(name: str) -> None:
    """Forget the module ``name`` (for tests that registered their own)."""
    with _lock:
        _modules.pop(name, None)


def _ensure_loaded() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True  # before discovery: it registers through this module
        for entry in entry_points(group=DISCOVERY_GROUP):
            entry.load()()


def reload() -> None:
    """Forget what was registered and run discovery again (tests, after installs)."""
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
