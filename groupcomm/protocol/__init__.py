"""Protocol logic with no I/O: typed inputs in, actions out.

:mod:`groupcomm.protocol.registry` holds the session server's rules. Nothing here
imports sockets, threads, clocks or randomness, so the ZeroMQ server and the model
checker run the same objects (checked by tests/test_architecture.py).
"""
