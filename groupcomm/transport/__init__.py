"""Real processes over ZeroMQ: the communicator (the applications' API, a facade over
the I/O-free :class:`~groupcomm.protocol.client.ClientProtocol`), its sockets
(:mod:`~groupcomm.transport.link`), the poll thread that drives them
(:mod:`~groupcomm.transport.loop`; :mod:`~groupcomm.transport.host` runs several members
on one), the session
server (the wire format it speaks is :mod:`groupcomm.wire`), per-client keys (:mod:`~groupcomm.transport.keys`,
:mod:`~groupcomm.transport.curve`), rejected-input counting, injected delays and the I/O
thread's wake-up signal. Everything that touches a socket, a thread or a clock lives here.
"""
