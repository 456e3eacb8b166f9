"""The ``run`` script, driven in a copy of the project whose ``.venv`` holds stand-ins
for python and groupcomm: the install step is one line with its log (the log shown only
when it fails), and ``./run test`` says how long the suite takes before it starts."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: a python that stands in for the venv's: ``-m pip`` prints pip's usual noise (and
#: fails when the file FAIL exists), ``-m pytest`` prints its arguments
FAKE_PYTHON = """#!/usr/bin/env bash
here="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "$1 $2" = "-m pip" ]; then
  echo "WARNING: Location 'https://example.invalid/simple' is ignored: it is either a non-existing path or lacks a specific scheme." >&2
  echo "SetuptoolsDeprecationWarning: License classifiers are deprecated." >&2
  echo "Successfully installed groupcomm"
  [ -f "$here/FAIL" ] && { echo "ERROR: No matching distribution found for pyzmq" >&2; exit 1; }
  exit 0
fi
if [ "$1 $2" = "-m pytest" ]; then
  shift 2
  echo "pytest $*"
  exit 0
fi
exit 3
"""

FAKE_GROUPCOMM = """#!/usr/bin/env bash
echo "groupcomm $*"
"""


def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("run", "setup.cfg", "pyproject.toml"):
        shutil.copy2(ROOT / name, copy / name)
    bin_dir = copy / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("groupcomm", FAKE_GROUPCOMM)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return copy


def run(copy: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # the copy never installs a browser (./run test would, as root on a machine without)
    env = {**os.environ, "GROUPCOMM_BROWSER_INSTALL": "0"}
    return subprocess.run([str(copy / "run"), *argv], capture_output=True, text=True,
                          timeout=60, cwd=copy, env=env)


def test_the_install_step_is_one_line_and_its_noise_goes_to_the_log(tmp_path: Path) -> None:
    copy = project(tmp_path)
    done = run(copy, "groupcomm", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "groupcomm --help\n"
    assert done.stderr.splitlines() == [
        "installing groupcomm and its dev dependencies into .venv (log: .venv/install.log)..."]
    log = (copy / ".venv" / "install.log").read_text()
    assert "is ignored" in log and "SetuptoolsDeprecationWarning" in log
    # installed: the next run says nothing
    again = run(copy, "groupcomm", "--help")
    assert again.returncode == 0 and again.stderr == ""


def test_a_failed_install_shows_the_log(tmp_path: Path) -> None:
    copy = project(tmp_path)
    (copy / "FAIL").write_text("")
    done = run(copy, "groupcomm", "--help")
    assert done.returncode == 1 and done.stdout == ""
    assert "ERROR: No matching distribution found for pyzmq" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"installing into {copy / '.venv'} failed (log above, kept in "
        f"{copy / '.venv' / 'install.log'})")


def test_run_test_says_how_long_the_suite_takes_before_pytest_starts(tmp_path: Path) -> None:
    copy = project(tmp_path)
    run(copy, "groupcomm")  # install
    done = run(copy, "test", "-x")
    assert done.returncode == 0
    assert done.stdout == "pytest -q -x\n"
    assert done.stderr.splitlines() == [
        "running pytest: about 10 minutes on two cores (./run test PATH runs a part)"]
