"""Tests of the applications and end-to-end runs (apps/)."""
