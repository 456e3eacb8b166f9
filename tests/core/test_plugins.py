"""Plugins through entry points, start-up selection precedence, unknown names.

Broken plugins (entry points that fail to import, hooks that raise or return junk) are
tested in test_plugin_failures.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import groupcomm
from groupcomm.core import registry
from groupcomm.core.selection import SelectionError, filter_creators, parse_filter_spec, resolve
from groupcomm.plugins import hookimpl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "groupcomm-example-plugin"


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin package installed (pip) into a fresh target directory."""
    target = tmp_path_factory.mktemp("site")
    work = tmp_path_factory.mktemp("build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(EXAMPLE)],
        check=True, cwd=work, capture_output=True, timeout=300,
    )
    return target


def run_with(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_third_party_plugin_is_discovered_through_its_entry_point(installed_example) -> None:
    result = run_with(installed_example, "-m", "groupcomm.cli", "filters", "--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    modules = {m["name"]: m for m in listing["causality_modules"]}
    filters = {f["name"]: f for f in listing["filters"]}
    assert modules["counting-none"]["origin"] == "groupcomm-example-plugin 0.1.0"
    assert filters["shout"]["sides"] == ["receive"]
    assert modules["none"]["origin"] == "built-in"


def test_third_party_module_and_filter_run_in_a_session(installed_example) -> None:
    script = (
        "from groupcomm.tools.localnet import LocalNetwork\n"
        "from groupcomm.core.selection import resolve, filter_creators\n"
        "sel = resolve('counting-none', ['shout'])\n"
        "send, receive = filter_creators(sel.filters)\n"
        "net = LocalNetwork(['a', 'b'], sel.causality, extra_receive=receive)\n"
        "net.send('a', 'hello', ['b']); net.run()\n"
        "print(net.delivered_payloads('b'), net.manager('b').delivered)\n"
    )
    result = run_with(installed_example, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['HELLO'] 1"


class Misspelt:
    @hookimpl
    def groupcomm_causality_module(self) -> list:  # missing the final "s"
        return []


@pytest.fixture
def fresh_registry():
    """The registry as installed, before and after the test (it registers its own)."""
    registry.reload()
    yield registry
    registry.reload()


def test_misspelt_hooks_are_reported_not_fatal(fresh_registry) -> None:
    assert fresh_registry.register_plugin(Misspelt(), name="misspelt") is None
    (failure,) = fresh_registry.plugin_failures()
    assert failure.name == "misspelt"
    assert failure.error.startswith("PluginValidationError: unknown hook "
                                    "'groupcomm_causality_module'")
    assert fresh_registry.plugin_manager().get_plugin("misspelt") is None
    assert "vector" in fresh_registry.available_modules()  # nothing else is lost
    with pytest.raises(fresh_registry.UnknownModuleError,
                       match=r"these plugins failed to load: misspelt \(registered in code\)"):
        fresh_registry.get_module("nope")


def test_the_built_ins_come_through_the_plugin_entry_point(fresh_registry) -> None:
    manager = fresh_registry.plugin_manager()
    assert fresh_registry.plugin_failures() == []
    assert manager.get_plugin("builtin").__name__ == "groupcomm.plugins.builtin"
    # loaded by pluggy's own entry-point loader, which records where each plugin came from
    loaded = {manager.get_name(plugin): dist.project_name
              for plugin, dist in manager.list_plugin_distinfo()}
    assert loaded["builtin"] == "groupcomm"
    assert {info.origin for info in fresh_registry.available_modules().values()} == {"built-in"}


def test_a_later_registration_replaces_and_unregistering_restores(fresh_registry) -> None:
    from groupcomm.filters.none import NoneModule

    class LoudNone(NoneModule):
        name = "none"
        description = "test: none, registered in code"

    builtin = fresh_registry.available_modules()["none"].factory
    info = fresh_registry.register_module(LoudNone, origin="tests")
    assert fresh_registry.available_modules()["none"] == info
    assert type(fresh_registry.get_module("none")) is LoudNone
    fresh_registry.unregister_module("none")
    assert fresh_registry.available_modules()["none"].factory is builtin
    with pytest.raises(fresh_registry.RegistrationError, match="not a CausalityModule"):
        fresh_registry.register_module(int)  # type: ignore[arg-type]

    class Unmanaged(groupcomm.CausalityModule):
        name = "unmanaged"

    with pytest.raises(fresh_registry.RegistrationError,
                       match="'unmanaged' from tests declares no manager_class"):
        fresh_registry.register_module(Unmanaged, origin="tests")


def test_selection_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUPCOMM_CAUSALITY", raising=False)
    monkeypatch.delenv("GROUPCOMM_FILTERS", raising=False)
    monkeypatch.delenv("GROUPCOMM_CONFIG", raising=False)
    assert resolve().causality == "none"
    (tmp_path / "groupcomm.toml").write_text('causality = "none"\nfilters = ["drop:p=0.5"]\n')
    chosen = resolve()
    assert chosen.causality_source.endswith("groupcomm.toml")
    assert chosen.filters == ["drop:p=0.5"]
    monkeypatch.setenv("GROUPCOMM_FILTERS", "duplicate:p=0.1;reorder")
    assert resolve().filters == ["duplicate:p=0.1", "reorder"]
    monkeypatch.setenv("GROUPCOMM_CAUSALITY", "bogus")
    with pytest.raises(SelectionError, match=r"unknown causality module 'bogus'.*\$GROUPCOMM"):
        resolve()
    chosen = resolve("none", ["drop:p=0.2"])  # the command line wins
    assert (chosen.causality_source, chosen.filters) == ("command line", ["drop:p=0.2"])


def test_unknown_names_and_bad_specs_are_clear(tmp_path: Path) -> None:
    with pytest.raises(SelectionError, match="installed: .*none"):
        resolve("no-such-module")
    with pytest.raises(SelectionError, match="unknown filter 'nope'"):
        resolve("none", ["nope"])
    # the error names where the wrong name came from, not where the module came from
    with pytest.raises(SelectionError, match=r"unknown filter 'nope'.*\(chosen by command line\)"):
        resolve(None, ["nope"])
    with pytest.raises(SelectionError, match="key=value"):
        parse_filter_spec("drop:p")
    with pytest.raises(SelectionError, match="bad options"):
        filter_creators(["drop:p=2"])
    bad = tmp_path / "bad.toml"
    bad.write_text("causality = 3\n")
    with pytest.raises(SelectionError, match="must be a string"):
        resolve(config_path=bad)
    with pytest.raises(SelectionError, match="does not exist"):
        resolve(config_path=tmp_path / "missing.toml")


def test_im_refuses_an_unknown_module_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.apps.im", "--name", "a", "--session", "s",
         "--causality", "bogus"], capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "installed:" in result.stderr


class _Plugin:
    """A plugin object declaring a plugin API version and one module."""

    def __init__(self, api: object) -> None:
        self.GROUPCOMM_PLUGIN_API = api

    @hookimpl
    def groupcomm_causality_modules(self) -> list:
        from groupcomm.filters.none import NoneModule

        class VersionedNone(NoneModule):
            name = "versioned-none"
            description = "test: none from a versioned plugin"

        return [VersionedNone]


@pytest.mark.parametrize("api", [(2, 0), groupcomm.PLUGIN_API])
def test_a_plugin_declaring_a_compatible_api_loads(fresh_registry, api) -> None:
    assert fresh_registry.register_plugin(_Plugin(api), name="versioned") == "versioned"
    assert "versioned-none" in fresh_registry.available_modules()
    assert fresh_registry.plugin_failures() == []


@pytest.mark.parametrize(("api", "says"), [
    ((3, 0), r"written for plugin API 3\.0; this groupcomm provides 2\.\d+"),
    # 1.x modules wrote their own filter classes: their on_user_message is never called
    ((1, 0), r"written for plugin API 1\.0; this groupcomm provides 2\.\d+"),
    ((2, 99), r"written for plugin API 2\.99"),
    ("2.0", r"must be a pair of integers \(major, minor\), got '2\.0'"),
])
def test_a_plugin_declaring_an_incompatible_api_is_refused_and_reported(
        fresh_registry, api, says) -> None:
    assert fresh_registry.register_plugin(_Plugin(api), name="too-new") is None
    (failure,) = fresh_registry.plugin_failures()
    assert failure.name == "too-new"
    assert failure.error.startswith("IncompatiblePluginError: ")
    assert re.search(says, failure.error), failure.error
    assert "versioned-none" not in fresh_registry.available_modules()
    assert "matrix" in fresh_registry.available_modules()  # nothing else is lost


def test_filter_options_arrive_typed_with_defaults_and_bad_ones_are_named(
        fresh_registry) -> None:
    got = []

    def receive(**options: object) -> object:
        got.append(options)
        return object()

    options = [registry.FilterOption("p", float, 0.5, "probability"),
               registry.FilterOption("count", int, 3), registry.FilterOption("loud", bool, False)]
    fresh_registry.register_filter("typed", receive=receive, description="test",
                                   options=options)
    filter_creators(["typed:p=0.25,loud=yes"])
    assert got == [{"p": 0.25, "count": 3, "loud": True}]
    with pytest.raises(SelectionError, match=r"option 'count' of filter 'typed' takes int, "
                       r"default 3; got 'many'"):
        filter_creators(["typed:count=many"])
    with pytest.raises(SelectionError, match=r"has no option colour; it takes p \(float, "
                       r"default 0\.5: probability\)"):
        filter_creators(["typed:colour=red"])
    with pytest.raises(registry.RegistrationError, match="type must be one of"):
        registry.FilterOption("x", list, [])


def test_filters_lists_flags_and_options(fresh_registry, capsys) -> None:
    from groupcomm.cli import filters as filters_cli

    fresh_registry.register_filter("typed", receive=lambda **_: object(), description="t",
                                   options=[registry.FilterOption("p", float, 0.5, "prob")])
    assert filters_cli.main(["--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    modules = {m["name"]: m for m in listing["causality_modules"]}
    assert "known-bad" in modules["scalar-id"]["flags"]
    assert "broadcast-only" in modules["vector"]["flags"]
    assert "sender-side" in modules["mfss"]["flags"]
    assert "known-bad" not in modules["matrix"]["flags"]
    typed = next(f for f in listing["filters"] if f["name"] == "typed")
    assert typed["options"] == [{"name": "p", "type": "float", "default": 0.5, "help": "prob"}]
    assert filters_cli.main([]) == 0
    text = capsys.readouterr().out
    assert "(known-bad, broadcast-only, symmetry)" in text
    assert "p: float, default 0.5: prob" in text
