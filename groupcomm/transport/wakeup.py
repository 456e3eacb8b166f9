"""Wake-up signal from application threads to a communicator's I/O thread.

The I/O thread sleeps in ``zmq.Poller.poll`` on the read end of a pipe (with its
sockets); a thread that hands it work appends the work to a queue and then calls
:meth:`WakeSignal.wake`. A flag (``pending``) spares the write while a wake-up is already
on its way, so a burst of ten thousand sends writes the pipe once, not ten thousand
times; the hot path reads the flag directly (``if not signal.pending: signal.wake()``).

Lock-free on purpose. The invariant that makes it safe: *whenever ``pending`` is up,
either a byte is in the pipe or the I/O thread has yet to take the queued work.*
Callers append their work before reading the flag; the I/O thread empties the pipe, then
lowers the flag, then takes the work (:meth:`clear` before draining its queues). So a
caller that reads a stale "pending" skips a write whose work the coming drain picks up
anyway, and a byte written after the flag went down stays in the pipe (at worst one
spurious wake-up). Lowering the flag before emptying the pipe breaks the invariant: a
caller that sees the flag down writes a byte, the read swallows it, the flag stays up
with the pipe empty, every later caller skips its write, and the I/O thread sleeps until
its next timer (``groupcomm bench`` found this: sends stalled up to half a second).
"""

from __future__ import annotations

import os


class WakeSignal:
    """A self-pipe with a pending flag; :meth:`wake` from any thread, :meth:`clear` from
    the thread that polls :attr:`fileno`."""

    __slots__ = ("pending", "_read", "_write")

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        #: a wake-up is on its way (read by the hot path to skip :meth:`wake`)
        self.pending = False

    @property
    def fileno(self) -> int:
        """The descriptor to poll for reading."""
        return self._read

    def wake(self) -> None:
        """Make the poller return (once per :meth:`clear`, however often called)."""
        if self.pending:
            return
        self.pending = True
        try:
            os.write(self._write, b"x")
        except OSError:  # closed during shutdown, or the pipe is full (a wake-up is in it)
            pass

    def clear(self) -> None:
        """Consume the wake-ups; call *before* taking the work they announced."""
        try:
            while os.read(self._read, 4096):
                pass
        except OSError:  # BlockingIOError: the pipe is empty
            pass
        self.pending = False  # after the pipe is empty: see the module docstring

    def close(self) -> None:
        """Close both ends (idempotent)."""
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
