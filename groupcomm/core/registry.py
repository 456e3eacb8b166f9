"""Causality modules and extra filters by name: the pluggy plugin manager is the registry.

Every plugin, the built-ins included (``builtin = groupcomm.plugins.builtin``), is an
entry point of the ``groupcomm.plugins`` group loaded by pluggy; a name resolves by
asking the plugins' hooks (:mod:`groupcomm.core.hookspecs`), the answers kept until the
set of plugins changes. A plugin that fails (its import raises, pluggy refuses it, it
states another plugin API, a hook is misspelt, raises or returns something that is not
a module class or a filter entry) is logged once with its entry point, distribution and
error, left out, listed by :func:`plugin_failures` and named in the error for an
unknown name; the other plugins still load. Code registers its own with
:func:`register_module`, :func:`register_filter` and :func:`register_plugin`; a later
module or filter of a name replaces an earlier one, with a warning naming both.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple

import pluggy

from groupcomm.core import hookspecs
from groupcomm.core.causality import CausalityManager, CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.hookspecs import PLUGIN_API, PLUGIN_API_ATTRIBUTE, hookimpl

#: the entry-point group of plugins (third-party packages and the built-ins alike)
ENTRY_POINT_GROUP = "groupcomm.plugins"
#: the distribution whose plugins are listed as "built-in"
PROJECT_DISTRIBUTION = "groupcomm"

log = logging.getLogger(__name__)

# re-entrant: a plugin's hook may itself look names up while the registry collects
_lock = threading.RLock()


class UnknownModuleError(LookupError):
    """A causality module or filter name is not installed."""


class RegistrationError(ValueError):
    """A module or filter cannot be registered (no name, not a causality module, no
    manager, no filter creator on either side)."""


class IncompatiblePluginError(RegistrationError):
    """A plugin states a plugin API this groupcomm does not provide."""


@dataclass(frozen=True)
class PluginFailure:
    """A plugin, or one of its hook results, that could not be used."""

    name: str  #: the entry point's name (or the name it was registered under in code)
    distribution: str  #: "project version" of the distribution declaring it
    module: str  #: the entry point's value ("package.module" or "module:attr")
    error: str  #: "ErrorType: message"

    def __str__(self) -> str:
        where = ", ".join(part for part in (self.distribution, self.module) if part)
        return f"{self.name} ({where or 'registered in code'}): {self.error}"


class _Source(NamedTuple):
    """Where a plugin came from; ``origin`` is what listings show: "built-in", the
    distribution, or what the code that registered it said."""

    name: str
    distribution: str = ""
    module: str = ""
    origin: str = ""


#: flag -> the module class attribute that sets it
_FLAG_ATTRIBUTES = (("known-bad", "known_bad"), ("broadcast-only", "broadcast_only"),
                    ("sender-side", "acknowledged_sends"),
                    ("unicast-events", "unicast_events"))


@dataclass(frozen=True)
class ModuleInfo:
    """A registered causality module; ``factory`` is its class (calling it makes a
    fresh instance)."""

    name: str
    factory: type[CausalityModule]
    description: str
    origin: str

    @property
    def flags(self) -> tuple[str, ...]:
        """What the module declares about itself, read from its class attributes (the
        tools choose by these, never by name; docs/writing-a-module.md, section 2)."""
        cls = self.factory
        flags = [flag for flag, attribute in _FLAG_ATTRIBUTES if getattr(cls, attribute, False)]
        # read on the exact class, as the checker does (a subclass is not covered)
        if cls.__dict__.get("symmetry_headers") is not None:
            flags.append("symmetry")
        if cls.__dict__.get("commuting_controls"):
            flags.append("commuting-controls")
        return tuple(flags)


_BOOLS = {"1": True, "true": True, "yes": True, "on": True,
          "0": False, "false": False, "no": False, "off": False}
_CONVERTERS: dict[type, Callable[[str], Any]] = {
    int: int, float: float, bool: lambda text: _BOOLS[text.strip().lower()], str: str}


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
        except (ValueError, KeyError):
            raise ValueError(f"option {self.name!r} of filter {filter_name!r} takes "
                             f"{self.describe()}; got {given!r}") from None

    def describe(self) -> str:
        """``float, default 0.0: what it is``."""
        return (f"{self.type.__name__}, default {self.default!r}"
                + (f": {self.help}" if self.help else ""))


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


def module_info(module: Any, origin: str) -> ModuleInfo:
    """``module`` (a hook's entry) as a :class:`ModuleInfo`; :class:`RegistrationError`
    when it is not a named :class:`CausalityModule` subclass that says how to make its
    manager."""
    who = origin or "a plugin"
    if not (isinstance(module, type) and issubclass(module, CausalityModule)):
        raise RegistrationError(f"{who} registered {module!r}, which is not a "
                                "CausalityModule subclass")
    name = getattr(module, "name", None)
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{who} registered a module without a name: {module!r}")
    manager = getattr(module, "manager_class", None)
    if module.create_manager is CausalityModule.create_manager and not (
            isinstance(manager, type) and issubclass(manager, CausalityManager)):
        raise RegistrationError(f"module {name!r} from {who} declares no manager_class "
                                f"(a CausalityManager subclass), got {manager!r}")
    return ModuleInfo(name, module, getattr(module, "description", ""), origin)


def filter_info(entry: Any, origin: str) -> FilterInfo:
    """A filter entry (the dict a ``groupcomm_filters`` hook returns) as a
    :class:`FilterInfo` whose factories convert the options it declares;
    :class:`RegistrationError` for an entry that is not a dict, has no name or no side,
    a side that is not callable or an option that is not a :class:`FilterOption`."""
    who = origin or "a plugin"
    if not isinstance(entry, dict):
        raise RegistrationError(f"{who} returned the filter entry {entry!r}, which is not "
                                "a dict")
    name, send, receive = entry.get("name"), entry.get("send"), entry.get("receive")
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{who} registered a filter without a name")
    if send is None and receive is None:
        raise RegistrationError(f"filter {name!r} from {who} has neither a send nor a "
                                "receive side")
    for side, factory in (("send", send), ("receive", receive)):
        if factory is not None and not callable(factory):
            raise RegistrationError(f"filter {name!r} from {who}: its {side} side "
                                    f"{factory!r} is not callable")
    options = tuple(entry.get("options") or ())
    for option in options:
        if not isinstance(option, FilterOption):
            raise RegistrationError(f"filter {name!r} from {who}: option {option!r} is not "
                                    "a FilterOption")
    if options:
        send, receive = (_typed(name, factory, options) for factory in (send, receive))
    return FilterInfo(name, send, receive, entry.get("description") or "", origin, options)


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


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, refusing a plugin that states another major plugin API or a
    newer minor one (:data:`PLUGIN_API`; one that states none is loaded unchecked), and
    leaving nothing behind of a plugin it refuses (pluggy records a plugin before it
    checks its hooks)."""

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        declared = getattr(plugin, PLUGIN_API_ATTRIBUTE, None)
        if declared is not None:
            if not (isinstance(declared, tuple) and len(declared) == 2
                    and all(type(part) is int and part >= 0 for part in declared)):
                raise IncompatiblePluginError(f"{PLUGIN_API_ATTRIBUTE} must be a pair of "
                                              f"integers (major, minor), got {declared!r}")
            major, minor = declared
            if major != PLUGIN_API[0] or minor > PLUGIN_API[1]:
                raise IncompatiblePluginError(
                    f"written for plugin API {major}.{minor}; this groupcomm provides "
                    f"{PLUGIN_API[0]}.{PLUGIN_API[1]} (a plugin needs the same major "
                    "version and a minor version no newer)")
        already = self.get_name(plugin)
        try:
            return super().register(plugin, name)
        except Exception:
            if already is None and self.get_name(plugin) is not None:
                self.unregister(plugin)
            raise


class _Registry:
    """The plugin manager, where its plugins came from, and what their hooks returned."""

    def __init__(self) -> None:
        self.manager = _PluginManager(hookspecs.PROJECT)
        self.manager.add_hookspecs(hookspecs)
        self.sources: dict[str, _Source] = {}
        self.load_failures: list[PluginFailure] = []
        self.hook_failures: list[PluginFailure] = []
        self.modules: dict[str, ModuleInfo] = {}
        self.filters: dict[str, FilterInfo] = {}
        self._key: tuple[Any, ...] | None = None
        self._logged: set[str] = set()  # hooks are asked again when plugins change

    def _log_once(self, level: int, text: str) -> bool:
        if text in self._logged:
            return False
        self._logged.add(text)
        log.log(level, "%s", text)
        return True

    def fail(self, source: _Source, error: BaseException | str,
             into: list[PluginFailure] | None = None) -> None:
        if isinstance(error, BaseException):
            text = " ".join(str(error).split())  # one line, whatever the message holds
            described = f"{type(error).__name__}: {text}" if text else type(error).__name__
        else:
            described = error
        failure = PluginFailure(source.name, source.distribution, source.module, described)
        (self.load_failures if into is None else into).append(failure)
        if (self._log_once(logging.ERROR, f"groupcomm plugin failed to load: {failure}")
                and isinstance(error, BaseException)):
            log.debug("traceback of plugin %s", source.name, exc_info=error)

    def load_entry_points(self) -> None:
        """Each entry point of the group through pluggy's loader, which loads one plugin
        per name: another distribution's entry point of a name taken is registered as
        ``name[project]``. A plugin that fails is reported (and its name blocked)."""
        manager = self.manager
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            project = entry.dist.metadata["name"] or "?"
            distribution = f"{project} {entry.dist.version}"
            taken = manager.has_plugin(entry.name) or manager.is_blocked(entry.name)
            source = _Source(f"{entry.name}[{project}]" if taken else entry.name,
                             distribution, entry.value,
                             "built-in" if project == PROJECT_DISTRIBUTION else distribution)
            try:
                if taken:
                    self.add(entry.load(), source)
                else:
                    manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP, entry.name)
                    self.sources[entry.name] = source
            except Exception as error:  # ImportError, SyntaxError, raised at import, refused
                self.fail(source, error)
                if not taken:
                    manager.set_blocked(entry.name)
        self.check_pending()

    def add(self, plugin: Any, source: _Source) -> str | None:
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

    def source(self, name: str) -> _Source:
        return self.sources.get(name) or _Source(name, origin=name)

    def collect(self) -> None:
        """Ask the plugins' hooks again if the set of plugins changed since last time (a
        hook that looks names up while it is asked gets the answers of last time)."""
        hook = self.manager.hook
        key = (tuple(hook.groupcomm_causality_modules.get_hookimpls()),
               tuple(hook.groupcomm_filters.get_hookimpls()))
        if key == self._key:
            return
        self._key = key
        failures: list[PluginFailure] = []
        modules = self._entries("groupcomm_causality_modules", key[0], module_info, failures)
        filters = self._entries("groupcomm_filters", key[1], filter_info, failures)
        self.modules, self.filters, self.hook_failures = modules, filters, failures

    def _entries(self, hook_name: str, impls: Iterable[pluggy.HookImpl],
                 check: Callable[[Any, str], Any], failures: list[PluginFailure]
                 ) -> dict[str, Any]:
        """What the plugins' ``hook_name`` hooks return, checked, by name; each plugin's
        hook called on its own (the hook relay would stop at the first that raises and
        merge the answers), in registration order, a later name replacing an earlier."""
        found: dict[str, Any] = {}
        for impl in impls:
            source = self.source(impl.plugin_name)
            try:
                if impl.hookwrapper or impl.wrapper:  # calling one would make a generator
                    raise RegistrationError(f"{hook_name} is a hook wrapper; groupcomm hooks "
                                            "return lists")
                returned = impl.function()
                if returned is not None and not isinstance(returned, (list, tuple)):
                    raise RegistrationError(f"{hook_name} returned {returned!r}, not a list")
            except Exception as error:  # a hook that raises names its plugin
                self.fail(source, error, failures)
                continue
            for entry in returned or ():
                try:
                    info = check(entry, source.origin)
                except RegistrationError as error:
                    self.fail(source, error, failures)
                    continue
                previous = found.get(info.name)
                # the same class, or the same plugin's filter, registered again replaces nothing
                if previous is not None and (
                        info.factory is not previous.factory if isinstance(info, ModuleInfo)
                        else info.origin != previous.origin):
                    kind = "causality module" if isinstance(info, ModuleInfo) else "filter"
                    self._log_once(logging.WARNING, f"{kind} {info.name!r} from {info.origin} "
                                   f"replaces the one from {previous.origin}")
                found[info.name] = info
        return found

    def failures(self) -> list[PluginFailure]:
        return [*self.load_failures, *self.hook_failures]


def _in_code(hook: str, entry: Any) -> SimpleNamespace:
    """A plugin whose one hook, ``hook``, returns ``[entry]`` (registered in code)."""
    return SimpleNamespace(**{hook: hookimpl(lambda: [entry])})


_registry: _Registry | None = None


def _current(collect: bool = True) -> _Registry:
    """The registry (built, and the entry points loaded, on first use), its hooks asked
    again if the plugins changed unless not ``collect``."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = _Registry()
            _registry.load_entry_points()
        if collect:
            _registry.collect()
        return _registry


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager every lookup asks (built on first use)."""
    return _current(collect=False).manager


def plugin_failures() -> list[PluginFailure]:
    """The plugins that failed to load, or whose hooks failed, in the order met."""
    return _current().failures()


def register_plugin(plugin: Any, name: str | None = None, origin: str = "") -> str | None:
    """Register a plugin object (with :data:`hookimpl` functions) as an entry point's
    is, a refused one reported like a failed entry point; the name it is registered
    under, or ``None`` when it was refused."""
    with _lock:
        registry = _current(collect=False)
        plugin_name = name or registry.manager.get_canonical_name(plugin)
        registered = registry.add(plugin, _Source(plugin_name, origin=origin or plugin_name,
                                                  module=getattr(plugin, "__name__", "")))
        if registered is not None:
            registry.check_pending()
            if not registry.manager.has_plugin(registered):
                return None
        return registered


def _replace_in_code(plugin_name: str, plugin: SimpleNamespace | None, origin: str = "") -> None:
    """Unregister the plugin ``plugin_name`` registered in code, then register ``plugin``
    under that name (if one is given)."""
    with _lock:
        registry = _current(collect=False)
        registry.manager.unregister(name=plugin_name)
        registry.sources.pop(plugin_name, None)
        if plugin is not None:
            registry.add(plugin, _Source(plugin_name, origin=origin))


def register_module(module: type[CausalityModule], origin: str = "") -> ModuleInfo:
    """Make the causality module class ``module`` available under its ``name`` (a
    plugin of its own, replacing an earlier registration of the name). Raises
    :class:`RegistrationError` for a class that is not a :class:`CausalityModule`
    subclass, has no name or no manager."""
    info = module_info(module, origin)
    _replace_in_code(f"module:{info.name}", _in_code("groupcomm_causality_modules", module),
                     origin)
    return info


def register_filter(
    name: str,
    send: Callable[..., MessageFilterCreator[Any]] | None = None,
    receive: Callable[..., MessageFilterCreator[Any]] | None = None,
    description: str = "",
    origin: str = "",
    options: Iterable[FilterOption] = (),
) -> FilterInfo:
    """Make an extra filter available under ``name`` (send side, receive side or both,
    typed ``options`` if any), replacing an earlier registration of the name; raises
    :class:`RegistrationError` as a plugin's bad filter entry is reported."""
    entry = {"name": name, "send": send, "receive": receive, "description": description,
             "options": tuple(options)}
    info = filter_info(entry, origin)
    _replace_in_code(f"filter:{name}", _in_code("groupcomm_filters", entry), origin)
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
    _current(collect=False)


def available_modules() -> dict[str, ModuleInfo]:
    """Installed causality modules by name."""
    return dict(_current().modules)


def default_modules(*, known_bad: bool = False, unicast: bool = False,
                    causal: bool = False) -> list[str]:
    """The installed modules a tool runs when not told which, in registration order (the
    built-ins first), chosen by their flags: not the known-bad ones unless ``known_bad``;
    with ``unicast``, not the broadcast-only ones; with ``causal``, only those whose
    ``delivery_order`` is ``causal``."""
    return [name for name, info in _current().modules.items()
            if (known_bad or not info.factory.known_bad)
            and not (unicast and info.factory.broadcast_only)
            and not (causal and info.factory.delivery_order != "causal")]


def available_filters() -> dict[str, FilterInfo]:
    """Installed extra filters by name."""
    return dict(_current().filters)


def _lookup(kind: str, name: str) -> Any:
    """The module or filter ``name``; :class:`UnknownModuleError` listing what is
    installed and which plugins failed to load."""
    with _lock:
        registry = _current()
        table: dict[str, Any] = registry.modules if kind == "module" else registry.filters
        info = table.get(name)
        if info is not None:
            return info
        failures = registry.failures()
    failed = ("; these plugins failed to load: " + "; ".join(map(str, failures))
              if failures else "")
    what = "causality module" if kind == "module" else "filter"
    raise UnknownModuleError(f"unknown {what} {name!r}; installed: "
                             f"{', '.join(sorted(table)) or '(none)'}{failed}")


def get_module(name: str) -> CausalityModule:
    """A fresh instance of the causality module ``name``; :class:`UnknownModuleError`
    listing what is installed and which plugins failed to load."""
    return _lookup("module", name).factory()


def get_filter(name: str) -> FilterInfo:
    """The extra filter ``name``; :class:`UnknownModuleError` as :func:`get_module`."""
    return _lookup("filter", name)


def install(name: str) -> CausalityModule:
    """Set both selectors to the module ``name`` (one call) and return it."""
    module = get_module(name)
    module.install()
    return module
