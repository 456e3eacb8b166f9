"""Real processes over ZeroMQ: the communicator (the applications' API), the session
server, the wire format (:mod:`~groupcomm.transport.codec`, :mod:`~groupcomm.transport.wire`),
signing and per-client keys (:mod:`~groupcomm.transport.keys`,
:mod:`~groupcomm.transport.curve`), injected delays and the I/O thread's wake-up signal.
Everything that touches a socket, a thread or a clock lives here.
"""
