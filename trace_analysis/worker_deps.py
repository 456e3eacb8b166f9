"""The analysis' packages, shipped to Spark workers whose Python lacks them: an
uncompressed tar of the driver's own installation of them and what they require, cached
by versions and platform, sent with the job (``spark.archives``) and put on the workers'
``PYTHONPATH``. Compiled packages load only on the driver's Python version and platform.
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


def platform_tag() -> str:
    """This interpreter's ``major.minor`` and platform (what compiled packages need)."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}-{sysconfig.get_platform()}"


def compatible(worker_version: str, worker_platform: str) -> bool:
    """Whether packages installed for this driver load on a worker of that Python
    version (``3.11.2``) and platform (``linux-x86_64``)."""
    return ".".join(worker_version.split(".")[:2]) + "-" + worker_platform == platform_tag()


def _requirement_names(distribution: metadata.Distribution) -> list[str]:
    """The distributions ``distribution`` requires here (extras left out, environment
    markers evaluated for this interpreter)."""
    from packaging.requirements import Requirement  # matplotlib requires packaging

    names = []
    for text in distribution.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
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
