"""What the analysis says about itself: the files it names, the folders it points to,
what the diagram's title counts (no Spark)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

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


def _bursts(messages: int) -> tuple[Any, list[dict], str]:
    """An execution of bursts of 30 broadcasts among 6 processes, delivered in send
    order but for one late delivery (p3's message at p4); returns it, the violating
    triple and the late message."""
    from trace_analysis.spacetime import AppEvent, Execution

    names = [f"p{i}" for i in range(6)]
    execution = Execution()
    ts, late, overtaker = 0.0, f"p3#{messages // 2}", f"p3#{messages // 2 + 1}"
    held = None
    for k in range(1, messages + 1):
        sender = names[(k * 7) % 6] if k not in (messages // 2, messages // 2 + 1) else "p3"
        msg = f"{sender}#{k}"
        dests = tuple(n for n in names if n != sender)
        ts += 0.001 if k % 30 else 5.0
        execution.add(AppEvent(sender, "send", msg, sender, ts, dests))
        for dest in dests:
            ts += 0.0001
            if (dest, msg) == ("p4", late):
                held = AppEvent(dest, "deliver", msg, sender, 0.0, ())
                continue
            execution.add(AppEvent(dest, "deliver", msg, sender, ts, ()))
            if held is not None and msg == overtaker and dest == "p4":
                execution.add(AppEvent("p4", "deliver", late, "p3", ts + 0.00005, ()))
                held = None
    triple = {"process": "p4", "delivered_first": overtaker, "delivered_second": late,
              "fifo": True}
    return execution, [triple], late


def test_a_large_execution_is_drawn_as_a_window_around_the_violation(tmp_path: Path) -> None:
    from trace_analysis.spacetime import WINDOW_MESSAGES, choose_window

    execution, triples, late = _bursts(300)
    window = choose_window(execution, {("p4", late)}, [])
    assert len(window.messages) == WINDOW_MESSAGES and late in window.messages
    assert window.describe() == (f"messages {window.first}-{window.last} of 300 by send "
                                 "time, around the first delivery out of causal order")
    small, _, _ = _bursts(20)
    assert choose_window(small, set(), []).describe() == ""


def test_the_diagram_image_is_cropped_to_what_is_drawn(tmp_path: Path) -> None:
    from matplotlib import image

    from trace_analysis.spacetime import MAX_WIDTH, draw_spacetime

    execution, triples, _ = _bursts(300)
    path = draw_spacetime(execution, tmp_path / "st.png", triples, [], title="t")
    pixels = image.imread(path)
    height, width = pixels.shape[:2]
    assert width <= MAX_WIDTH * 120 + 100
    blank = pixels[..., :3].min(axis=(1, 2)) > 0.99  # rows with nothing drawn
    trailing = len(blank) - max(i for i, b in enumerate(blank) if not b) - 1
    assert trailing < 0.05 * height  # no empty band below the legend
