"""Wording of the analysis report."""

from __future__ import annotations


def test_report_titles_count_in_the_singular_when_there_is_one() -> None:
    from trace_analysis.report import _count

    assert _count(1, "causal violation") == "1 causal violation"
    assert _count(3, "causal violation") == "3 causal violations"
    assert _count(1200, "message") == "1,200 messages"


def test_space_time_labels_of_close_sends_do_not_overlap() -> None:
    from trace_analysis.spacetime import CHAR_WIDTH, label_lanes

    span = 10.0
    points = [(0.01 * i, f"alice#{i}") for i in range(1, 11)]  # ten sends within 0.1 s
    placed = label_lanes(points, span)
    assert [lane for _, _, lane in placed[:2]] == [0, 1]
    assert len(placed) == 2  # no room for the others: their dots stay unlabelled
    spread = label_lanes([(float(i), f"bob#{i}") for i in range(5)], span)
    assert [lane for _, _, lane in spread] == [0] * 5  # far apart: all above the line
    for labels in (placed, spread):
        for lane in (0, 1):
            xs = [(x, text) for x, text, k in labels if k == lane]
            for (x1, t1), (x2, _) in zip(xs, xs[1:], strict=False):
                assert x2 >= x1 + len(t1) * CHAR_WIDTH * span  # the next starts after
