"""Tests of the tools (groupcomm.tools)."""
