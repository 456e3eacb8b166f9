"""Bounded explicit-state model checking of the real causality filters.

Why a model checker and not only random testing: the bugs of causal-delivery protocols
(004 §2.3's secret-mode sends, FIFO across three processes, broadcast-only modules fed
unicasts) hide in rare arrival orders. This package runs the *real* filters and managers
of N :class:`~groupcomm.core.node.ProtocolNode` s, passes every frame through the real codec,
and explores every interleaving of application sends and arrivals up to a bound,
judging causal delivery, FIFO, liveness and "no filter raised" on every path.

Entry points: :func:`check` with a :class:`CheckConfig`, and ``groupcomm check``
(:mod:`groupcomm.cli.check`). Reductions: hash compaction (``reduce``) and symmetry
(:mod:`groupcomm.check.symmetry`). Joins and departures interleaved with the traffic:
:mod:`groupcomm.check.churn`. Whole clients (``ClientProtocol``, with state transfer)
and the session registry under crashes, restarts and false suspicions: the session
model, :mod:`groupcomm.check.session_rules` (``groupcomm check --session``).
"""

from __future__ import annotations

from groupcomm.check.churn import ChurnModel, build_model
from groupcomm.check.config import CheckConfig, ConfigError, load_workload
from groupcomm.check.model import Model
from groupcomm.check.report import CheckResult, replay, write_counterexample
from groupcomm.check.search import check

__all__ = [
    "ChurnModel",
    "CheckConfig",
    "CheckResult",
    "ConfigError",
    "Model",
    "build_model",
    "check",
    "load_workload",
    "replay",
    "write_counterexample",
]
