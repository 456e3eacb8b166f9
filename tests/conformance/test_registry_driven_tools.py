"""The tools take their module lists from the registry and size their tables to the
names; the checker quiets a plugin module's logger as it does the built-ins'."""

from __future__ import annotations

import logging

import pytest

from groupcomm.check.config import quiet_module_loggers, quieted_module_loggers
from groupcomm.core import registry
from groupcomm.filters.none import NoneModule
from groupcomm.tools.overhead import build_parser, default_modules


class AVeryLongPluginModuleName(NoneModule):
    name = "a-very-long-plugin-module-name"
    description = "test: none under a long name, registered in code"


class KnownBadPlugin(NoneModule):
    name = "known-bad-plugin"
    description = "KNOWN BAD (test): registered in code"
    known_bad = True


@pytest.fixture
def with_plugins():
    registry.reload()
    registry.register_module(AVeryLongPluginModuleName, origin="tests")
    registry.register_module(KnownBadPlugin, origin="tests")
    yield
    registry.reload()


def test_overhead_measures_every_installed_module_but_the_known_bad(with_plugins) -> None:
    names = default_modules()
    assert names[0] == "none"
    assert {"fifo", "vector", "matrix", "matrix-delta", "ks", "mfss", "cykas",
            "a-very-long-plugin-module-name"} <= set(names)
    assert not {"known-bad-plugin", "scalar-id", "last-sender", "cykas-secret-sends",
                "vector-forgets-joins"} & set(names)
    assert "every installed module that is not known-bad" in build_parser().format_help()


def test_the_registry_picks_modules_by_their_flags(with_plugins) -> None:
    unicast = registry.default_modules(unicast=True)
    assert "vector" not in unicast and "matrix" in unicast
    causal = registry.default_modules(causal=True)
    assert "none" not in causal and "fifo" not in causal and "ks" in causal
    assert "known-bad-plugin" in registry.default_modules(known_bad=True)


def test_the_demo_table_fits_a_long_module_name(capsys) -> None:
    from groupcomm.apps.demo import print_table

    run = {"scenario": "meeting", "causality": "a-very-long-plugin-module-name",
           "deliveries": {"carol": ["m1", "m3"]}, "causal_violations": 0,
           "median_latency_ms": 1.5, "meta_bytes_per_message": 12.0,
           "control_messages_per_message": 0.0}
    print_table([run, {**run, "causality": "none"}])
    header, rule, long_row, short_row = capsys.readouterr().out.splitlines()
    column = header.index("carol has")
    assert long_row.index("m1 m3") == column == short_row.index("m1 m3")
    assert "a-very-long-plugin-module-name " in long_row


def test_the_checker_quiets_a_plugin_modules_own_logger(with_plugins) -> None:
    names = {log.name for log in quieted_module_loggers("a-very-long-plugin-module-name")}
    assert {"tests.conformance", "groupcomm.filters", "groupcomm.core.node"} <= names
    mine = logging.getLogger("tests.conformance")
    before = mine.level
    with quiet_module_loggers("a-very-long-plugin-module-name"):
        assert not mine.isEnabledFor(logging.WARNING)
    assert mine.level == before
    assert {log.name for log in quieted_module_loggers("no-such-module")} == {
        "groupcomm.filters", "groupcomm.core.node"}
