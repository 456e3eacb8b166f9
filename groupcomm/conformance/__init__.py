"""The conformance suite of a causality module (docs/commands.md): ``groupcomm
conformance NAME``, :func:`run_conformance`, or :func:`assert_conformant` in a plugin's
tests. It expects what the module's class declares
(:class:`~groupcomm.conformance.outcome.Declared`), never what its name suggests."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.conformance import model_checks, processes, scenarios
from groupcomm.conformance.outcome import FAIL, NOT_APPLICABLE, PASS, Declared, Outcome
from groupcomm.core.registry import get_module

#: every check, in the order they run
CHECKS = ("random-executions", "cause-before-effect", "held-and-release",
          "snapshot-round-trip", "late-joiners", "replicated-convergence", "symmetry",
          "model-check", "model-check-churn", "stress", "trace-analysis")


@dataclass
class ConformanceReport:
    """Every outcome of one module's run."""

    module: str
    declared: Declared
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    @property
    def passed(self) -> bool:
        """No check failed."""
        return not self.failed

    @property
    def as_declared(self) -> bool:
        """A correct module passed, or a known-bad one failed with a counterexample."""
        if self.declared.known_bad:
            return any(o.counterexample for o in self.failed)
        return self.passed

    def as_dict(self) -> dict[str, Any]:
        return {"module": self.module, "known_bad": self.declared.known_bad,
                "passed": self.passed, "as_declared": self.as_declared,
                "checks": [o.as_dict() for o in self.outcomes]}


def run_conformance(name: str, *, quick: bool = False, stress: bool = False, spark: bool = False,
                    only: Iterable[str] | None = None, trace_dir: Path | None = None,
                    progress: Callable[[Outcome], None] | None = None) -> ConformanceReport:
    """Run the checks on the registered module ``name`` (raises
    :class:`~groupcomm.core.registry.UnknownModuleError` for an unknown one). ``stress``
    adds the real-process run and ``spark`` (which implies it) the Spark analysis of its
    traces, kept in ``trace_dir`` if given; ``only`` restricts to the named checks;
    ``progress`` is called with each outcome as it comes."""
    declared = Declared.of(get_module(name))
    chosen = set(CHECKS if only is None else only)
    unknown = chosen - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(sorted(unknown))}; the checks are "
                         f"{', '.join(CHECKS)}")
    runs = 40 if quick else 200
    plan: list[tuple[str, Callable[[], Outcome]]] = [
        ("random-executions", lambda: scenarios.random_executions(name, declared, runs)),
        ("cause-before-effect", lambda: scenarios.cause_before_effect(name, declared)),
        ("held-and-release", lambda: scenarios.held_and_release(name, declared)),
        ("snapshot-round-trip", lambda: scenarios.snapshot_round_trip(name, declared, runs)),
        ("late-joiners", lambda: scenarios.late_joiners(name, declared, runs // 2)),
        ("replicated-convergence",
         lambda: scenarios.replicated_convergence(name, declared, runs // 2)),
        ("symmetry", lambda: model_checks.symmetry_equivariance(name, declared)),
        ("model-check",
         lambda: model_checks.model_check(name, declared, messages=1 if quick else 2)),
        ("model-check-churn", lambda: model_checks.model_check_churn(name, declared)),
    ]
    report = ConformanceReport(name, declared)
    with tempfile.TemporaryDirectory(prefix="groupcomm-conformance-") as scratch:
        traces = trace_dir or Path(scratch) / "traces"
        plan.append(("stress", lambda: processes.stress_run(name, declared, traces)
                     if stress or spark else
                     Outcome("stress", NOT_APPLICABLE, "not asked (--stress)")))
        plan.append(("trace-analysis", lambda: processes.spark_analysis(name, declared, traces)
                     if spark else
                     Outcome("trace-analysis", NOT_APPLICABLE, "not asked (--spark)")))
        for check, run in plan:
            if check not in chosen:
                continue
            start = time.perf_counter()
            outcome = run()
            outcome.seconds = outcome.seconds or time.perf_counter() - start
            report.outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    return report


def assert_conformant(name: str, **options: Any) -> ConformanceReport:
    """For a plugin's own test suite: run :func:`run_conformance` and fail (an
    ``AssertionError`` listing every failed check and its counterexample) unless the
    module behaves as it declares: a correct module passes every check, a known-bad one
    fails one with a counterexample."""
    report = run_conformance(name, **options)
    if not report.as_declared:
        if report.declared.known_bad:
            raise AssertionError(f"{name} is declared known-bad but no check caught it")
        lines = [f"{name} failed {len(report.failed)} conformance check(s):"]
        for outcome in report.failed:
            lines.append(f"  {outcome.check}: {outcome.detail}")
            lines += [f"      {step}" for step in outcome.counterexample]
        raise AssertionError("\n".join(lines))
    return report


__all__ = ["CHECKS", "FAIL", "NOT_APPLICABLE", "PASS", "ConformanceReport", "Declared",
           "Outcome", "assert_conformant", "run_conformance"]
