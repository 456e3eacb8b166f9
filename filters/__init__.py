"""The built-in causality modules, one file per protocol (docs/protocols.md), written
against :mod:`groupcomm.module_kit` as a third-party module is; no I/O here, so the same
code runs over ZeroMQ, in the simulator and in the model checker."""
