"""Counting and logging rejected input (the session server and the client protocol)."""

from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger(__name__)


class RejectLog:
    """Counts rejected input by reason and logs it clearly without flooding the log."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.counts: Counter[str] = Counter()

    def reject(self, reason: str, detail: str, peer: str = "?") -> None:
        """Count one rejection; log the first few of each reason, then every 1000th."""
        self.counts[reason] += 1
        count = self.counts[reason]
        if count <= 5 or count % 1000 == 0:
            log.warning("%s rejected a frame from %s (%s, %d so far): %s", self.who, peer,
                        reason, count, detail)
