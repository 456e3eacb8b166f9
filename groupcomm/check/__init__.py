"""Bounded explicit-state model checking of the real causality filters: every interleaving
of application sends and arrivals up to a bound, judged for causal delivery, FIFO,
liveness and "no filter raised" (docs/check_results.md). Entry points: :func:`check` with
a :class:`CheckConfig`, and ``groupcomm check`` (:mod:`groupcomm.cli.check`); whole
clients and the session registry: :mod:`groupcomm.check.session_rules`.
"""

from __future__ import annotations

from groupcomm.check.churn import ChurnModel, build_model
from groupcomm.check.config import CheckConfig, ConfigError, load_workload
from groupcomm.check.model import Model
from groupcomm.check.report import CheckResult, replay, write_counterexample
from groupcomm.check.search import check

__all__ = ["ChurnModel", "CheckConfig", "CheckResult", "ConfigError", "Model", "build_model",
           "check", "load_workload", "replay", "write_counterexample"]
