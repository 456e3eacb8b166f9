"""Causality modules and extra filters by name: the pluggy plugin manager is the registry.

On first use the registry builds one :class:`pluggy.PluginManager` (hooks:
:mod:`groupcomm.core.hookspecs`) and registers every entry point of the
``groupcomm.plugins`` group. The built-in modules come the same way: this project
declares ``builtin = groupcomm.plugins.builtin``, a plugin module that imports the
module classes and returns them from the same hooks a third-party package implements.
``check_pending()`` then catches misspelt hooks. A name resolves by asking the
registered plugins' hooks (the answer is cached until the set of plugins changes);
there is no other table.

A plugin that fails — its import raises (``ImportError``, ``SyntaxError``, anything),
pluggy refuses it, it implements a hook that does not exist, its hook raises, or it
returns something that is not a module class or a filter entry — is logged as an error
naming the entry point, its distribution and module, and left out; everything else
still loads. :func:`plugin_failures` lists them, and the error for an unknown name
names them too.

:func:`register_module`, :func:`register_filter` and :func:`register_plugin` add
plugins in code (a test's own module); a later registration of a name replaces an
earlier one, with a warning naming both origins.

A plugin may state the plugin API it was written against (a module-level
``GROUPCOMM_PLUGIN_API = (1, 0)``); one whose major version differs from
:data:`~groupcomm.core.hookspecs.PLUGIN_API`'s, or whose minor version is newer, is
refused and reported like any failed plugin (``IncompatiblePluginError``). A filter may
declare typed options (:class:`FilterOption`); the registry converts the strings of a
``--filter NAME:key=value`` spec to them. :attr:`ModuleInfo.flags` and
:func:`default_modules` read what the modules declare, for the tools to choose by.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from groupcomm.core import hookspecs
from groupcomm.core.causality import CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.hookspecs import PLUGIN_API, PLUGIN_API_ATTRIBUTE, hookimpl


class UnknownModuleError(LookupError):
    """A causality module or filter name is not installed."""


class RegistrationError(ValueError):
    """A module or filter cannot be registered (no name, not a causality module, no
    filter creator on either side)."""


@dataclass(frozen=True)
class ModuleInfo:
    """A registered causality module."""

    name: str
    factory: Callable[[], CausalityModule]
    description: str
    origin: str

    @property
    def flags(self) -> tuple[str, ...]:
        """What the module declares about itself, read from its class attributes (the
        tools choose by these, never by name): ``known-bad``, ``broadcast-only``,
        ``sender-side`` (waits for acknowledgements), ``unicast-events`` (a send to
        several is that many unicasts), ``symmetry`` (declares its headers on its own
        class for ``check --symmetry``), ``commuting-controls`` (for ``check --por``)."""
        return module_flags(self.factory)


@dataclass(frozen=True)
class FilterOption:
    """One option of an extra filter (``--filter NAME:key=value,...``): its name, its
    type (``int``, ``float``, ``bool`` or ``str``), its default and one line of help."""

    name: str
    type: type
    default: Any
    help: str = ""

    def __post_init__(self) -> None:
        if self.type not in _CONVERTERS:
            raise RegistrationError(f"filter option {self.name!r}: type must be one of "
                                    f"int, float, bool, str, got {self.type!r}")

    def convert(self, filter_name: str, given: Any) -> Any:
        """``given`` (a string from a command line or config file, or a value passed in
        code) as this option's type; :class:`ValueError` naming the option if it is not
        one."""
        if not isinstance(given, str):
            if isinstance(given, self.type) and not (self.type is int and isinstance(given, bool)):
                return given
            given = str(given)
        try:
            return _CONVERTERS[self.type](given)
        except ValueError:
            raise ValueError(f"option {self.name!r} of filter {filter_name!r} takes "
                             f"{self.describe()}; got {given!r}") from None

    def describe(self) -> str:
        """``float, default 0.0: what it is``."""
        return (f"{self.type.__name__}, default {self.default!r}"
                + (f": {self.help}" if self.help else ""))


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_CONVERTERS: dict[type, Callable[[str], Any]] = {int: int, float: float, bool: _bool,
                                                 str: str}


@dataclass(frozen=True)
class FilterInfo:
    """A registered extra filter (send side, receive side, or both)."""

    name: str
    send: Callable[..., MessageFilterCreator[Any]] | None
    receive: Callable[..., MessageFilterCreator[Any]] | None
    description: str
    origin: str
    #: the options it declares (empty: it takes whatever it is given, as strings)
    options: tuple[FilterOption, ...] = ()


@dataclass(frozen=True)
class PluginSource:
    """Where a registered plugin came from."""

    name: str  #: the entry point's name (or the name it was registered under in code)
    distribution: str = ""  #: "project version" of the distribution declaring it
    module: str = ""  #: the entry point's value ("package.module" or "module:attr")
    origin: str = ""  #: what listings show: "built-in", the distribution, or the caller's


@dataclass(frozen=True)
class PluginFailure:
    """A plugin, or one of its hook results, that could not be used."""

    name: str
    distribution: str
    module: str
    error: str  #: "ErrorType: message"

    def __str__(self) -> str:
        where = ", ".join(part for part in (self.distribution, self.module) if part)
        return f"{self.name} ({where or 'registered in code'}): {self.error}"


#: the entry-point group of plugins (third-party packages and the built-ins alike)
ENTRY_POINT_GROUP = "groupcomm.plugins"
#: the distribution whose plugins are listed as "built-in"
PROJECT_DISTRIBUTION = "groupcomm"

log = logging.getLogger(__name__)

# re-entrant: a plugin's hook may itself look names up while the registry collects
_lock = threading.RLock()


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())  # one line, whatever the message holds
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _Registry:
    """The plugin manager and what is known about its plugins."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT)
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
        described = error if isinstance(error, str) else _describe(error)
        failure = PluginFailure(source.name, source.distribution, source.module, described)
        (self.load_failures if into is None else into).append(failure)
        text = str(failure)
        if text not in self._logged:  # hooks are asked again when plugins change
            self._logged.add(text)
            log.error("groupcomm plugin failed to load: %s", text)
            if isinstance(error, BaseException):
                log.debug("traceback of plugin %s", source.name, exc_info=error)

    def load_entry_points(self) -> None:
        seen: set[tuple[str, str]] = set()
        for dist in list(importlib.metadata.distributions()):
            project = dist.name or "?"
            for entry in dist.entry_points:
                if entry.group != ENTRY_POINT_GROUP or (project, entry.name) in seen:
                    continue  # the same distribution twice on sys.path loads once
                seen.add((project, entry.name))
                name = entry.name
                if self.manager.has_plugin(name):
                    name = f"{entry.name}[{project}]"  # two distributions, one name
                builtin = project == PROJECT_DISTRIBUTION
                distribution = f"{project} {dist.version}"
                source = PluginSource(name, distribution, entry.value,
                                      "built-in" if builtin else distribution)
                try:
                    plugin = entry.load()
                except Exception as error:  # ImportError, SyntaxError, raised at import
                    self.fail(source, error)
                    continue
                self.add(plugin, source)
        self.check_pending()

    def add(self, plugin: Any, source: PluginSource,
            failures: list[PluginFailure] | None = None) -> str | None:
        incompatible = _api_mismatch(plugin)
        if incompatible:
            self.fail(source, incompatible, failures)
            return None
        try:
            registered = self.manager.register(plugin, name=source.name)
        except Exception as error:  # pluggy.PluginValidationError, a name already taken
            self.fail(source, error, failures)
            return None
        if registered is not None:
            self.sources[registered] = source
        return registered

    def check_pending(self, failures: list[PluginFailure] | None = None) -> None:
        """Report and unregister every plugin implementing a hook that does not exist."""
        while True:
            try:
                self.manager.check_pending()
                return
            except pluggy.PluginValidationError as error:
                name = self.manager.get_name(error.plugin) or repr(error.plugin)
                # pluggy's message ends with the plugin's repr: the report names it already
                message = str(error).removesuffix(f" in plugin {error.plugin!r}")
                self.fail(self.source(name), f"{type(error).__name__}: {message}", failures)
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
            self._collect(key)
        finally:
            self._collecting = False

    def _collect(self, key: tuple[Any, ...]) -> None:
        failures: list[PluginFailure] = []
        modules: dict[str, ModuleInfo] = {}
        filters: dict[str, FilterInfo] = {}
        # registration order: a later plugin's name replaces an earlier one's
        for impl, entries in self._ask("groupcomm_causality_modules", key[0], failures):
            source = self.source(impl.plugin_name)
            for cls in entries:
                try:
                    info = _module_info(cls, source.origin)
                except RegistrationError as error:
                    self.fail(source, error, failures)
                    continue
                previous = modules.get(info.name)
                if previous is not None and previous.factory is not info.factory:
                    self._warn_replaced("causality module", info.name, info.origin,
                                        previous.origin)
                modules[info.name] = info
        for impl, entries in self._ask("groupcomm_filters", key[1], failures):
            source = self.source(impl.plugin_name)
            for entry in entries:
                try:
                    info = _filter_entry(entry, source.origin)
                except RegistrationError as error:
                    self.fail(source, error, failures)
                    continue
                previous = filters.get(info.name)
                if previous is not None and previous.origin != info.origin:
                    self._warn_replaced("filter", info.name, info.origin, previous.origin)
                filters[info.name] = info
        self.modules, self.filters, self.hook_failures = modules, filters, failures
        self._key = key

    def _ask(self, hook_name: str, impls: Iterable[pluggy.HookImpl],
             failures: list[PluginFailure]) -> Iterable[tuple[pluggy.HookImpl, list[Any]]]:
        for impl in impls:
            source = self.source(impl.plugin_name)
            if impl.hookwrapper or impl.wrapper:
                self.fail(source, f"RegistrationError: {hook_name} is a hook wrapper; groupcomm "
                          "hooks return lists", failures)
                continue
            try:
                returned = impl.function()
            except Exception as error:  # a hook that raises names its plugin
                self.fail(source, error, failures)
                continue
            if returned is None:
                continue
            if not isinstance(returned, (list, tuple)):
                self.fail(source, f"RegistrationError: {hook_name} returned {returned!r}, "
                          "not a list", failures)
                continue
            yield impl, list(returned)

    def _warn_replaced(self, kind: str, name: str, origin: str, previous: str) -> None:
        text = f"{kind} {name!r} from {origin} replaces the one from {previous}"
        if text not in self._logged:
            self._logged.add(text)
            log.warning("%s", text)

    def failures(self) -> list[PluginFailure]:
        return [*self.load_failures, *self.hook_failures]


def module_flags(module: Any) -> tuple[str, ...]:
    """The flags of a module class or instance (see :attr:`ModuleInfo.flags`)."""
    cls = module if isinstance(module, type) else type(module)
    flags = []
    for flag, attribute in (("known-bad", "known_bad"), ("broadcast-only", "broadcast_only"),
                            ("sender-side", "acknowledged_sends"),
                            ("unicast-events", "unicast_events")):
        if getattr(cls, attribute, False):
            flags.append(flag)
    # read on the exact class, as the checker does (a subclass is not covered)
    if cls.__dict__.get("symmetry_headers") is not None:
        flags.append("symmetry")
    if cls.__dict__.get("commuting_controls"):
        flags.append("commuting-controls")
    return tuple(flags)


def _api_mismatch(plugin: Any) -> str:
    """Why ``plugin`` cannot be used with this version of the plugin API (:data:`PLUGIN_API`),
    or "" when it can (it declares none, or a compatible one)."""
    declared = getattr(plugin, PLUGIN_API_ATTRIBUTE, None)
    if declared is None:
        return ""
    if not (isinstance(declared, tuple) and len(declared) == 2
            and all(type(part) is int and part >= 0 for part in declared)):
        return (f"IncompatiblePluginError: {PLUGIN_API_ATTRIBUTE} must be a pair of "
                f"integers (major, minor), got {declared!r}")
    major, minor = declared
    if major != PLUGIN_API[0] or minor > PLUGIN_API[1]:
        return (f"IncompatiblePluginError: written for plugin API {major}.{minor}; this "
                f"groupcomm provides {PLUGIN_API[0]}.{PLUGIN_API[1]} (a plugin needs the "
                f"same major version and a minor version no newer)")
    return ""


def _module_info(module: Any, origin: str) -> ModuleInfo:
    if not (isinstance(module, type) and issubclass(module, CausalityModule)):
        raise RegistrationError(f"{origin or 'a plugin'} registered {module!r}, which is "
                                "not a CausalityModule subclass")
    name = getattr(module, "name", None)
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{origin or 'a plugin'} registered a module without a "
                                f"name: {module!r}")
    return ModuleInfo(name, module, getattr(module, "description", ""), origin)


def _filter_info(name: Any, send: Any, receive: Any, description: Any,
                 origin: str, options: Any = ()) -> FilterInfo:
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{origin or 'a plugin'} registered a filter without a name")
    if send is None and receive is None:
        raise RegistrationError(f"filter {name!r} from {origin or 'a plugin'} has neither a "
                                "send nor a receive side")
    for side, factory in (("send", send), ("receive", receive)):
        if factory is not None and not callable(factory):
            raise RegistrationError(f"filter {name!r} from {origin or 'a plugin'}: its "
                                    f"{side} side {factory!r} is not callable")
    options = tuple(options or ())
    for option in options:
        if not isinstance(option, FilterOption):
            raise RegistrationError(f"filter {name!r} from {origin or 'a plugin'}: option "
                                    f"{option!r} is not a FilterOption")
    if options:
        send, receive = (_typed(name, factory, options) for factory in (send, receive))
    return FilterInfo(name, send, receive, description or "", origin, options)


def _typed(name: str, factory: Callable[..., Any] | None,
           options: tuple[FilterOption, ...]) -> Callable[..., Any] | None:
    """``factory`` called with every declared option, converted to its type (defaults
    for those not given); an undeclared key is a :class:`ValueError` naming the ones
    there are."""
    if factory is None:
        return None
    declared = {option.name: option for option in options}

    def typed(**given: Any) -> Any:
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise ValueError(f"filter {name!r} has no option {', '.join(unknown)}; it takes "
                             + "; ".join(f"{o.name} ({o.describe()})" for o in options))
        return factory(**{key: option.convert(name, given[key]) if key in given
                          else option.default for key, option in declared.items()})

    return typed


def _filter_entry(entry: Any, origin: str) -> FilterInfo:
    if not isinstance(entry, dict):
        raise RegistrationError(f"{origin or 'a plugin'} returned the filter entry "
                                f"{entry!r}, which is not a dict")
    return _filter_info(entry.get("name"), entry.get("send"), entry.get("receive"),
                        entry.get("description", ""), origin, entry.get("options", ()))


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


def unregister_plugin(name: str) -> None:
    """Unregister the plugin registered under ``name`` (nothing when there is none)."""
    with _lock:
        registry = _current()
        plugin = registry.manager.get_plugin(name)
        if plugin is not None:
            registry.manager.unregister(plugin)
        registry.sources.pop(name, None)


def _replace_in_code(plugin_name: str, plugin: _InCode, origin: str) -> None:
    with _lock:
        unregister_plugin(plugin_name)
        _current().add(plugin, PluginSource(plugin_name, origin=origin))


def register_module(module: type[CausalityModule], origin: str = "") -> ModuleInfo:
    """Make the causality module class ``module`` available under its ``name``.

    It is registered as a plugin of its own; a later registration under the same name
    replaces the earlier one (with a warning naming both origins). Raises
    :class:`RegistrationError` for a class that is not a :class:`CausalityModule`
    subclass or has no name.
    """
    info = _module_info(module, origin)
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
    info = _filter_info(name, send, receive, description, origin, options)
    entry = {"name": name, "send": send, "receive": receive, "description": description,
             "options": options}
    _replace_in_code(f"filter:{name}", _InCode(filters=(entry,)), origin)
    return info


def unregister_module(name: str) -> None:
    """Forget the module ``name`` registered with :func:`register_module` (for tests
    that registered their own); modules of entry-point plugins stay."""
    unregister_plugin(f"module:{name}")


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
    names = []
    for name, info in _collected().modules.items():
        cls = info.factory
        if getattr(cls, "known_bad", False) and not known_bad:
            continue
        if unicast and getattr(cls, "broadcast_only", False):
            continue
        if causal and getattr(cls, "delivery_order", "causal") != "causal":
            continue
        names.append(name)
    return names


def available_filters() -> dict[str, FilterInfo]:
    """Installed extra filters by name."""
    return dict(_collected().filters)


def _failed_suffix(failures: list[PluginFailure]) -> str:
    if not failures:
        return ""
    return "; these plugins failed to load: " + "; ".join(map(str, failures))


def get_module(name: str) -> CausalityModule:
    """A fresh instance of the causality module ``name``.

    Raises :class:`UnknownModuleError` listing what is installed and which plugins
    failed to load.
    """
    with _lock:
        registry = _collected()
        info = registry.modules.get(name)
        if info is None:
            raise UnknownModuleError(
                f"unknown causality module {name!r}; installed: "
                f"{', '.join(sorted(registry.modules)) or '(none)'}"
                f"{_failed_suffix(registry.failures())}"
            )
    return info.factory()


def get_filter(name: str) -> FilterInfo:
    """The extra filter ``name``; raises :class:`UnknownModuleError` listing what exists
    and which plugins failed to load."""
    with _lock:
        registry = _collected()
        info = registry.filters.get(name)
        if info is None:
            raise UnknownModuleError(
                f"unknown filter {name!r}; installed: "
                f"{', '.join(sorted(registry.filters)) or '(none)'}"
                f"{_failed_suffix(registry.failures())}"
            )
    return info


def install(name: str) -> CausalityModule:
    """Set both selectors to the module ``name`` (one call) and return it."""
    module = get_module(name)
    module.install()
    return module
