"""The README's Python snippets run as written, against a real session server (the
address and key file they name are swapped for the test server's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"),
                      re.DOTALL)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_a_readme_snippet_runs_as_written(number: int, group: ProcessGroup,
                                          tmp_path: Path) -> None:
    assert group.server is not None
    (tmp_path / "session.key").write_bytes(group.key_file.read_bytes())
    code = SNIPPETS[number].replace("127.0.0.1:5555", group.server.address)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"snippet {number + 1}:\n{code}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    if "Done?" in code:  # the first one: bob pulls what alice sent
        assert "alice Done?" in done.stdout
