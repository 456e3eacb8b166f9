"""The reject log, for the session server: it lives with the protocol code
(:mod:`groupcomm.protocol.rejects`), which the client's protocol object uses too."""

from groupcomm.protocol.rejects import RejectLog

__all__ = ["RejectLog"]
