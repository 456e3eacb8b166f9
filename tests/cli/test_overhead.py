"""``groupcomm overhead``: session-length sweeps and their plot, and ``--pipeline``: each
module's own CPU per message, without sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groupcomm.tools.overhead import main, measure_overhead, measure_pipeline, plot_metadata


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


def test_several_session_lengths_each_measured(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "3", "4", "--messages", "2", "6", "--modules", "matrix", "ks",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["overhead"]
    assert [(r["processes"], r["messages_per_process"], r["module"]) for r in rows] == [
        (3, 2, "matrix"), (3, 2, "ks"), (3, 6, "matrix"), (3, 6, "ks"),
        (4, 2, "matrix"), (4, 2, "ks"), (4, 6, "matrix"), (4, 6, "ks")]
    # every process sends its messages: the counts follow the lengths asked for
    assert [r["app_messages"] for r in rows] == [6, 6, 18, 18, 8, 8, 24, 24]
    # a longer session makes matrix's stamps larger (more of the matrix is non-zero)
    by = {(r["processes"], r["messages_per_process"], r["module"]): r for r in rows}
    assert by[(4, 6, "matrix")]["meta_bytes_per_message"] > \
        by[(4, 2, "matrix")]["meta_bytes_per_message"]


def test_table_columns_line_up_with_long_module_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "3", "--messages", "2", "--modules", "fifo", "matrix-delta"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:3]
    end = header.index("meta B/msg") + len("meta B/msg")
    for row in rows:
        # the right-aligned figures end where their heading ends
        assert row[end - 1] != " " and row[end] == " ", (header, row)


def test_plot_draws_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "figures" / "metadata.png"
    assert main(["--sizes", "4", "--messages", "2", "4", "--modules", "none", "matrix",
                 "matrix-delta", "ks", "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(target) in capsys.readouterr().err


def test_plot_of_one_length_is_drawn_against_group_size(tmp_path: Path) -> None:
    rows = [measure_overhead(module, size, 2) for size in (3, 5) for module in ("matrix", "ks")]
    path = plot_metadata(rows, tmp_path / "by_size.png")
    assert path.stat().st_size > 1000


@pytest.mark.parametrize("argv, says", [
    (["--messages", "3", "0"], "--messages >= 1"),
    (["--modules", "none", "mfss", "--plot", "x.png"], "nothing to plot"),
    (["--modules", "matrix", "--plot", "."], "not a file that can be written"),
    (["--modules", "matrix", "--plot", "taken/x.png"], "taken"),
])
def test_bad_sweep_or_plot_arguments(argv: list[str], says: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file where the plot's folder would go")
    assert main(["--sizes", "3", *argv]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and "Traceback" not in captured.err
    assert not (tmp_path / "x.png").exists()
    # a path that cannot be written is refused before anything is measured
    if "--plot" in argv and "nothing to plot" not in says:
        assert "overhead: matrix at" not in captured.err


def test_cpu_per_message_against_none_in_the_same_configuration(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "3", "5", "--messages", "3", "--modules", "none", "matrix",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["overhead"]
    base = {r["processes"]: r["cpu_us_per_message"] for r in rows if r["module"] == "none"}
    for row in rows:
        assert row["cpu_us_per_message"] > 0
        assert row["cpu_extra_us"] == pytest.approx(
            row["cpu_us_per_message"] - base[row["processes"]], abs=0.11)
    # without none measured there is nothing to add to: said as null, not as a number
    assert main(["--sizes", "3", "--messages", "2", "--modules", "fifo", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["overhead"]
    assert row["cpu_extra_us"] is None and row["cpu_us_per_message"] > 0
