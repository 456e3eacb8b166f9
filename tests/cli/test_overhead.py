"""``groupcomm overhead --pipeline``: each module's own CPU per message, without sockets."""

from __future__ import annotations

import json

import pytest

from groupcomm.tools.overhead import main
from groupcomm.tools.pipeline_cost import measure_pipeline


def test_pipeline_rows_for_every_module_with_none_first(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["--sizes", "3", "--messages", "2", "--modules", "fifo", "matrix", "mfss",
                 "--pipeline", "300", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["module"] for row in report["overhead"]] == ["fifo", "matrix", "mfss"]
    rows = {row["module"]: row for row in report["pipeline"]}
    assert list(rows) == ["none", "fifo", "matrix", "mfss"]  # none first: the baseline
    none = rows["none"]
    assert none["cost_relative_to_none"] == 1.0 and none["send_extra_us"] == 0.0
    for row in rows.values():
        assert row["send_us_per_msg"] > 0 and row["receive_us_per_msg"] > 0
        assert row["busier_us_per_msg"] == max(row["send_us_per_msg"],
                                               row["receive_us_per_msg"])
    assert report["throughput"] == []


def test_pipeline_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "3", "--messages", "2", "--modules", "none", "vector",
                 "--pipeline", "200"]) == 0
    out = capsys.readouterr().out
    assert "send us/msg" in out and "busier vs none" in out
    assert any(line.startswith("vector ") and "+" in line for line in out.splitlines())


@pytest.mark.parametrize("module", ["fifo", "vector", "matrix", "matrix-delta", "ks",
                                    "mfss", "cykas"])
def test_every_message_is_delivered(module: str) -> None:
    # measure_pipeline raises unless every message reached the receiving application;
    # the sender-side modules need their ACKs carried back to send the next one
    cost = measure_pipeline(module, 100)
    assert cost["send_us"] > 0 and cost["receive_us"] > 0


@pytest.mark.parametrize("argv, says", [
    (["--pipeline", "-1"], "--pipeline and --throughput must be >= 0"),
    (["--pipeline", "10", "--repeat", "0"], "--repeat >= 1"),
    (["--pipeline", "many"], "invalid int value"),
    (["--modules", "nope", "--pipeline", "10"], "nope"),
])
def test_bad_arguments_say_what_is_wrong(argv: list[str], says: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "3", "--messages", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
