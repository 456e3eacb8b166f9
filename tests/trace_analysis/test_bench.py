"""``groupcomm analyze-bench`` on a small trace: both checkers agree, every run is
reported with the stages of the last one, bad arguments get one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_analysis.bench import main
from trace_analysis.session import get_spark

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def spark():
    return get_spark()


def test_a_small_benchmark_agrees_and_reports_each_run(spark, tmp_path: Path,
                                                       capsys) -> None:
    code = main(["--events", "3000", "--processes", "3", "--spark-runs", "2",
                 "--dir", str(tmp_path), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["agree"] is True
    assert len(row["spark_runs_s"]) == 2 and row["spark_s"] == row["spark_runs_s"][-1]
    assert set(row["spark_stages_s"]) == {"load", "checks", "metrics"}
    assert row["found"]["causal_violations"] > 0  # the generator's planted anomalies
    assert not (tmp_path / "trace-3000").exists()  # not kept without --keep


@pytest.mark.parametrize("argv", [["--spark-runs", "0"], ["--events", "0"],
                                  ["--processes", "1"]])
def test_bad_arguments_get_one_line(argv: list[str], capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("groupcomm analyze-bench:") and "\n" not in err
