"""Tests of the causality modules (filters/) over the deterministic in-process network."""
