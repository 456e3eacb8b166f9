"""The Python snippets of the README and of docs/ run as written, against a real session
server (the address and key file they name are swapped for the test server's).

docs/writing-a-module.md is left to its own test: its snippets define a plugin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup

ROOT = Path(__file__).resolve().parents[1]
#: documents whose snippets another test runs
OWN_TESTS = {"writing-a-module.md"}
DOCUMENTS = [ROOT / "README.md"] + sorted(
    path for path in (ROOT / "docs").glob("*.md") if path.name not in OWN_TESTS)
SNIPPETS = [(path.relative_to(ROOT).as_posix(), code) for path in DOCUMENTS
            for code in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"),
                                   re.DOTALL)]


def test_the_readme_and_docs_have_snippets() -> None:
    assert any(where == "README.md" for where, _ in SNIPPETS)
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_a_readme_snippet_runs_as_written(number: int, group: ProcessGroup,
                                          tmp_path: Path) -> None:
    assert group.server is not None
    (tmp_path / "session.key").write_bytes(group.key_file.read_bytes())
    where, code = SNIPPETS[number]
    code = code.replace("127.0.0.1:5555", group.server.address)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"{where}, snippet:\n{code}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    if "Done?" in code:  # bob pulls what alice sent
        assert "alice Done?" in done.stdout
