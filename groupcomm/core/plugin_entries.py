"""What plugins provide, checked: causality modules, extra filters and their typed
options; where a plugin came from, and why it or one of its entries could not be used.

The registry (:mod:`groupcomm.core.registry`) turns each hook result into a
:class:`ModuleInfo` or :class:`FilterInfo` here, and reports a :class:`RegistrationError`
or :class:`IncompatiblePluginError` raised here as a :class:`PluginFailure`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcomm.core.causality import CausalityManager, CausalityModule
from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.hookspecs import PLUGIN_API, PLUGIN_API_ATTRIBUTE


class RegistrationError(ValueError):
    """A module or filter cannot be registered (no name, not a causality module, no
    manager, no filter creator on either side)."""


class IncompatiblePluginError(RegistrationError):
    """A plugin states a plugin API this groupcomm does not provide."""


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


def describe(error: BaseException) -> str:
    """``ErrorType: message`` on one line, whatever the message holds."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(frozen=True)
class ModuleInfo:
    """A registered causality module."""

    name: str
    #: the module class (calling it makes a fresh instance)
    factory: type[CausalityModule]
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


def api_mismatch(plugin: Any) -> str:
    """Why ``plugin`` cannot be used with this version of the plugin API (:data:`PLUGIN_API`),
    or "" when it can (it declares none, or a compatible one)."""
    declared = getattr(plugin, PLUGIN_API_ATTRIBUTE, None)
    if declared is None:
        return ""
    if not (isinstance(declared, tuple) and len(declared) == 2
            and all(type(part) is int and part >= 0 for part in declared)):
        return (f"{PLUGIN_API_ATTRIBUTE} must be a pair of integers (major, minor), got "
                f"{declared!r}")
    major, minor = declared
    if major != PLUGIN_API[0] or minor > PLUGIN_API[1]:
        return (f"written for plugin API {major}.{minor}; this groupcomm provides "
                f"{PLUGIN_API[0]}.{PLUGIN_API[1]} (a plugin needs the same major version "
                "and a minor version no newer)")
    return ""


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


def filter_info(name: Any, send: Any, receive: Any, description: Any,
                origin: str, options: Any = ()) -> FilterInfo:
    """A :class:`FilterInfo` with its factories typed by its options;
    :class:`RegistrationError` for an entry without a name or a side, a side that is not
    callable or an option that is not a :class:`FilterOption`."""
    who = origin or "a plugin"
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"{who} registered a filter without a name")
    if send is None and receive is None:
        raise RegistrationError(f"filter {name!r} from {who} has neither a send nor a "
                                "receive side")
    for side, factory in (("send", send), ("receive", receive)):
        if factory is not None and not callable(factory):
            raise RegistrationError(f"filter {name!r} from {who}: its {side} side "
                                    f"{factory!r} is not callable")
    options = tuple(options or ())
    for option in options:
        if not isinstance(option, FilterOption):
            raise RegistrationError(f"filter {name!r} from {who}: option {option!r} is not "
                                    "a FilterOption")
    if options:
        send, receive = (_typed(name, factory, options) for factory in (send, receive))
    return FilterInfo(name, send, receive, description or "", origin, options)


def filter_entry(entry: Any, origin: str) -> FilterInfo:
    """A ``groupcomm_filters`` hook's entry (a dict) as a :class:`FilterInfo`."""
    if not isinstance(entry, dict):
        raise RegistrationError(f"{origin or 'a plugin'} returned the filter entry "
                                f"{entry!r}, which is not a dict")
    return filter_info(entry.get("name"), entry.get("send"), entry.get("receive"),
                       entry.get("description", ""), origin, entry.get("options", ()))


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
