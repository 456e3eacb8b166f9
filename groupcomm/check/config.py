"""What the model checker is asked: :class:`CheckConfig` (protocol, bounds, network,
reductions) and workload files (:func:`load_workload`)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROPERTIES = ("causal", "fifo", "duplicate", "exception", "refused", "liveness")


class ConfigError(ValueError):
    """A bad checker configuration (unknown protocol, bad bounds, bad workload)."""


#: how the checker picks the destinations of a send (see CheckConfig; ``subsets``
#: multiplies the states: matrix 3x1 has 281 with unicasts, 2,721 with it)
DESTINATION_MODES = ("auto", "unicast", "broadcast", "subsets")


@dataclass
class CheckConfig:
    """What to check and how. ``workload`` maps process name to the destinations of each
    of its sends (:func:`load_workload`); without one every process makes ``messages``
    sends to destinations chosen nondeterministically (``destinations``: ``auto`` -
    broadcast for broadcast-only modules, unicast otherwise; ``unicast``; ``broadcast``;
    ``subsets`` - every non-empty set of the others)."""

    protocol: str = "cykas"
    processes: int = 3
    messages: int = 2
    fifo_network: bool = False
    dfs: bool = False
    reduce: bool = False
    symmetry: bool = False
    por: bool = False
    #: with ``reduce`` and breadth-first search on an unordered network: compact storage
    #: (:mod:`groupcomm.check.levels`), the frontier spilled past half of the budget
    compact: bool = False
    memory_budget_gb: float | None = None
    #: where a spilled frontier goes (default: the temporary directory)
    spill_dir: Path | None = None
    #: compact storage: resume from the checkpoint here, write one at most every
    #: ``checkpoint_interval`` seconds
    checkpoint: Path | None = None
    checkpoint_interval: float = 600.0
    #: compact storage: entries past which a memo that only saves time is emptied
    memo_limit: int = 500_000
    max_states: int | None = None
    workload: dict[str, list[tuple[str, ...]]] | None = None
    destinations: str = "auto"
    #: tag sends without the module's destination check (shows what the filter would do)
    bypass_refusal: bool = False
    #: processes that join, and processes that leave, at some point (explored; see
    #: :mod:`groupcomm.check.churn`)
    late: tuple[str, ...] = ()
    leaving: tuple[str, ...] = ()
    #: called with a progress dict about every ``progress_interval`` seconds
    progress: Callable[[dict[str, Any]], None] | None = None
    progress_interval: float = 2.0

    def names(self) -> list[str]:
        if self.workload is not None:
            return list(self.workload)
        return [f"p{i + 1}" for i in range(self.processes)]


def load_workload(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """Read a workload: JSON ``{"sends": {"p1": [["p2"], ["p2", "p3"]], "p2": [], ...}}``
    (or that mapping itself). Every process of the run is a key of ``sends``; each entry
    is the destination list of one application send, made in that order (when is
    explored). Raises :class:`ConfigError` on anything else."""
    if isinstance(source, Mapping):
        data: Any = source
        where = "workload"
    else:
        where = str(source)
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"cannot read workload {where}: {error.strerror or error}") from None
        except json.JSONDecodeError as error:
            raise ConfigError(f"workload {where} is not JSON: {error}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("sends"), Mapping):
        raise ConfigError(f"workload {where}: expected an object with a 'sends' object "
                          '(e.g. {"sends": {"p1": [["p2"]], "p2": []}})')
    sends = data["sends"]
    names = list(sends)
    if len(names) < 2:
        raise ConfigError(f"workload {where}: needs at least two processes, got {names}")
    workload: dict[str, list[tuple[str, ...]]] = {}
    for name, entries in sends.items():
        if not isinstance(name, str) or not name or "#" in name or "~" in name:
            raise ConfigError(f"workload {where}: bad process name {name!r}")
        if not isinstance(entries, list):
            raise ConfigError(f"workload {where}: sends of {name} must be a list of lists")
        out = []
        for entry in entries:
            if isinstance(entry, str):
                entry = [entry]
            if (not isinstance(entry, list) or not entry
                    or not all(isinstance(d, str) for d in entry)):
                raise ConfigError(f"workload {where}: each send of {name} must be a non-empty "
                                  f"list of process names, got {entry!r}")
            for dest in entry:
                if dest not in sends or dest == name:
                    raise ConfigError(f"workload {where}: {name} sends to {dest!r}, which is "
                                      "not another process of the workload")
            out.append(tuple(dict.fromkeys(entry)))
        workload[name] = out
    return workload


def quieted_module_loggers(protocol: str) -> list[logging.Logger]:
    """The loggers to quiet while ``protocol`` is explored (what they say, repeated for
    every state, is noise): the package of every class of the module, a plugin's
    included, the built-in filters' and the node's (only these for an unknown one)."""
    from groupcomm.core.registry import UnknownModuleError, get_module

    names = {"groupcomm.filters", "groupcomm.core.node"}
    try:
        classes = type(get_module(protocol)).__mro__
    except UnknownModuleError:
        classes = ()
    for cls in classes:
        where = cls.__module__
        if where not in ("builtins", "abc") and not where.startswith("groupcomm.core"):
            # the package, so that a manager defined in a sibling module is covered too
            names.add(where.rsplit(".", 1)[0])
    return [logging.getLogger(name) for name in sorted(names)]


def quiet_module_loggers(protocol: str, level: int = logging.ERROR) -> ContextManager[None]:
    """:func:`quieted_module_loggers` set to ``level`` at least, for the ``with`` block."""
    return quiet_loggers(quieted_module_loggers(protocol), level)


@contextmanager
def quiet_loggers(loggers: list[logging.Logger], level: int) -> Iterator[None]:
    """``loggers`` set to ``level`` at least, for the ``with`` block."""
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(max(log.level, level))
    try:
        yield
    finally:
        for log, previous in zip(loggers, levels, strict=True):
            log.setLevel(previous)
