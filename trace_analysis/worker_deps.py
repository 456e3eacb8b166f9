"""The analysis' packages, shipped to Spark workers whose Python lacks them.

The Python workers of the analysis import numpy, msgspec, pyarrow and pandas (parsing,
Arrow batches, pandas UDFs). A cluster whose workers run a plain Python has none of
them. PySpark's documented way to provide packages is an archive shipped with the job
(``spark.archives``), which every executor unpacks in its working directory. This module
builds such an archive from the driver's own installation of those packages and of what
they require: their files as installed (with their metadata), in one uncompressed tar,
cached by the packages' versions and the platform. The workers then import them from
the unpacked directory (``spark.executorEnv.PYTHONPATH``). Compiled packages only load on
a Python of the same version and platform as the driver's; PySpark requires the same
minor version of Python on the driver and the workers anyway, and :func:`compatible`
checks the platform.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import sysconfig
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

#: where the executors unpack the archive (its alias in ``spark.archives``)
ARCHIVE_ALIAS = "groupcomm-worker-deps"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def platform_tag() -> str:
    """This interpreter's ``major.minor`` and platform (what compiled packages need)."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}-{sysconfig.get_platform()}"


def compatible(worker_version: str, worker_platform: str) -> bool:
    """Whether packages installed for this driver load on a worker of that Python
    version (``3.11.2``) and platform (``linux-x86_64``)."""
    return ".".join(worker_version.split(".")[:2]) + "-" + worker_platform == platform_tag()


def _requirement_names(distribution: metadata.Distribution) -> list[str]:
    """The distributions ``distribution`` requires here (extras left out; environment
    markers evaluated for this interpreter when ``packaging`` is there to read them)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pip and setuptools bring packaging
        Requirement = None  # noqa: N806
    names = []
    for text in distribution.requires or []:
        if Requirement is not None:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(
                    {"extra": ""}):
                continue
            names.append(requirement.name)
        elif "extra ==" not in text:
            match = _NAME.match(text)
            if match:
                names.append(match.group(0))
    return names


def closure(names: tuple[str, ...] | list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` and everything they require, by name."""
    found: dict[str, metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"{name} is not installed here, so it cannot be shipped to the "
                               "Spark workers") from None
        found[key] = distribution
        pending.extend(_requirement_names(distribution))
    return [found[key] for key in sorted(found)]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "groupcomm"


def build_archive(names: tuple[str, ...] | list[str], directory: Path | None = None) -> Path:
    """A tar of the installed files of ``names`` and their requirements, built once per
    set of versions and platform (then taken from the cache)."""
    distributions = closure(names)
    identity = ";".join(f"{d.metadata['Name']}={d.version}" for d in distributions)
    key = hashlib.sha256(f"{platform_tag()};{identity}".encode()).hexdigest()[:16]
    directory = directory or _cache_dir()
    archive = directory / f"spark-worker-deps-{key}.tar"
    if archive.exists():
        return archive
    directory.mkdir(parents=True, exist_ok=True)
    log.info("packing %s for the Spark workers into %s", identity, archive)
    handle, partial = tempfile.mkstemp(dir=directory, suffix=".partial")
    os.close(handle)
    try:
        with tarfile.open(partial, "w") as tar:
            seen: set[str] = set()
            for distribution in distributions:
                root = Path(distribution.locate_file(""))
                for file in distribution.files or []:
                    relative = file.as_posix()
                    # files installed outside site-packages (scripts in bin/) stay behind
                    if relative.startswith("..") or relative in seen:
                        continue
                    if file.suffix == ".pyc" or "__pycache__" in file.parts:
                        continue
                    path = root / file
                    if path.is_file():
                        seen.add(relative)
                        tar.add(path, arcname=relative, recursive=False)
        os.replace(partial, archive)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return archive
