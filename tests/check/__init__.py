"""Tests of the bounded model checker (groupcomm.check)."""
