"""The SES example plugin installed (pip) into a fresh target directory once per
session, as a third party installs it; processes that should see it get it on
``PYTHONPATH`` (the test process itself does not: its registry stays as installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SES_PLUGIN = ROOT / "examples" / "groupcomm-ses-plugin"


@pytest.fixture(scope="session")
def ses_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the installed ``groupcomm-ses-plugin`` (its dist-info
    included, so the ``groupcomm.plugins`` entry point is found)."""
    target = tmp_path_factory.mktemp("ses-site")
    work = tmp_path_factory.mktemp("ses-build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(SES_PLUGIN)],
        check=True, cwd=work, capture_output=True, timeout=300,
    )
    return target


def run_with(site: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with the plugin's site directory on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)
