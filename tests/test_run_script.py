"""The ``run`` script, driven in a copy of the project whose ``.venv`` holds stand-ins
for python and groupcomm: the install step is one line with its log (the log shown only
when it fails), ``./run test`` says how long the suite takes before it starts, and it
installs PostgreSQL's server programs when they are missing (stand-ins for apt-get and id
on PATH)."""

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


def run(copy: Path, *argv: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    # the copy never installs a browser, PostgreSQL or nginx (./run test would, as root
    # on a machine without) and builds no CodeMirror bundle (it has no web/)
    env = {**os.environ, "GROUPCOMM_BROWSER_INSTALL": "0", "GROUPCOMM_POSTGRES_INSTALL": "0",
           "GROUPCOMM_NGINX_INSTALL": "0", "GROUPCOMM_BUNDLE_BUILD": "0", **extra_env}
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


#: an apt-get that notes its arguments (and fails when the file APT_FAIL exists)
FAKE_APT_GET = """#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/apt-get.calls"
echo "Reading package lists..."
[ -f "$(dirname "$0")/APT_FAIL" ] && { echo "E: Unable to locate package postgresql"; exit 100; }
exit 0
"""


def postgres_missing(tmp_path: Path, uid: int = 0) -> tuple[Path, dict[str, str]]:
    """A copy where PostgreSQL's programs are missing (an empty GROUPCOMM_PG_BIN), apt-get
    notes its calls and ``id -u`` says ``uid``."""
    copy = project(tmp_path)
    run(copy, "groupcomm")  # install the venv first: only the PostgreSQL step is looked at
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    for name, text in (("apt-get", FAKE_APT_GET), ("id", f"#!/bin/sh\necho {uid}\n")):
        (fake_bin / name).write_text(text)
        (fake_bin / name).chmod(stat.S_IRWXU)
    (tmp_path / "no-postgres").mkdir()
    env = {"GROUPCOMM_POSTGRES_INSTALL": "1", "GROUPCOMM_PG_BIN": str(tmp_path / "no-postgres"),
           "GROUPCOMM_PG_CREATECLUSTER_D": str(tmp_path / "createcluster.d"),
           "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    return copy, env


def test_run_test_installs_postgresql_when_its_programs_are_missing(tmp_path: Path) -> None:
    copy, env = postgres_missing(tmp_path)
    done = run(copy, "test", "tests/store", **env)
    assert done.returncode == 0 and done.stdout == "pytest -q tests/store\n"
    assert done.stderr.splitlines()[0] == (
        "installing postgresql for the PostgreSQL store's tests (log: "
        ".venv/apt-postgresql.log)...")
    calls = (tmp_path / "fakebin" / "apt-get.calls").read_text().splitlines()
    assert calls == ["update -q", "install -y -q postgresql"]
    # the package is told not to create (and start) a system-wide cluster
    setting = tmp_path / "createcluster.d" / "groupcomm.conf"
    assert setting.read_text() == "create_main_cluster = false\n"
    assert "Reading package lists" in (copy / ".venv" / "apt-postgresql.log").read_text()


def test_a_failed_postgresql_install_shows_the_end_of_its_log(tmp_path: Path) -> None:
    copy, env = postgres_missing(tmp_path)
    (tmp_path / "fakebin" / "APT_FAIL").write_text("")
    done = run(copy, "test", **env)
    assert done.returncode == 0  # the suite still runs: the PostgreSQL tests skip
    assert "E: Unable to locate package postgresql" in done.stderr
    log = copy / ".venv" / "apt-postgresql.log"
    assert (f"installing postgresql failed (log above, kept in {log}): the PostgreSQL "
            "tests skip") in done.stderr.splitlines()


def test_without_root_or_when_told_not_to_postgresql_is_not_installed(tmp_path: Path) -> None:
    copy, env = postgres_missing(tmp_path, uid=1000)
    done = run(copy, "test", **env)
    assert done.stderr.splitlines()[0] == (
        "no PostgreSQL server programs here (needs root and apt-get to install them): the "
        "PostgreSQL tests skip")
    told = run(copy, "test", **{**env, "GROUPCOMM_POSTGRES_INSTALL": "0"})
    assert "postgresql" not in told.stderr.lower()
    assert not (tmp_path / "fakebin" / "apt-get.calls").exists()


def test_postgresql_programs_found_are_not_installed_again(tmp_path: Path) -> None:
    copy, env = postgres_missing(tmp_path)
    found = tmp_path / "no-postgres"
    for name in ("initdb", "pg_ctl"):
        (found / name).write_text("#!/bin/sh\n")
        (found / name).chmod(stat.S_IRWXU)
    done = run(copy, "test", **env)
    assert done.returncode == 0 and "postgresql" not in done.stderr.lower()
    assert not (tmp_path / "fakebin" / "apt-get.calls").exists()


#: an npm that notes its arguments and, for `run build`, writes the bundle (and fails
#: when the file NPM_FAIL exists)
FAKE_NPM = """#!/usr/bin/env bash
echo "$PWD: $*" >>"$(dirname "$0")/npm.calls"
[ -f "$(dirname "$0")/NPM_FAIL" ] && { echo "npm error 404 @codemirror/view"; exit 1; }
[ "$*" = "run build" ] && echo "export { EditorView };" >../groupcomm/web/static/codemirror.js
exit 0
"""


def bundle_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy with the repository's web/ and a stand-in npm on PATH."""
    copy = project(tmp_path)
    run(copy, "groupcomm")  # install the venv first
    shutil.copytree(ROOT / "web", copy / "web", ignore=shutil.ignore_patterns("node_modules"))
    (copy / "web" / "node_modules").mkdir()  # what npm ci would make
    (copy / "groupcomm" / "web" / "static").mkdir(parents=True)
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "npm").write_text(FAKE_NPM)
    (fake_bin / "npm").chmod(stat.S_IRWXU)
    return copy, {"GROUPCOMM_BUNDLE_BUILD": "1", "PATH": f"{fake_bin}:{os.environ['PATH']}"}


def test_the_editor_bundle_is_built_at_set_up_and_again_only_when_web_changes(
        tmp_path: Path) -> None:
    copy, env = bundle_project(tmp_path)
    calls = tmp_path / "fakebin" / "npm.calls"
    done = run(copy, "groupcomm", "--help", **env)
    assert done.returncode == 0 and done.stdout == "groupcomm --help\n"
    assert done.stderr.splitlines() == [
        "building the editor page's CodeMirror bundle with npm and esbuild (log: "
        ".venv/npm-build.log)..."]
    web = copy / "web"
    assert calls.read_text().splitlines() == [f"{web}: ci --no-audit --no-fund",
                                              f"{web}: run build"]
    assert (copy / "groupcomm" / "web" / "static" / "codemirror.js").is_file()
    # built: not again, until web/'s lock file changes
    assert run(copy, "test", **env).stderr.count("bundle") == 0
    assert len(calls.read_text().splitlines()) == 2
    lock = web / "package-lock.json"
    lock.write_text(lock.read_text() + "\n")
    run(copy, "test", **env)
    assert len(calls.read_text().splitlines()) == 4


def test_a_failed_bundle_build_shows_its_log_and_stops(tmp_path: Path) -> None:
    copy, env = bundle_project(tmp_path)
    (tmp_path / "fakebin" / "NPM_FAIL").write_text("")
    done = run(copy, "test", **env)
    assert done.returncode == 1 and done.stdout == ""
    assert "npm error 404 @codemirror/view" in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "building the CodeMirror bundle failed (log above, kept in "
        f"{copy / '.venv' / 'npm-build.log'})")
