"""Choosing the causality module and extra filters at start-up: the command line, then
the environment (``GROUPCOMM_FILTERS`` separates specs by semicolons, since a filter's
own options are separated by commas), then a config file, then ``none``
(docs/modules.md). An unknown name is an error listing what is installed.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.core.filtering import MessageFilterCreator
from groupcomm.core.registry import UnknownModuleError, get_filter, get_module

CAUSALITY_ENV = "GROUPCOMM_CAUSALITY"
FILTERS_ENV = "GROUPCOMM_FILTERS"
CONFIG_ENV = "GROUPCOMM_CONFIG"
DEFAULT_CONFIG = "groupcomm.toml"
#: the layer the interactive apps put under their module unless told not to
RELIABLE = "reliable"


class SelectionError(ValueError):
    """A bad module name, filter spec or config file."""


@dataclass
class Selection:
    """What to run, and where each choice came from (for messages and tests)."""

    causality: str = "none"
    causality_source: str = "default"
    filters: list[str] = field(default_factory=list)
    filters_source: str = "default"


def load_config(path: str | os.PathLike[str] | None) -> tuple[dict[str, Any], str]:
    """The config mapping and its path (empty when there is no config file)."""
    candidate = path or os.environ.get(CONFIG_ENV)
    explicit = candidate is not None
    target = Path(candidate) if candidate else Path(DEFAULT_CONFIG)
    if not target.exists():
        if explicit:
            raise SelectionError(f"config file {target} does not exist")
        return {}, ""
    try:
        data = tomllib.loads(target.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SelectionError(f"config file {target} is not valid TOML: {error}") from None
    unknown = set(data) - {"causality", "filters"}
    if unknown:
        raise SelectionError(
            f"config file {target}: unknown setting(s) {', '.join(sorted(unknown))} "
            "(known: causality, filters)"
        )
    if "causality" in data and not isinstance(data["causality"], str):
        raise SelectionError(f"config file {target}: causality must be a string")
    if "filters" in data and not (
        isinstance(data["filters"], list) and all(isinstance(f, str) for f in data["filters"])
    ):
        raise SelectionError(f"config file {target}: filters must be a list of strings")
    return data, str(target)


def resolve(
    cli_causality: str | None = None,
    cli_filters: Sequence[str] | None = None,
    config_path: str | os.PathLike[str] | None = None,
) -> Selection:
    """Apply the precedence rules and check that every name is installed."""
    config, where = load_config(config_path)
    selection = Selection()
    env_causality = os.environ.get(CAUSALITY_ENV)
    if cli_causality:
        selection.causality, selection.causality_source = cli_causality, "command line"
    elif env_causality:
        selection.causality, selection.causality_source = env_causality, f"${CAUSALITY_ENV}"
    elif "causality" in config:
        selection.causality, selection.causality_source = config["causality"], where
    env_filters = os.environ.get(FILTERS_ENV)
    if cli_filters:
        selection.filters, selection.filters_source = list(cli_filters), "command line"
    elif env_filters:
        selection.filters = [f for f in env_filters.split(";") if f.strip()]
        selection.filters_source = f"${FILTERS_ENV}"
    elif "filters" in config:
        selection.filters, selection.filters_source = list(config["filters"]), where
    try:
        get_module(selection.causality)
    except UnknownModuleError as error:
        raise SelectionError(f"{error} (chosen by {selection.causality_source})") from None
    for spec in selection.filters:
        try:
            get_filter(parse_filter_spec(spec)[0])
        except UnknownModuleError as error:
            raise SelectionError(f"{error} (chosen by {selection.filters_source})") from None
    return selection


def parse_filter_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"drop:p=0.1,seed=3"`` -> ``("drop", {"p": "0.1", "seed": "3"})``."""
    name, _, rest = spec.strip().partition(":")
    if not name:
        raise SelectionError(f"filter spec {spec!r} has no name")
    options: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise SelectionError(f"filter option {item!r} in {spec!r} must be key=value")
        options[key.strip()] = value.strip()
    return name, options


def with_reliable(specs: Sequence[str]) -> list[str]:
    """``specs`` with the ``reliable`` layer in it once and first, nearest the causality
    module, above every other filter: a fault filter listed before it would drop or
    duplicate frames the layer never numbered, and nothing would repair them."""
    given = [spec for spec in specs if parse_filter_spec(spec)[0] == RELIABLE]
    # the user's own spelling stays, so that options it should not have are refused
    # by the layer rather than dropped here
    return [given[0] if given else RELIABLE, *without_reliable(specs)]


def without_reliable(specs: Sequence[str]) -> list[str]:
    """``specs`` without the ``reliable`` layer (the apps' ``--no-reliable``)."""
    return [spec for spec in specs if parse_filter_spec(spec)[0] != RELIABLE]


def filter_creators(
    specs: Sequence[str],
) -> tuple[list[MessageFilterCreator[Any]], list[MessageFilterCreator[Any]]]:
    """Send-side and receive-side factories for the extra filter specs.

    Specs are listed from the causality module outward, toward the network: on the
    send side they run in that order after the module's send filter; on the receive
    side in the reverse order before the module's receive filter, so ``reliable``
    listed before ``drop`` sees messages above the drops on both sides.
    """
    send: list[MessageFilterCreator[Any]] = []
    receive: list[MessageFilterCreator[Any]] = []
    for spec in specs:
        name, options = parse_filter_spec(spec)
        info = get_filter(name)
        try:
            if info.send is not None:
                send.append(info.send(**options))
            if info.receive is not None:
                receive.append(info.receive(**options))
        except (TypeError, ValueError) as error:
            raise SelectionError(f"filter {name!r}: bad options {options}: {error}") from None
    receive.reverse()
    return send, receive
