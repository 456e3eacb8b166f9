"""The installed package claims no generic top-level name: the repository's filters/,
plugins/ and apps/ folders go into the wheel as groupcomm.filters, groupcomm.plugins and
groupcomm.apps, and the entry points name them so."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_everything_under_groupcomm(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("groupcomm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"groupcomm", "trace_analysis"}
    for package in ("filters/vector.py", "plugins/builtin.py", "apps/im.py"):
        assert f"groupcomm/{package}" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    # one entry-point group: the built-ins are a plugin like any other
    assert "[groupcomm.plugins]\nbuiltin = groupcomm.plugins.builtin" in text
    assert "groupcomm.discovery" not in text
