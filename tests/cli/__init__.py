"""Tests of the command line (groupcomm.cli)."""
