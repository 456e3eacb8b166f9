"""The synthetic trace generator behind ``groupcomm analyze-bench`` writes the size it
was asked for and exactly the anomalies it planned, whatever the size."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_analysis.reference import check_directory
from trace_analysis.synth import SynthSpec, generate

#: sizes and seeds at which the injection used to stall (20k and 200k events with seed 1)
#: beside sizes at which it did not
SIZES = [1_000, 2_000, 5_000, 20_000, 50_000, 100_000, 200_000, 210_000]


@pytest.mark.parametrize("events", SIZES)
def test_requested_size_and_every_planned_anomaly(tmp_path: Path, events: int) -> None:
    spec = SynthSpec(events=events)
    result = generate(spec, tmp_path)
    # the run stops at the first step that reaches the size, then drains the queues
    assert events <= result.lines <= events * 1.5 + 500
    assert result.injected == {"violations": 5, "undelivered": 5, "duplicates": 3,
                               "malformed": 3}


@pytest.mark.parametrize("seed", range(1, 9))
def test_the_checker_finds_exactly_what_was_injected(tmp_path: Path, seed: int) -> None:
    spec = SynthSpec(events=20_000, processes=8, seed=seed, protocol="matrix")
    result = generate(spec, tmp_path)
    found = check_directory(tmp_path)
    assert result.injected["violations"] == spec.violations
    assert found.causal_violations == spec.violations
    assert found.undelivered == spec.undelivered
    assert found.duplicates == spec.duplicates
    assert found.malformed_lines == spec.malformed
    assert found.events + found.malformed_lines == result.lines

