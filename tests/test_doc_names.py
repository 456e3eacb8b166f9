"""Every code name and file path the README and docs/ cite exists.

A document goes stale quietly: a method renamed, a file moved. This test reads each
backquoted span of README.md and docs/*.md and resolves what looks like code:

* a file or folder path (``apps/im.py``, ``tests/transport/``) against the repository
  (also relative to ``groupcomm/``, as the documents write ``core/node.py``);
* a dotted name starting with one of our packages (``groupcomm.replicated.TextSequence``,
  ``trace_analysis.reference``) by importing the longest module prefix and looking up
  the rest;
* ``Class.attribute`` where ``Class`` is a class defined in our code, against the
  attributes that class (or a base class of the same code) defines, read from the
  source with :mod:`ast` (methods, class attributes, properties, ``self.x = ...``).

Spans that name something else (shell commands, other libraries' classes, placeholders
in capitals) are left alone; ``test_a_planted_wrong_name_is_reported`` shows the
resolver catches what it should.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: where our code lives (installed names: groupcomm.filters, .plugins and .apps)
CODE_DIRS = ("groupcomm", "filters", "plugins", "apps", "trace_analysis", "examples")
PACKAGES = ("groupcomm", "trace_analysis")
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^(?:\.\./)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: classes of other libraries the documents name (``SparkSession.builder``)
OTHER_LIBRARIES = frozenset({"SparkSession", "Socket", "Path"})
FILE_SUFFIXES = (".py", ".md", ".toml", ".cfg", ".js", ".html", ".css", ".json", ".txt")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


@cache
def instance_index() -> dict[str, str]:
    """Module-level objects made by calling one of our classes: name -> class name
    (``SendMessageFilterSelector = _Selector("send")``)."""
    index: dict[str, str] = {}
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AnnAssign) else [])
                if isinstance(value, ast.Call) and (name := _base_name(value.func)):
                    for target in targets:
                        if isinstance(target, ast.Name):
                            index[target.id] = name
    return index


@cache
def class_index() -> dict[str, list[tuple[set[str], list[str]]]]:
    """Class name -> [(attributes it defines, names of its bases)] over our code."""
    index: dict[str, list[tuple[set[str], list[str]]]] = {}
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            if "build" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    index.setdefault(node.name, []).append(
                        (_attributes(node), [_base_name(b) for b in node.bases]))
    return index


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _attributes(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(item.name)
        elif isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    for node in ast.walk(cls):  # self.x = ... anywhere in its methods
        targets: Iterable[ast.expr] = ()
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = (node.target,)
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                names.add(target.attr)
    return names


def class_has(name: str, attribute: str, seen: frozenset[str] = frozenset()) -> bool:
    for attributes, bases in class_index().get(name, []):
        if attribute in attributes:
            return True
        for base in bases:
            if base in class_index() and base not in seen and class_has(
                    base, attribute, seen | {name}):
                return True
            if base and base not in class_index():  # a library base: cannot tell
                return True
    return False


def resolve_dotted(name: str) -> str | None:
    """Why ``name`` (one of our packages' dotted names) does not resolve, else None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target = importlib.import_module(module_name)
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                if isinstance(target, type) and class_has(target.__name__, part):
                    return None  # an instance attribute set in __init__
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            target = getattr(target, part)
        return None
    return f"no module {parts[0]}"


def resolve_path(span: str) -> str | None:
    path = span.rstrip("/")
    candidates = [ROOT / path, ROOT / "groupcomm" / path, ROOT / "docs" / path]
    if path.startswith("../"):
        candidates.append(ROOT / path[3:])
    if any(candidate.exists() for candidate in candidates):
        return None
    return f"no file or folder {span}"


def problems(text: str) -> list[str]:
    """What the backquoted spans of ``text`` cite that does not exist."""
    found: list[str] = []
    for span in SPAN.findall(text):
        span = span.strip()
        bare = re.sub(r"\(.*\)$", "", span)  # `held()`, `release_waiting_on(name)`
        if "/" in span and PATH.match(span) and not span.startswith(("http", "~", "/", "./")):
            if span.endswith("/") or span.endswith(FILE_SUFFIXES):
                if not any(c.isupper() for c in span.split("/")[0][:1]) and (
                        why := resolve_path(span)):
                    found.append(f"`{span}`: {why}")
            continue
        if not DOTTED.match(bare) or bare.endswith(FILE_SUFFIXES):
            continue
        head, _, rest = bare.partition(".")
        if head in PACKAGES:
            if why := resolve_dotted(bare):
                found.append(f"`{span}`: {why}")
        elif head[:1].isupper() and head[1:2].islower() and "." not in rest:
            head = head if head in class_index() else instance_index().get(head, head)
            if head not in class_index():
                if head not in OTHER_LIBRARIES:
                    found.append(f"`{span}`: no class {head} in the code")
            elif not class_has(head, rest):
                found.append(f"`{span}`: class {head} has no {rest}")
    return found


def broken_links(document: Path) -> list[str]:
    """Relative markdown links of ``document`` whose file is not there."""
    found = []
    for target in LINK.findall(document.read_text(encoding="utf-8")):
        target = target.split("#")[0]
        if target and not target.startswith(("http:", "https:", "mailto:")):
            if not (document.parent / target).exists():
                found.append(f"link to {target}: no such file")
    return found


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_name_a_document_cites_exists(document: Path) -> None:
    assert problems(document.read_text(encoding="utf-8")) + broken_links(document) == []


def test_a_planted_wrong_name_is_reported() -> None:
    text = ("Call `Communicator.held()` and `Communicator.no_such_method()`; "
            "read `docs/architecture.md` and `docs/no_such_page.md`; "
            "`groupcomm.replicated.TextSequence` and `groupcomm.replicated.NoSuchType`; "
            "`SessionLink._hold_early`.")
    assert problems(text) == [
        "`Communicator.no_such_method()`: class Communicator has no no_such_method",
        "`docs/no_such_page.md`: no file or folder docs/no_such_page.md",
        "`groupcomm.replicated.NoSuchType`: groupcomm.replicated has no NoSuchType",
        "`SessionLink._hold_early`: " + (
            "class SessionLink has no _hold_early" if "SessionLink" in class_index()
            else "no class SessionLink in the code"),
    ]


def test_a_broken_link_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md), [anchor](there.md#part), [web](https://example.org), "
                    "[gone](missing.md)")
    assert broken_links(page) == ["link to missing.md: no such file"]
