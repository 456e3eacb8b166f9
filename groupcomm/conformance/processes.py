"""The real-process checks: a short ``groupcomm stress`` run with drops and churn, its
traces judged by the causal-order oracle and, on request, by ``groupcomm analyze``. Both
run as subprocesses, so a plugin module must be installed (an entry point), not only
registered in code."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from groupcomm.conformance.outcome import FAIL, NOT_APPLICABLE, PASS, Declared, Outcome
from groupcomm.conformance.scenarios import problems
from groupcomm.core.oracle import Verdict, check_records


def _run_json(check: str, command: list[str], shown: str, timeout: float
              ) -> tuple[dict[str, Any] | Outcome, subprocess.CompletedProcess[str] | None]:
    """Run ``command`` and read the last JSON line of its output; a failed
    :class:`Outcome` instead when it does not finish in time or prints no result."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on the way out
        return Outcome(check, FAIL, f"{shown} did not finish in {timeout:.0f} s",
                       seconds=time.perf_counter() - start), None
    for line in reversed(done.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), done
            except json.JSONDecodeError:
                break
    return Outcome(check, FAIL, f"{shown} exited {done.returncode} without a result",
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
    found += problems(dataclasses.replace(verdict, undelivered=[]), declared)
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
