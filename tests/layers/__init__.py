"""Tests of the extra filter layers (groupcomm.layers)."""
