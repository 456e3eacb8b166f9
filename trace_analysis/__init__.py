"""Spark analysis of groupcomm traces (docs/analysis.md): ``analyze(trace_dir)`` returns
one JSON-ready dict; ``get_spark()`` gives the process's single SparkSession."""

from trace_analysis.analysis import DEFAULT_VIOLATIONS_LIMIT, analyze
from trace_analysis.loaded import TraceDirError
from trace_analysis.session import SparkUnavailableError, get_spark

__all__ = ["DEFAULT_VIOLATIONS_LIMIT", "SparkUnavailableError", "TraceDirError", "analyze",
           "get_spark"]
