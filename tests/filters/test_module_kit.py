"""The public module-author API (``groupcomm.module_kit``) is what the built-in modules
use: they import the framework through it (and each other), as a third-party module
does, and its renamers re-encode canonically."""

from __future__ import annotations

import ast
import pathlib

import groupcomm
import groupcomm.module_kit as kit

FILTERS = pathlib.Path(__file__).resolve().parents[2] / "filters"


def test_every_public_name_exists() -> None:
    for name in kit.__all__:
        assert hasattr(kit, name), name
    assert kit.PLUGIN_API == groupcomm.PLUGIN_API
    assert isinstance(kit.PLUGIN_API, tuple) and len(kit.PLUGIN_API) == 2


def test_the_built_in_modules_import_the_framework_through_the_public_api() -> None:
    for path in sorted(FILTERS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[:2] != ["groupcomm", "core"], path.name
                if node.module.startswith("groupcomm."):
                    assert node.module.startswith(("groupcomm.module_kit",
                                                   "groupcomm.filters.")), path.name


def test_renamers_re_encode_canonically() -> None:
    swap = {"a": "b", "b": "a", "c": "c"}.__getitem__
    clock = kit.encode_clock({"a": 2, "c": 1})
    assert kit.rename_clock(clock, swap) == kit.encode_clock({"b": 2, "c": 1})
    matrix = kit.encode_matrix({"a": {"b": 1, "c": 3}, "c": {"a": 2}})
    assert kit.rename_matrix(matrix, swap) == kit.encode_matrix(
        {"b": {"a": 1, "c": 3}, "c": {"b": 2}})
