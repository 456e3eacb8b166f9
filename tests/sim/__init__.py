"""Tests of the discrete-event simulator (groupcomm.sim)."""
