"""The wire format: bytes in, bytes out, no sockets and no threads of its own.

:mod:`~groupcomm.wire.frames` signs and verifies frames (HMAC-SHA256 under the session
key, replay window, size limit) and names the two frame kinds; only verified bytes reach
the decoders. :mod:`~groupcomm.wire.envelopes` encodes messages (packed batches, and the
single-message envelopes the in-process hosts pass), :mod:`~groupcomm.wire.streams`
wraps a batch in the routed frame communicators send, the only message frame (its
destinations, then the batch, compressed in a stream per destination set as its
difference from the batch before, :mod:`~groupcomm.wire.deltas`),
:mod:`~groupcomm.wire.payload` encodes the user objects messages carry, and
:mod:`~groupcomm.wire.session` the session commands and notices between clients and the
server (the other frame kind). Protocol metadata (headers) is encoded by
:mod:`groupcomm.core.headers`.
"""
