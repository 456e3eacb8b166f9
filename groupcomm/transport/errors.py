"""What the communicator raises to the application."""

from __future__ import annotations


class CommunicatorError(RuntimeError):
    """The communicator cannot do what was asked (not joined, closed, ...)."""


class SendQueueFull(CommunicatorError):
    """The bounded send queue stayed full for ``send_timeout`` seconds."""


class JoinError(CommunicatorError):
    """Joining the session failed (duplicate name, no server, wrong key, ...)."""


class MessageTooLarge(CommunicatorError, ValueError):
    """A payload larger than a frame may carry (``max_frame``), refused at the call."""
