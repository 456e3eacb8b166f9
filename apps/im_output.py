"""The chat's lines on its terminal (or pipe): one at a time from any thread, and the
opening line first (:class:`ChatOutput`)."""

from __future__ import annotations

import threading
from typing import TextIO

__all__ = ["ChatOutput"]


class ChatOutput:
    """Writes whole lines to ``out`` under a lock of its own. Between
    :meth:`hold_until_opening` and :meth:`opening` it keeps the lines (the conversation
    handed over as the communicator joins comes on its I/O thread, before the
    constructor returns) and shows them after the opening line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._print_lock = threading.Lock()
        #: lines shown before the opening line; None when not waited for or once shown
        self._before_opening: list[str] | None = None

    def line(self, text: str, *, at_once: bool = False) -> None:
        """Show ``text``; ``at_once`` also before the opening line (a warning while the
        join goes on)."""
        with self._print_lock:
            if self._before_opening is not None and not at_once:
                self._before_opening.append(text)
                return
            self.out.write(text + "\n")
            self.out.flush()

    def hold_until_opening(self) -> None:
        """Keep the lines shown from now until :meth:`opening`, shown after it."""
        with self._print_lock:
            self._before_opening = []

    def opening(self, text: str | None) -> None:
        """Show ``text`` (the line saying who joined what), then the lines that came
        before it: a newcomer reads that it joined before what it was handed. ``None``
        (the join failed) shows those lines alone."""
        with self._print_lock:
            earlier, self._before_opening = self._before_opening or [], None
            for line in ([text] if text is not None else []) + earlier:
                self.out.write(line + "\n")
            self.out.flush()
