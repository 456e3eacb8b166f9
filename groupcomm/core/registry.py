"""Causality modules and extra filters by name: the pluggy plugin manager is the registry.

On first use the registry builds one :class:`pluggy.PluginManager` (hooks:
:mod:`groupcomm.core.hookspecs`) and loads every entry point of the
``groupcomm.plugins`` group with pluggy's ``load_setuptools_entrypoints``. The built-in
modules come the same way: this project declares ``builtin = groupcomm.plugins.builtin``,
a plugin module that imports the module classes and returns them from the same hooks a
third-party package implements. ``check_pending()`` then catches misspelt hooks. A name
resolves by asking the registered plugins' hooks (the answer is cached until the set of
plugins changes); there is no other table.

A plugin that fails — its import raises (``ImportError``, ``SyntaxError``, anything),
pluggy refuses it, it implements a hook that does not exist, its hook raises, or it
returns something that is not a module class or a filter entry
(:mod:`groupcomm.core.plugin_entries` checks them) — is logged as an error naming the
entry point, its distribution and module, and left out; everything else still loads.
:func:`plugin_failures` lists them, and the error for an unknown name names them too.

:func:`register_module`, :func:`register_filter` and :func:`register_plugin` add
plugins in code (a test's own module); a later registration of a name replaces an
earlier one, with a warning naming both origins.

A plugin written for another plugin API (its ``GROUPCOMM_PLUGIN_API``, against
:data:`~groupcomm.core.hookspecs.PLUGIN_API`) is refused and reported like any failed
plugin. :func:`default_modules` chooses by what the modules declare, never by name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from groupcomm.core import hookspecs
from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.hookspecs import hookimpl
from groupcomm.core.plugin_entries import (
    FilterInfo,
    FilterOption,
    IncompatiblePluginError,
    ModuleInfo,
    PluginFailure,
    PluginSource,
    RegistrationError,
    api_mismatch,
    describe,
    filter_entry,
    filter_info,
    module_info,
)


class UnknownModuleError(LookupError):
    """A causality module or filter name is not installed."""


#: the entry-point group of plugins (third-party packages and the built-ins alike)
ENTRY_POINT_GROUP = "groupcomm.plugins"
#: the distribution whose plugins are listed as "built-in"
PROJECT_DISTRIBUTION = "groupcomm"

log = logging.getLogger(__name__)

# re-entrant: a plugin's hook may itself look names up while the registry collects
_lock = threading.RLock()


def _entry_source(entry: Any, dist: Any, name: str | None = None) -> PluginSource:
    """The source of the entry point ``entry`` of the distribution ``dist``."""
    project = dist.metadata["name"] or "?"
    distribution = f"{project} {dist.version}"
    return PluginSource(name or entry.name, distribution, entry.value,
                        "built-in" if project == PROJECT_DISTRIBUTION else distribution)


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, refusing a plugin written for another plugin API before pluggy
    sees it, and leaving nothing behind of a plugin it refuses (pluggy records a plugin
    before it checks its hooks)."""

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        mismatch = api_mismatch(plugin)
        if mismatch:
            raise IncompatiblePluginError(mismatch)
        already = self.get_name(plugin)
        try:
            return super().register(plugin, name)
        except Exception:
            recorded = None if already is not None else self.get_name(plugin)
            if recorded is not None:
                self.unregister(plugin, recorded)
            raise


class _Registry:
    """The plugin manager and what is known about its plugins."""

    def __init__(self) -> None:
        self.manager = _PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.sources: dict[str, PluginSource] = {}
        self.load_failures: list[PluginFailure] = []
        self.hook_failures: list[PluginFailure] = []
        self.modules: dict[str, ModuleInfo] = {}
        self.filters: dict[str, FilterInfo] = {}
        self._key: tuple[Any, ...] | None = None
        self._collecting = False
        self._logged: set[str] = set()

    # -- loading -------------------------------------------------------------------

    def fail(self, source: PluginSource, error: BaseException | str,
             into: list[PluginFailure] | None = None) -> None:
        described = error if isinstance(error, str) else describe(error)
        failure = PluginFailure(source.name, source.distribution, source.module, described)
        (self.load_failures if into is None else into).append(failure)
        text = str(failure)
        if text not in self._logged:  # hooks are asked again when plugins change
            self._logged.add(text)
            log.error("groupcomm plugin failed to load: %s", text)
            if isinstance(error, BaseException):
                log.debug("traceback of plugin %s", source.name, exc_info=error)

    def load_entry_points(self) -> None:
        """Load the entry-point group with pluggy. pluggy stops at the first plugin
        that fails to import or to register; that one is reported and blocked, and
        loading goes on (pluggy skips the plugins registered or blocked already)."""
        manager = self.manager
        while True:
            try:
                manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
                break
            except Exception as error:  # ImportError, SyntaxError, raised at import, refused
                entry = self._entry_being_loaded()
                if entry is None:
                    raise
                self.fail(_entry_source(entry, entry.dist), error)
                manager.set_blocked(entry.name)
        for plugin, dist in manager.list_plugin_distinfo():
            name = manager.get_name(plugin)
            entry = next((e for e in dist.entry_points
                          if e.group == ENTRY_POINT_GROUP and e.name == name), None)
            if name is not None and entry is not None:
                self.sources[name] = _entry_source(entry, dist)
        self._load_shadowed()
        self.check_pending()

    def _entry_being_loaded(self) -> Any:
        """The entry point pluggy was loading when it stopped: the first of the group, in
        pluggy's order, neither registered nor blocked."""
        manager = self.manager
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if not (manager.has_plugin(entry.name) or manager.is_blocked(entry.name)):
                return entry
        return None

    def _load_shadowed(self) -> None:
        """pluggy loads one plugin per entry-point name: another distribution's entry
        point of the same name is loaded as ``name[project]``."""
        failed = {(failure.name, failure.distribution) for failure in self.load_failures}
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            source = _entry_source(entry, entry.dist)
            owner = self.sources.get(entry.name)
            if ((owner is not None and owner.distribution == source.distribution)
                    or (entry.name, source.distribution) in failed):
                continue  # the one pluggy loaded, or the one that failed
            shadowed = _entry_source(entry, entry.dist,
                                     f"{entry.name}[{entry.dist.metadata['name']}]")
            try:
                plugin = entry.load()
            except Exception as error:  # as pluggy's loading of the others, above
                self.fail(shadowed, error)
                continue
            self.add(plugin, shadowed)

    def add(self, plugin: Any, source: PluginSource) -> str | None:
        try:
            registered = self.manager.register(plugin, name=source.name)
        except Exception as error:  # incompatible, pluggy's validation, a name taken
            self.fail(source, error)
            return None
        if registered is not None:
            self.sources[registered] = source
        return registered

    def check_pending(self) -> None:
        """Report and unregister every plugin implementing a hook that does not exist."""
        while True:
            try:
                self.manager.check_pending()
                return
            except pluggy.PluginValidationError as error:
                name = self.manager.get_name(error.plugin) or repr(error.plugin)
                # pluggy's message ends with the plugin's repr: the report names it already
                message = str(error).removesuffix(f" in plugin {error.plugin!r}")
                self.fail(self.source(name), f"{type(error).__name__}: {message}")
                self.manager.unregister(error.plugin)
                self.sources.pop(name, None)

    def source(self, name: str) -> PluginSource:
        return self.sources.get(name) or PluginSource(name, origin=name)

    # -- asking the hooks ----------------------------------------------------------

    def collect(self) -> None:
        """Ask the plugins' hooks again if the set of plugins changed since last time."""
        hook = self.manager.hook
        key = (tuple(hook.groupcomm_causality_modules.get_hookimpls()),
               tuple(hook.groupcomm_filters.get_hookimpls()))
        if key == self._key or self._collecting:
            return  # unchanged, or a hook looking names up while it is asked
        self._collecting = True
        try:
            failures: list[PluginFailure] = []
            self.modules = self._entries("groupcomm_causality_modules", key[0], module_info,
                                         failures)
            self.filters = self._entries("groupcomm_filters", key[1], filter_entry, failures)
            self.hook_failures, self._key = failures, key
        finally:
            self._collecting = False

    def _entries(self, hook_name: str, impls: Iterable[pluggy.HookImpl],
                 check: Callable[[Any, str], Any], failures: list[PluginFailure]
                 ) -> dict[str, Any]:
        """What the plugins' ``hook_name`` hooks return, checked, by name.

        Each plugin's hook is called on its own (not through the hook relay, which would
        stop at the first that raises and merge the answers), so that what it returns and
        how it fails are its own; in registration order, a later plugin's name replacing
        an earlier one's."""
        found: dict[str, Any] = {}
        for impl in impls:
            source = self.source(impl.plugin_name)
            if impl.hookwrapper or impl.wrapper:
                self.fail(source, f"RegistrationError: {hook_name} is a hook wrapper; "
                          "groupcomm hooks return lists", failures)
                continue
            try:
                returned = impl.function()
            except Exception as error:  # a hook that raises names its plugin
                self.fail(source, error, failures)
                continue
            if returned is not None and not isinstance(returned, (list, tuple)):
                self.fail(source, f"RegistrationError: {hook_name} returned {returned!r}, "
                          "not a list", failures)
                continue
            for entry in returned or ():
                try:
                    info = check(entry, source.origin)
                except RegistrationError as error:
                    self.fail(source, error, failures)
                    continue
                previous = found.get(info.name)
                if previous is not None and _replaces(info, previous):
                    self._warn_replaced(info, previous)
                found[info.name] = info
        return found

    def _warn_replaced(self, info: ModuleInfo | FilterInfo,
                       previous: ModuleInfo | FilterInfo) -> None:
        kind = "causality module" if isinstance(info, ModuleInfo) else "filter"
        text = f"{kind} {info.name!r} from {info.origin} replaces the one from {previous.origin}"
        if text not in self._logged:
            self._logged.add(text)
            log.warning("%s", text)

    def failures(self) -> list[PluginFailure]:
        return [*self.load_failures, *self.hook_failures]


def _replaces(info: ModuleInfo | FilterInfo, previous: ModuleInfo | FilterInfo) -> bool:
    """Whether ``info`` is another module or filter than ``previous`` of the same name
    (the same class, or the same plugin's filter, registered again is not)."""
    if isinstance(info, ModuleInfo) and isinstance(previous, ModuleInfo):
        return info.factory is not previous.factory
    return info.origin != previous.origin


class _InCode:
    """A plugin holding one module or filter registered in code."""

    def __init__(self, modules: tuple[type[CausalityModule], ...] = (),
                 filters: tuple[dict[str, Any], ...] = ()) -> None:
        self.modules = list(modules)
        self.filters = list(filters)

    @hookimpl
    def groupcomm_causality_modules(self) -> list[type[CausalityModule]]:
        return self.modules

    @hookimpl
    def groupcomm_filters(self) -> list[dict[str, Any]]:
        return self.filters


_registry: _Registry | None = None


def _current() -> _Registry:
    global _registry
    with _lock:
        if _registry is None:
            _registry = _Registry()
            _registry.load_entry_points()
        return _registry


def _collected() -> _Registry:
    with _lock:
        registry = _current()
        registry.collect()
        return registry


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager every lookup asks (built on first use)."""
    return _current().manager


def plugin_failures() -> list[PluginFailure]:
    """The plugins that failed to load, or whose hooks failed, in the order met."""
    return _collected().failures()


def register_plugin(plugin: Any, name: str | None = None, origin: str = "") -> str | None:
    """Register a plugin object (a module or instance with :data:`hookimpl` functions)
    the way an entry point's is, misspelt hooks included: a plugin pluggy refuses is
    reported like a failed entry point. Returns the name it is registered under, or
    ``None`` when it was refused."""
    with _lock:
        registry = _current()
        plugin_name = name or registry.manager.get_canonical_name(plugin)
        source = PluginSource(plugin_name, origin=origin or plugin_name,
                              module=getattr(plugin, "__name__", ""))
        registered = registry.add(plugin, source)
        if registered is not None:
            registry.check_pending()
            if not registry.manager.has_plugin(registered):
                return None
        return registered


def _replace_in_code(plugin_name: str, plugin: _InCode | None, origin: str = "") -> None:
    """Unregister the plugin ``plugin_name`` registered in code, then register ``plugin``
    under that name (if one is given)."""
    with _lock:
        registry = _current()
        registry.manager.unregister(name=plugin_name)
        registry.sources.pop(plugin_name, None)
        if plugin is not None:
            registry.add(plugin, PluginSource(plugin_name, origin=origin))


def register_module(module: type[CausalityModule], origin: str = "") -> ModuleInfo:
    """Make the causality module class ``module`` available under its ``name``.

    It is registered as a plugin of its own; a later registration under the same name
    replaces the earlier one (with a warning naming both origins). Raises
    :class:`RegistrationError` for a class that is not a :class:`CausalityModule`
    subclass, has no name or no manager.
    """
    info = module_info(module, origin)
    _replace_in_code(f"module:{info.name}", _InCode(modules=(module,)), origin)
    return info


def register_filter(
    name: str,
    send: Callable[..., MessageFilterCreator[Any]] | None = None,
    receive: Callable[..., MessageFilterCreator[Any]] | None = None,
    description: str = "",
    origin: str = "",
    options: Iterable[FilterOption] = (),
) -> FilterInfo:
    """Make an extra filter available under ``name`` (send side, receive side or both),
    with its typed ``options`` if it declares any (see :class:`FilterOption`).

    Raises :class:`RegistrationError` without a name or without either side.
    """
    options = tuple(options)
    info = filter_info(name, send, receive, description, origin, options)
    entry = {"name": name, "send": send, "receive": receive, "description": description,
             "options": options}
    _replace_in_code(f"filter:{name}", _InCode(filters=(entry,)), origin)
    return info


def unregister_module(name: str) -> None:
    """Forget the module ``name`` registered with :func:`register_module` (for tests
    that registered their own); modules of entry-point plugins stay."""
    _replace_in_code(f"module:{name}", None)


def reload() -> None:
    """Forget every plugin (those registered in code too) and load the entry points
    again (tests, after installs)."""
    global _registry
    with _lock:
        _registry = None
        importlib.invalidate_caches()
    _current()


def available_modules() -> dict[str, ModuleInfo]:
    """Installed causality modules by name."""
    return dict(_collected().modules)


def default_modules(*, known_bad: bool = False, unicast: bool = False,
                    causal: bool = False) -> list[str]:
    """The installed modules a tool runs when not told which, in registration order (the
    built-ins first, then each plugin's): every module, but the known-bad ones unless
    ``known_bad``; with ``unicast``, only those that carry a send to one member (not
    ``broadcast-only``); with ``causal``, only those that promise causal order (their
    ``delivery_order`` is ``causal``, the default). Read from the modules' flags, never
    from their names."""
    return [name for name, info in _collected().modules.items()
            if (known_bad or not info.factory.known_bad)
            and not (unicast and info.factory.broadcast_only)
            and not (causal and info.factory.delivery_order != "causal")]


def available_filters() -> dict[str, FilterInfo]:
    """Installed extra filters by name."""
    return dict(_collected().filters)


def _unknown(kind: str, name: str, installed: Iterable[str],
             failures: list[PluginFailure]) -> UnknownModuleError:
    failed = ("; these plugins failed to load: " + "; ".join(map(str, failures))
              if failures else "")
    return UnknownModuleError(f"unknown {kind} {name!r}; installed: "
                              f"{', '.join(sorted(installed)) or '(none)'}{failed}")


def get_module(name: str) -> CausalityModule:
    """A fresh instance of the causality module ``name``.

    Raises :class:`UnknownModuleError` listing what is installed and which plugins
    failed to load.
    """
    with _lock:
        registry = _collected()
        info = registry.modules.get(name)
        if info is None:
            raise _unknown("causality module", name, registry.modules, registry.failures())
    return info.factory()


def get_filter(name: str) -> FilterInfo:
    """The extra filter ``name``; raises :class:`UnknownModuleError` listing what exists
    and which plugins failed to load."""
    with _lock:
        registry = _collected()
        info = registry.filters.get(name)
        if info is None:
            raise _unknown("filter", name, registry.filters, registry.failures())
    return info


def install(name: str) -> CausalityModule:
    """Set both selectors to the module ``name`` (one call) and return it."""
    module = get_module(name)
    module.install()
    return module
