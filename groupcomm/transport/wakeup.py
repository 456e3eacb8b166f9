"""Wake-up signal from application threads to the I/O thread: a self-pipe the poller
watches, and a ``pending`` flag that spares the write while a wake-up is on its way (a
burst of sends writes the pipe once; the hot path reads the flag itself).

Lock-free. Invariant: *while ``pending`` is up, a byte is in the pipe or the I/O thread
has yet to take the queued work.* Callers queue their work, then read the flag; the I/O
thread empties the pipe, then lowers the flag, then takes the work (:meth:`WakeSignal.clear`).
Lowering the flag first would let a write be swallowed with the flag left up, and every
later wake-up skipped: sends stalled up to half a second in ``groupcomm bench``."""

from __future__ import annotations

import os


class WakeSignal:
    """A self-pipe with a pending flag; :meth:`wake` from any thread, :meth:`clear` from
    the thread that polls :attr:`fileno`."""

    __slots__ = ("pending", "_read", "_write")

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self.pending = False

    @property
    def fileno(self) -> int:
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
