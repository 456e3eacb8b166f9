"""Tests of the message and filter model (groupcomm.core) and of plugins."""
