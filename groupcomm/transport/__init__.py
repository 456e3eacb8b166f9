"""Real processes over ZeroMQ: the communicator (the applications' API; its I/O thread's
parts in :mod:`~groupcomm.transport.io_loop`, :mod:`~groupcomm.transport.session_link`,
:mod:`~groupcomm.transport.inbound` and :mod:`~groupcomm.transport.outbox`), the session
server (the wire format it speaks is :mod:`groupcomm.wire`), per-client keys (:mod:`~groupcomm.transport.keys`,
:mod:`~groupcomm.transport.curve`), rejected-input counting, injected delays and the I/O
thread's wake-up signal. Everything that touches a socket, a thread or a clock lives here.
"""
