"""The archive of packages shipped to Spark workers that lack them (the real shipping to
a standalone cluster is in test_standalone_cluster.py, behind the slow marker)."""

from __future__ import annotations

import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from trace_analysis.session import build_archive, closure, compatible, platform_tag


def test_closure_follows_requirements() -> None:
    names = {d.metadata["Name"].lower() for d in closure(["pandas"])}
    assert {"pandas", "numpy", "python-dateutil", "pytz", "tzdata"} <= names
    with pytest.raises(RuntimeError, match="not installed"):
        closure(["no-such-distribution-here"])


def test_only_a_worker_of_the_same_python_and_platform_is_compatible() -> None:
    version = ".".join(map(str, sys.version_info[:3]))
    assert compatible(version, sysconfig.get_platform())
    assert platform_tag().startswith(f"{sys.version_info[0]}.{sys.version_info[1]}-")
    assert not compatible("3.9.18", sysconfig.get_platform())
    assert not compatible(version, "linux-aarch64" if "x86_64" in platform_tag()
                          else "linux-x86_64")


def test_the_archive_holds_the_installed_files_and_is_built_once(tmp_path: Path) -> None:
    archive = build_archive(["msgspec"], tmp_path)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "msgspec/__init__.py" in names
    assert any(n.startswith("msgspec-") and n.endswith(".dist-info/METADATA") for n in names)
    assert not any("__pycache__" in n or n.startswith("..") for n in names)
    built = archive.stat().st_mtime_ns
    assert build_archive(["msgspec"], tmp_path) == archive
    assert archive.stat().st_mtime_ns == built
    assert not list(tmp_path.glob("*.partial"))
