"""Protocol logic with no I/O: inputs in, actions out.

:mod:`groupcomm.protocol.registry` holds the session server's rules;
:mod:`groupcomm.protocol.client` one member's (:class:`ClientProtocol`, its actions in
:mod:`~groupcomm.protocol.actions`, its application's side in
:mod:`~groupcomm.protocol.port`). Nothing here imports sockets, threads, clocks or
randomness, so the ZeroMQ server and clients, the simulator and the model checker run the
same objects (checked by tests/test_architecture.py).
"""
