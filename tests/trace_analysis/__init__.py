"""Tests of the PySpark trace analysis (trace_analysis/)."""
