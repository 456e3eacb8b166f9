"""Wording of the analysis report."""

from __future__ import annotations


def test_report_titles_count_in_the_singular_when_there_is_one() -> None:
    from trace_analysis.report import _count

    assert _count(1, "causal violation") == "1 causal violation"
    assert _count(3, "causal violation") == "3 causal violations"
    assert _count(1200, "message") == "1,200 messages"
