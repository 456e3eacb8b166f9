"""The wire format: bytes in, bytes out, no sockets and no threads (frames, envelopes,
routed streams, payloads, session commands; see docs/security.md)."""
