"""Causality modules: one module per protocol, each with its manager, send filter,
receive filter and factory. Nothing here does I/O (no zmq, threads, clocks, random or
sockets), so the same code runs over ZeroMQ, in the simulator and in the model checker.
"""
