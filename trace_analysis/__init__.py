"""Spark analysis of groupcomm traces: causal and FIFO violations, liveness, metrics.

``analyze(trace_dir)`` checks a trace directory (docs/trace_schema.md) and returns
one JSON-ready dict; ``get_spark()`` gives the process's single SparkSession;
``main(argv)`` is ``groupcomm analyze``. See :mod:`trace_analysis.worker_load` for how
the lines are read (one pass, msgspec in Spark's Python workers) and
:mod:`trace_analysis.checks` for the method of the checks.
"""

from trace_analysis.analysis import DEFAULT_VIOLATIONS_LIMIT, analyze
from trace_analysis.loaded import TraceDirError
from trace_analysis.session import SparkUnavailableError, get_spark


def main(argv: list[str] | None = None) -> int:
    """``groupcomm analyze TRACE_DIR ...`` (see :mod:`trace_analysis.cli`)."""
    from trace_analysis.cli import main as cli_main

    return cli_main(argv)


__all__ = [
    "DEFAULT_VIOLATIONS_LIMIT",
    "SparkUnavailableError",
    "TraceDirError",
    "analyze",
    "get_spark",
    "main",
]
