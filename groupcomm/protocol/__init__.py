"""Protocol logic with no I/O: typed inputs in, actions out.

:mod:`groupcomm.protocol.registry` holds the session server's rules;
:mod:`groupcomm.protocol.client` one member's (:class:`ClientProtocol`, with its
actions in :mod:`~groupcomm.protocol.actions` and its inputs as data in
:mod:`~groupcomm.protocol.events`). Nothing here imports sockets, threads, clocks or
randomness, so the ZeroMQ server and clients and the model checker run the same objects
(checked by tests/test_architecture.py).
"""
