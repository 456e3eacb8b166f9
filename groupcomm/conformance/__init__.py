"""The conformance suite of a causality module (docs/commands.md): ``groupcomm
conformance NAME``, :func:`run_conformance`, or :func:`assert_conformant` in a plugin's
tests. It expects what the module's class declares
(:class:`~groupcomm.conformance.scenarios.Declared`), never what its name suggests.

The in-process checks are in :mod:`~groupcomm.conformance.scenarios`; here are those that
run the model checker, and those that run real processes (``groupcomm stress``, and on
request ``groupcomm analyze`` on its traces) as subprocesses, so a plugin module must be
installed (an entry point) for them, not only registered in code."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.check import CheckConfig, CheckResult, check
from groupcomm.check.config import quiet_module_loggers
from groupcomm.conformance import scenarios
from groupcomm.conformance.scenarios import FAIL, NOT_APPLICABLE, PASS, Declared, Outcome
from groupcomm.core.oracle import Verdict, check_records
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
        ("symmetry", lambda: symmetry_equivariance(name, declared)),
        ("model-check", lambda: model_check(name, declared, messages=1 if quick else 2)),
        ("model-check-churn", lambda: model_check_churn(name, declared)),
    ]
    report = ConformanceReport(name, declared)
    with tempfile.TemporaryDirectory(prefix="groupcomm-conformance-") as scratch:
        traces = trace_dir or Path(scratch) / "traces"
        plan.append(("stress", lambda: stress_run(name, declared, traces)
                     if stress or spark else
                     Outcome("stress", NOT_APPLICABLE, "not asked (--stress)")))
        plan.append(("trace-analysis", lambda: spark_analysis(name, declared, traces)
                     if spark else
                     Outcome("trace-analysis", NOT_APPLICABLE, "not asked (--spark)")))
        for check_name, run in plan:
            if check_name not in chosen:
                continue
            start = time.perf_counter()
            outcome = run()
            outcome.seconds = outcome.seconds or time.perf_counter() - start
            report.outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    return report


#: a search that reaches this many states stops (the result is "incomplete": a pass
#: that says so); far above what the configurations below reach for the built-ins
MAX_STATES = 400_000


def _judged(result: CheckResult, declared: Declared) -> tuple[bool, str]:
    """(failed, detail) for a checker result, by the order the module promises."""
    if result.result == "violation":
        relevant = {"causal": None, "fifo": {"fifo", "duplicate", "exception", "refused",
                                            "liveness"},
                    "arrival": {"duplicate", "exception", "refused", "liveness"}}
        wanted = relevant[declared.order]
        if wanted is None or result.property in wanted:
            return True, f"{result.property}: {result.detail}"
        return False, (f"ok for what it promises ({declared.order} order); the checker's "
                       f"{result.property} finding is outside it")
    if result.result == "incomplete":
        return False, f"stopped after {result.states:,} states without a violation"
    return False, f"{result.states:,} states, no violation"


def _run(name: str, declared: Declared, config: CheckConfig, what: str) -> Outcome:
    start = time.perf_counter()
    with quiet_module_loggers(config.protocol):
        result = check(config)
    failed, detail = _judged(result, declared)
    outcome = Outcome(name, FAIL if failed else PASS, f"{what}: {detail}",
                      seconds=time.perf_counter() - start)
    if failed:
        outcome.counterexample = list(result.counterexample) + list(result.completion)
    return outcome


def model_check(module: str, declared: Declared, *, messages: int) -> Outcome:
    """Every interleaving of 3 processes sending ``messages`` messages each."""
    config = CheckConfig(protocol=module, processes=3, messages=messages,
                         max_states=MAX_STATES, reduce=True)
    return _run("model-check", declared, config, f"3 processes x {messages} message(s)")


def model_check_churn(module: str, declared: Declared) -> Outcome:
    """Every interleaving of 3 processes sending one message each while p3 joins late
    and p2 leaves, at every point (sends racing the departure included)."""
    config = CheckConfig(protocol=module, processes=3, messages=1, late=("p3",),
                         leaving=("p2",), max_states=MAX_STATES)
    return _run("model-check-churn", declared, config,
                "3 processes x 1 message, p3 joining late, p2 leaving")


def symmetry_equivariance(module: str, declared: Declared) -> Outcome:
    """With the symmetry reduction on, the checker finds the same verdict (and the same
    length of shortest counterexample) as without it, over fewer states: the module's
    declared header renamers and its snapshot keep renaming and stepping commuting."""
    if not declared.symmetry:
        return Outcome("symmetry", NOT_APPLICABLE,
                       "the module declares no symmetry_headers on its own class")
    start = time.perf_counter()
    plain_config = CheckConfig(protocol=module, processes=3, messages=1, reduce=True)
    reduced_config = CheckConfig(protocol=module, processes=3, messages=1, reduce=True,
                                 symmetry=True)
    with quiet_module_loggers(module):
        plain = check(plain_config)
        try:
            reduced = check(reduced_config)
        except ValueError as error:  # SymmetryError: a value it cannot rename
            return Outcome("symmetry", FAIL, f"symmetry reduction refused the module: {error}",
                           seconds=time.perf_counter() - start)
    found = []
    if plain.result != reduced.result or plain.property != reduced.property:
        found.append(f"verdict {plain.result}/{plain.property} without symmetry, "
                     f"{reduced.result}/{reduced.property} with it")
    elif len(plain.counterexample) != len(reduced.counterexample):
        found.append(f"shortest counterexample of {len(plain.counterexample)} steps without "
                     f"symmetry, {len(reduced.counterexample)} with it")
    if reduced.states > plain.states:
        found.append(f"{reduced.states:,} states with symmetry, {plain.states:,} without")
    seconds = time.perf_counter() - start
    if found:
        return Outcome("symmetry", FAIL, "; ".join(found),
                       counterexample=list(reduced.counterexample or plain.counterexample),
                       seconds=seconds)
    return Outcome("symmetry", PASS,
                   f"same verdict ({plain.result}) over {reduced.states:,} states with "
                   f"symmetry, {plain.states:,} without (3 processes x 1 message)",
                   seconds=seconds)


def _run_json(check_name: str, command: list[str], shown: str, timeout: float
              ) -> tuple[dict[str, Any] | Outcome, subprocess.CompletedProcess[str] | None]:
    """Run ``command`` and read the last JSON line of its output; a failed
    :class:`Outcome` instead when it does not finish in time or prints no result."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on the way out
        return Outcome(check_name, FAIL, f"{shown} did not finish in {timeout:.0f} s",
                       seconds=time.perf_counter() - start), None
    for line in reversed(done.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), done
            except json.JSONDecodeError:
                break
    return Outcome(check_name, FAIL, f"{shown} exited {done.returncode} without a result",
                   counterexample=_tail(done.stderr),
                   seconds=time.perf_counter() - start), done


def _tail(text: str, lines: int = 8) -> list[str]:
    return text.strip().splitlines()[-lines:]


def stress_run(module: str, declared: Declared, trace_dir: Path, *, messages: int = 300,
               timeout: float = 240.0) -> Outcome:
    """``groupcomm stress`` with drops and churn; nothing lost or duplicated, no protocol
    error, and the traces in the promised order."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "groupcomm.cli", "stress", "--processes", "5",
               "--messages", str(messages), "--causality", module, "--drop", "0.02",
               "--churn", "--no-analysis", "--json", "--timeout", str(int(timeout * 0.6)),
               "--trace-dir", str(trace_dir)]
    shown = "groupcomm stress " + " ".join(command[4:])
    result, done = _run_json("stress", command, shown, timeout)
    if isinstance(result, Outcome):
        return result
    assert done is not None
    found = [f"{key}: {result[key]}" for key in ("lost", "duplicated", "protocol_errors")
             if result.get(key)]
    if result.get("settled") is False:
        found.append("the traffic did not settle: members still waited at the end "
                     f"(held: {result.get('held_at_end')})")
    verdict = trace_verdict(trace_dir)
    # killed and departed members leave messages undelivered: only safety is judged here
    found += scenarios.problems(dataclasses.replace(verdict, undelivered=[]), declared)
    seconds = time.perf_counter() - start
    summary = (f"{result.get('sent', '?')} copies sent, {result.get('delivered', '?')} of "
               f"{result.get('expected', '?')} expected deliveries between members that "
               f"stayed, {verdict.messages} messages in the traces, in {seconds:.0f} s")
    if found:
        return Outcome("stress", FAIL, "; ".join(found[:3]) + f" ({summary})",
                       counterexample=[shown, *_tail(done.stderr)], seconds=seconds)
    return Outcome("stress", PASS, f"5 processes, 2% drops, churn: {summary}", seconds=seconds)


def trace_verdict(trace_dir: Path) -> Verdict:
    """The oracle's verdict on every trace file of a run (``*.jsonl``; a line cut short
    by a killed process is skipped)."""
    records: list[dict[str, Any]] = []
    for path in sorted(trace_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and record.get("event") in ("send", "deliver"):
                    records.append(record)
    return check_records(records)


def spark_analysis(module: str, declared: Declared, trace_dir: Path, *,
                   timeout: float = 600.0) -> Outcome:
    """``groupcomm analyze`` (PySpark) on the stress run's traces: no causal violation
    for a causal module, no FIFO violation for a FIFO one, no duplicate delivery."""
    if not any(trace_dir.glob("*.jsonl")):
        return Outcome("trace-analysis", NOT_APPLICABLE, "no traces: the stress run did not run")
    start = time.perf_counter()
    command = [sys.executable, "-m", "groupcomm.cli", "analyze", str(trace_dir), "--json",
               "--no-server"]
    result, _ = _run_json("trace-analysis", command, "groupcomm analyze", timeout)
    if isinstance(result, Outcome):
        return result
    seconds = time.perf_counter() - start
    keys = ["duplicates"] + {"causal": ["causal_violations"], "fifo": ["fifo_violations"],
                             "arrival": []}[declared.order]
    found = [f"{key}: {result.get(key)}" for key in keys if result.get(key)]
    if found:
        return Outcome("trace-analysis", FAIL, "; ".join(found),
                       counterexample=[" ".join(command[2:])], seconds=seconds)
    return Outcome("trace-analysis", PASS,
                   f"Spark: {result.get('messages', '?')} messages, "
                   f"{result.get('causal_violations', 0)} causal violations", seconds=seconds)


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
