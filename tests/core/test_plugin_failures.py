"""Broken plugins are reported by name, with their error and where they came from, and
everything else still loads.

The plugins live in a throw-away distribution: a directory on ``sys.path`` holding a
``*.dist-info`` (METADATA and entry_points.txt in the ``groupcomm.plugins`` group) and
the plugin modules, which is what ``pip install`` leaves behind.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.core import registry
from groupcomm.core.selection import SelectionError, resolve

ROOT = Path(__file__).resolve().parents[2]
DIST = "groupcomm-broken-fixture"
WHERE = f"{DIST} 0.1"

#: entry point name -> (module name, source); the entry point names the module
PLUGINS = {
    "import-error": ("gcfix_import_error", "import gcfix_no_such_module\n"),
    "syntax-error": ("gcfix_syntax_error", "def broken(:\n"),
    "raises-at-import": ("gcfix_raises", "raise RuntimeError('boom at import')\n"),
    "hook-raises": ("gcfix_hook_raises", """
        from groupcomm.plugins import hookimpl

        @hookimpl
        def groupcomm_causality_modules():
            raise ValueError("boom in the hook")
        """),
    "returns-junk": ("gcfix_returns_junk", """
        from groupcomm.filters.none import NoneModule
        from groupcomm.plugins import hookimpl

        class KeptModule(NoneModule):
            name = "fixture-kept"
            description = "fixture: the good entry beside a bad one"

        @hookimpl
        def groupcomm_causality_modules():
            return [KeptModule, 42]

        @hookimpl
        def groupcomm_filters():
            return [{"name": "sideless", "description": "no send, no receive"}]
        """),
    "misspelt": ("gcfix_misspelt", """
        from groupcomm.plugins import hookimpl

        @hookimpl
        def groupcomm_causality_module():
            return []
        """),
    "too-old": ("gcfix_too_old", """
        from groupcomm.plugins import hookimpl

        GROUPCOMM_PLUGIN_API = (1, 0)

        @hookimpl
        def groupcomm_causality_modules():
            return []
        """),
    "bad-signature": ("gcfix_bad_signature", """
        from groupcomm.plugins import hookimpl

        @hookimpl
        def groupcomm_causality_modules(colour):
            return []
        """),
    "no-manager": ("gcfix_no_manager", """
        from groupcomm.module_kit import CausalityModule
        from groupcomm.plugins import hookimpl

        class Unmanaged(CausalityModule):
            name = "fixture-unmanaged"

        @hookimpl
        def groupcomm_causality_modules():
            return [Unmanaged]
        """),
    "good": ("gcfix_good", """
        from groupcomm.filters.none import NoneModule
        from groupcomm.plugins import hookimpl

        class FixtureModule(NoneModule):
            name = "fixture-good"
            description = "fixture: a working third-party module"

        @hookimpl
        def groupcomm_causality_modules():
            return [FixtureModule]
        """),
}

#: entry point -> the error type it is reported with
EXPECTED = {
    "import-error": "ModuleNotFoundError: No module named 'gcfix_no_such_module'",
    "syntax-error": "SyntaxError: ",
    "raises-at-import": "RuntimeError: boom at import",
    "misspelt": "PluginValidationError: unknown hook 'groupcomm_causality_module'",
    "hook-raises": "ValueError: boom in the hook",
    "returns-junk": "RegistrationError: ",
    "too-old": "IncompatiblePluginError: written for plugin API 1.0",
    "bad-signature": "PluginValidationError: Plugin 'bad-signature' for hook "
                     "'groupcomm_causality_modules'",
    "no-manager": "RegistrationError: module 'fixture-unmanaged' from groupcomm-broken-fixture "
                  "0.1 declares no manager_class",
}


def write_distribution(site: Path, plugins: dict[str, tuple[str, str]],
                       dist: str = DIST) -> Path:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = ["[groupcomm.plugins]"]
    for entry, (module, source) in plugins.items():
        lines.append(f"{entry} = {module}")
        (site / f"{module}.py").write_text(textwrap.dedent(source))
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


@pytest.fixture
def broken_site(tmp_path: Path) -> Iterator[Path]:
    """The fixture distribution on sys.path, the registry reloaded; undone afterwards."""
    site = write_distribution(tmp_path / "site", PLUGINS)
    sys.path.insert(0, str(site))
    registry.reload()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        for module, _ in PLUGINS.values():
            sys.modules.pop(module, None)
        registry.reload()


def test_each_broken_plugin_is_reported_with_its_error_and_origin(broken_site) -> None:
    failures = {f.name: f for f in registry.plugin_failures()}
    assert set(failures) == set(EXPECTED)
    for name, error in EXPECTED.items():
        assert failures[name].error.startswith(error), failures[name]
        assert failures[name].distribution == WHERE
        assert failures[name].module == PLUGINS[name][0]
        assert "\n" not in str(failures[name])
    assert str(failures["raises-at-import"]) == (
        f"raises-at-import ({WHERE}, gcfix_raises): RuntimeError: boom at import")
    junk = [f.error for f in registry.plugin_failures() if f.name == "returns-junk"]
    assert any("42" in error and "not a CausalityModule subclass" in error for error in junk)
    assert any("'sideless'" in error and "neither a send nor a receive" in error
               for error in junk)


def test_the_other_modules_still_load(broken_site) -> None:
    modules = registry.available_modules()
    assert {"none", "vector", "matrix", "fixture-good", "fixture-kept"} <= set(modules)
    assert modules["fixture-good"].origin == WHERE
    assert modules["vector"].origin == "built-in"
    assert type(registry.get_module("fixture-good")).__name__ == "FixtureModule"
    assert "reliable" in registry.available_filters()
    assert "sideless" not in registry.available_filters()
    assert "fixture-unmanaged" not in modules
    # nothing of a plugin refused while registering stays behind
    manager = registry.plugin_manager()
    for refused in ("too-old", "bad-signature", "import-error"):
        assert manager.get_plugin(refused) is None
    assert all(impl.plugin_name != "bad-signature"
               for impl in manager.hook.groupcomm_causality_modules.get_hookimpls())


def test_two_distributions_with_one_entry_point_name_both_load(tmp_path: Path) -> None:
    """pluggy loads one plugin per entry-point name; the other distribution's is loaded
    under the name with its project."""
    first = write_distribution(tmp_path / "first", {"twin": ("gcfix_twin_a", """
        from groupcomm.filters.none import NoneModule
        from groupcomm.plugins import hookimpl

        class TwinA(NoneModule):
            name = "fixture-twin-a"

        @hookimpl
        def groupcomm_causality_modules():
            return [TwinA]
        """)})
    second = write_distribution(tmp_path / "second", {"twin": ("gcfix_twin_b", """
        from groupcomm.filters.none import NoneModule
        from groupcomm.plugins import hookimpl

        class TwinB(NoneModule):
            name = "fixture-twin-b"

        @hookimpl
        def groupcomm_causality_modules():
            return [TwinB]
        """)}, dist="groupcomm-twin-fixture")
    sys.path[:0] = [str(first), str(second)]
    try:
        registry.reload()
        modules = registry.available_modules()
        assert modules["fixture-twin-a"].origin == WHERE
        assert modules["fixture-twin-b"].origin == "groupcomm-twin-fixture 0.1"
        assert registry.plugin_manager().get_plugin("twin[groupcomm-twin-fixture]") is not None
        assert registry.plugin_failures() == []
    finally:
        del sys.path[:2]
        for module in ("gcfix_twin_a", "gcfix_twin_b"):
            sys.modules.pop(module, None)
        registry.reload()


def test_an_unknown_name_lists_the_failed_plugins(broken_site) -> None:
    with pytest.raises(registry.UnknownModuleError) as raised:
        registry.get_module("x")
    message = str(raised.value)
    assert message.startswith("unknown causality module 'x'; installed: cykas, ")
    assert "fixture-good" in message
    assert (f"; these plugins failed to load: import-error ({WHERE}, gcfix_import_error): "
            "ModuleNotFoundError: No module named 'gcfix_no_such_module'") in message
    assert "\n" not in message
    with pytest.raises(SelectionError, match="hook-raises .*ValueError: boom in the hook"):
        resolve("x")
    with pytest.raises(registry.UnknownModuleError, match="unknown filter 'y'.*misspelt"):
        registry.get_filter("y")


def test_failures_are_logged_once_as_errors(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    site = write_distribution(tmp_path / "site", {"import-error": PLUGINS["import-error"]})
    sys.path.insert(0, str(site))
    try:
        with caplog.at_level(logging.ERROR, logger="groupcomm.core.registry"):
            registry.reload()
            registry.available_modules()
            registry.register_module(type(registry.get_module("none")), origin="tests")
            registry.available_modules()  # asks the hooks again: no second log line
    finally:
        sys.path.remove(str(site))
        registry.reload()
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged == [f"groupcomm plugin failed to load: import-error ({WHERE}, "
                      "gcfix_import_error): ModuleNotFoundError: No module named "
                      "'gcfix_no_such_module'"]


def run_filters(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "filters", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_groupcomm_filters_lists_failed_plugins_one_line_each(tmp_path: Path) -> None:
    site = write_distribution(tmp_path / "site", PLUGINS)
    result = run_filters(site)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "plugins that failed to load:" in lines
    for name, error in EXPECTED.items():
        mine = [line for line in lines if line.strip().startswith(f"{name} (")]
        assert len(mine) >= 1 and all(error in line for line in mine), (name, lines)
    (line,) = [line for line in lines if line.strip().startswith("raises-at-import (")]
    assert line == f"  raises-at-import ({WHERE}, gcfix_raises): RuntimeError: boom at import"
    assert any(line.split()[:1] == ["fixture-good"] for line in lines)
    assert any(line.split()[:1] == ["vector"] for line in lines)
    assert "failed to load: raises-at-import" in result.stderr  # the logged error

    listing = json.loads(run_filters(site, "--json").stdout)
    failed = {f["name"]: f for f in listing["failed_plugins"]}
    assert failed["import-error"] == {
        "name": "import-error", "distribution": WHERE, "module": "gcfix_import_error",
        "error": "ModuleNotFoundError: No module named 'gcfix_no_such_module'"}
    assert "fixture-good" in {m["name"] for m in listing["causality_modules"]}


def test_groupcomm_filters_without_failures_has_no_failure_section() -> None:
    result = subprocess.run([sys.executable, "-m", "groupcomm.cli", "filters"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "failed to load" not in result.stdout + result.stderr
    assert json.loads(subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "filters", "--json"], capture_output=True,
        text=True, timeout=120, cwd=ROOT).stdout)["failed_plugins"] == []
