"""Causality modules: one module per protocol, each its manager (the protocol's state
and rules) and the flags it declares; the filters and factories come from the base
classes of :mod:`groupcomm.module_kit`, which the modules use as a third-party module
does. Nothing here does I/O (no zmq, threads, clocks, random or sockets), so the same
code runs over ZeroMQ, in the simulator and in the model checker.
"""
