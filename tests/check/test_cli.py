"""``groupcomm check``: text and JSON, bad arguments, progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groupcomm.cli.check import main as check_main


# -- command line -----------------------------------------------------------------------------
def test_cli_text_and_json(capsys, tmp_path: Path) -> None:
    assert check_main(["--protocol", "mfss", "--processes", "2", "--messages", "1", "-q"]) == 0
    out = capsys.readouterr().out
    for field in ("result: ok", "states:", "transitions:", "max_depth:", "seconds:"):
        assert field in out
    code = check_main(["--protocol", "none", "--processes", "2", "--messages", "2", "--json",
                       "-q", "--trace-dir", str(tmp_path / "cex")])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["result"] == "violation" and data["property"] == "fifo"
    assert data["counterexample"][0] == "p1 sends p1#1 to p2"
    assert sorted(Path(f).name for f in data["trace_files"]) == ["p1.jsonl", "p2.jsonl"]


@pytest.mark.parametrize("argv", [
    [], ["--protocol", "nope"], ["--protocol", "none", "--processes", "1"],
    ["--protocol", "none", "--messages", "-1"], ["--protocol", "none", "--max-states", "0"],
    ["--protocol", "none", "--workload", "/nonexistent.json"], ["--protocol", "none", "--bogus"],
])
def test_cli_bad_arguments_give_one_line_and_exit_2(argv, capsys) -> None:
    assert check_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1 and "groupcomm check" in err


def test_cli_progress_goes_to_stderr(capsys) -> None:
    from groupcomm.check import config

    assert check_main(["--protocol", "mfss", "--processes", "2", "--messages", "2"]) == 0
    assert config.PROPERTIES  # progress may not fire in such a short run
    assert "result: ok" in capsys.readouterr().out


def test_destinations_subsets_explores_multicasts_too(capsys) -> None:
    """Every non-empty set of the others: unicasts and multicasts (opt-in: many more
    states than unicasts alone)."""
    argv = ["--protocol", "matrix", "--processes", "3", "--messages", "1", "--json", "-q"]
    assert check_main([*argv, "--destinations", "subsets"]) == 0
    subsets = json.loads(capsys.readouterr().out)
    assert check_main(argv) == 0
    unicasts = json.loads(capsys.readouterr().out)
    assert (subsets["states"], unicasts["states"]) == (2721, 281)
    # a broadcast-only module is refused in one line
    assert check_main(["--protocol", "vector", "--destinations", "subsets"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sends to everyone only" in err[0]
