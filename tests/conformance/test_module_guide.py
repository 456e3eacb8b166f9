"""docs/writing-a-module.md runs as written: its Python blocks, in order, as one
program, with the SES example plugin installed; what they print is what the guide says
they print."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conformance.conftest import ROOT, run_with

GUIDE = ROOT / "docs" / "writing-a-module.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_guide_has_a_block_per_contract() -> None:
    assert len(blocks()) >= 8


def test_the_guides_code_runs_in_order_and_prints_what_it_says(ses_site: Path) -> None:
    done = run_with(ses_site, "-c", "\n".join(blocks()))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    out = done.stdout
    assert "('known-bad', 'symmetry')" in out
    assert "1 {'b': {'a': 1}, 'c': {'a': 1}}" in out
    assert "carries no 'sp' header" in out and "header 'sp' of b#1 from b" in out
    assert "['bob#1'] {'bob#1': ['alice']}" in out and "['cause', 'effect']" in out
    assert "['p2#1'] ['reaction']" in out
    assert re.search(r"^ok \d+ ok \d+$", out, re.MULTILINE)
    assert "violation\n  causal\n" in out
    assert "['>>hi']" in out and "option 'times' of filter 'tag' takes int" in out
    assert "fail carol delivered bob#1 before alice#1" in out
