"""The model-checker checks: every interleaving of a small configuration, with the
module's real filters (:mod:`groupcomm.check`), and the symmetry reduction's claim that
renaming the processes commutes with the module's steps (for modules that declare
their headers for it)."""

from __future__ import annotations

import time

from groupcomm.check import CheckConfig, CheckResult, check
from groupcomm.check.config import quiet_module_loggers
from groupcomm.conformance.outcome import FAIL, NOT_APPLICABLE, PASS, Declared, Outcome

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
