"""What the analysis says about itself: the files it names, the folders it points to,
what the diagram's title counts (no Spark)."""

from __future__ import annotations

import io
from pathlib import Path

from trace_analysis.cli import main as analyze_main
from trace_analysis.cli import print_table
from trace_analysis.report import _violations_title, write_report, write_summary


def _result() -> dict:
    return {
        "trace_dir": "t", "events": 2, "messages": 1, "processes": 2, "malformed_lines": 0,
        "causal_violations": 0, "fifo_violations": 0, "violating_deliveries": 0,
        "undelivered": 0, "duplicates": 0, "latency_ms": {},
        "per_protocol": {"none": {
            "messages": 1, "causal_violations": 0, "fifo_violations": 0, "undelivered": 0,
            "duplicates": 0, "latency_ms": {}, "buffered_ms": {},
            "meta_bytes_per_message": 0, "control_bytes_per_message": 0}},
        "per_process": {"a": {"send": 1}, "b": {"deliver": 1}}, "malformed_samples": [],
    }


def test_the_report_line_names_only_files_that_exist(tmp_path: Path) -> None:
    result = _result()
    write_report(result, tmp_path, {"none": [1.0]}, None, [], [])
    write_summary(result, tmp_path)
    # left out, with the reasons: no metadata plot, no diagram, no ShiViz log
    assert any("no meta_bytes plot" in note for note in result["report_notes"])
    assert "notes" not in result["report"]
    out = io.StringIO()
    print_table(result, out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("report written:"))
    named = line.removeprefix("report written: ").split(", ")
    assert "summary.json" in named and "latency.png" in named
    assert "meta_bytes.png" not in named and "notes" not in named
    for name in named:
        assert (tmp_path / name).is_file(), name


def test_a_folder_of_trace_folders_points_to_them(tmp_path: Path, capsys) -> None:
    for run in ("run1", "run2", "run3"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "a.jsonl").write_text("{}\n")
    (tmp_path / "plots").mkdir()  # holds no traces: not named
    assert analyze_main([str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"groupcomm analyze: no traces in {tmp_path}; its subfolders run1, run2, "
                   "run3 hold traces: analyze one of them")


def test_the_diagram_title_counts_deliveries_and_names_the_triples() -> None:
    assert _violations_title({"violating_deliveries": 3, "causal_violations": 12}) == \
        "3 deliveries out of causal order (12 violating triples)"
    assert _violations_title({"violating_deliveries": 1, "causal_violations": 1}) == \
        "1 delivery out of causal order (1 violating triple)"
    assert _violations_title({"violating_deliveries": 0, "causal_violations": 0}) == \
        "no delivery out of causal order"
