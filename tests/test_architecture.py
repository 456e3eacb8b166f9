"""The import rules of docs/architecture.md, checked on the source (every import
statement, function-level ones included, so a cycle cannot hide inside a function).

* Protocol logic does no I/O: ``filters/`` imports no sockets, threads, clocks or
  randomness, and ``groupcomm/core`` no sockets, clocks or randomness (its few locks guard
  state that application threads share).
* Each package imports only the packages below it in the table, never one above it.
* No module imports itself back through others (no import cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the repository's top folders and the package each installs as (setup.cfg)
TOPS = {"groupcomm": "groupcomm", "filters": "groupcomm.filters",
        "plugins": "groupcomm.plugins", "apps": "groupcomm.apps",
        "trace_analysis": "trace_analysis"}

#: package -> the project packages it may import (its own included)
ALLOWED: dict[str, set[str]] = {}
LAYERS = [
    # (package, may import)
    ("groupcomm.cli.args", set()),
    ("groupcomm.core", set()),
    # the module-author API: the helpers the built-in modules and plugins share
    ("groupcomm.module_kit", {"groupcomm.core"}),
    ("groupcomm.wire", {"groupcomm.core"}),
    ("groupcomm.filters", {"groupcomm.core", "groupcomm.module_kit"}),
    ("groupcomm.layers", {"groupcomm.core"}),
    ("groupcomm.replicated", {"groupcomm.core"}),
    # the client's protocol object verifies and decodes frames (bytes, no sockets)
    ("groupcomm.protocol", {"groupcomm.core", "groupcomm.wire"}),
    # the session server's store: backends (SQLite, PostgreSQL) and what it reads of frames
    ("groupcomm.store", {"groupcomm.core", "groupcomm.wire", "groupcomm.protocol"}),
    # the built-in plugin imports the module classes and layers it registers; the core
    # owns the plugin manager (the registry) and the hook specs, and imports no plugin
    ("groupcomm.plugins", {"groupcomm.core", "groupcomm.layers", "groupcomm.filters"}),
    ("groupcomm", {"groupcomm.core"}),
    ("groupcomm.transport", {"groupcomm.core", "groupcomm.wire", "groupcomm.protocol",
                             "groupcomm.store"}),
    ("trace_analysis", {"groupcomm.core", "groupcomm.cli.args"}),
    ("groupcomm.check", {"groupcomm.core", "groupcomm.wire", "groupcomm.filters",
                         "groupcomm.protocol", "groupcomm.module_kit"}),
    # the installed conformance suite: drives any module through the oracle, the
    # replicated types and the checker (the stress run and Spark as subprocesses)
    ("groupcomm.conformance", {"groupcomm.core", "groupcomm.wire", "groupcomm.protocol",
                               "groupcomm.check", "groupcomm.tools", "groupcomm.replicated",
                               "groupcomm.module_kit", "groupcomm.cli.args"}),
    ("groupcomm.sim", {"groupcomm.core", "groupcomm.wire", "trace_analysis",
                       "groupcomm.protocol"}),
    ("groupcomm.tools", {"groupcomm.core", "groupcomm.wire", "groupcomm.transport",
                         "groupcomm.protocol", "groupcomm.store",
                         "groupcomm.layers", "groupcomm.cli.args"}),
    # store speed (groupcomm store speed) stores an editing trace's keystrokes in each store backend, as the
    # server keeps them (wire payloads)
    ("groupcomm.apps", {"groupcomm", "groupcomm.core", "groupcomm.transport", "groupcomm.tools",
                        "groupcomm.store", "groupcomm.wire", "groupcomm.protocol", "groupcomm.filters", "groupcomm.replicated", "groupcomm.cli.args",
                        "trace_analysis"}),
    # the web gateway: browser tabs as members, next to the terminal apps it mirrors
    ("groupcomm.web", {"groupcomm", "groupcomm.core", "groupcomm.transport",
                       "groupcomm.protocol", "groupcomm.tools", "groupcomm.filters", "groupcomm.replicated",
                       "groupcomm.apps", "groupcomm.cli.args"}),
    # groupcomm member-bench: terminal editors' members (the apps' shared text, with the
    # edit app's filters) through one server, with the web capacity bench's steps, limits,
    # argument checks and pycrdt-websocket peer; nothing imports it but by name
    ("groupcomm.tools.members", {"groupcomm.core", "groupcomm.transport", "groupcomm.tools",
                                 "groupcomm.filters", "groupcomm.replicated", "groupcomm.apps",
                                 "groupcomm.web", "groupcomm.cli.args"}),
    ("groupcomm.cli", {"groupcomm.core", "groupcomm.wire", "groupcomm.transport",
                       "groupcomm.store", "groupcomm.replicated",
                       "groupcomm.tools", "groupcomm.check", "groupcomm.sim", "trace_analysis",
                       "groupcomm.cli.args", "groupcomm.conformance"}),
]
NO_IO = {
    "groupcomm.filters": {"zmq", "socket", "threading", "time", "random", "asyncio", "selectors",
                "subprocess"},
    "groupcomm.module_kit": {"zmq", "socket", "threading", "time", "random", "asyncio",
                             "selectors", "subprocess"},
    "groupcomm.core": {"zmq", "socket", "time", "random", "asyncio", "selectors", "subprocess"},
    "groupcomm.replicated": {"zmq", "socket", "threading", "time", "random", "asyncio",
                             "selectors", "subprocess"},
    "groupcomm.protocol": {"zmq", "socket", "threading", "time", "random", "asyncio",
                           "selectors", "subprocess"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for top, package in TOPS.items():
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT / top).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                # ``from package import module`` imports the module; ``from module
                # import name`` the module that defines the name
                submodule = f"{node.module}.{alias.name}"
                names.add(submodule if submodule in MODULES else node.module)
    return names


def _package(module: str) -> str:
    """The row of LAYERS a module belongs to: the longest matching prefix."""
    best = ""
    for package, _ in LAYERS:
        if (module == package or module.startswith(package + ".")) and len(package) > len(best):
            best = package
    assert best, f"{module} belongs to no package of the layer table"
    return best


GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name}
         for name, path in MODULES.items()}


#: sans-I/O modules that must not even take a lock: the session protocol and what it
#: uses, so the simulator and the model checker can drive the very same objects
NO_THREADS = ("groupcomm.protocol.membership", "groupcomm.core.messages")


@pytest.mark.parametrize("module", NO_THREADS)
def test_the_session_protocol_imports_no_io_and_no_threads(module: str) -> None:
    banned = NO_IO["groupcomm.filters"]
    assert sorted(i for i in _imports(MODULES[module]) if i.split(".")[0] in banned) == []


@pytest.mark.parametrize("package", sorted(NO_IO))
def test_protocol_code_imports_no_io(package: str) -> None:
    banned = NO_IO[package]
    offenders = [f"{name} imports {imported}"
                 for name, path in MODULES.items() if _package(name) == package
                 for imported in sorted(_imports(path)) if imported.split(".")[0] in banned]
    assert offenders == []


def test_no_package_imports_one_above_it() -> None:
    allowed = dict(LAYERS)
    offenders = []
    for name, imported in GRAPH.items():
        mine = _package(name)
        for other in imported:
            theirs = _package(other)
            if theirs != mine and theirs not in allowed[mine]:
                offenders.append(f"{name} ({mine}) imports {other} ({theirs})")
    assert sorted(offenders) == []


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for other in sorted(GRAPH[module]):
            if state.get(other) == 1:
                cycles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_every_module_is_in_the_layer_table() -> None:
    for name in MODULES:
        _package(name)
