"""Report how far a running Spark job has got (tasks done of tasks), every few seconds.

Spark's console progress bar is off (it would interleave with our output); this reads
the same numbers from the status tracker on a background thread while the driver
waits for an action.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)


class TaskProgress:
    """``with TaskProgress(spark, say, "parsing"):`` reports ``parsing: 12/108 tasks``
    every ``interval`` seconds while the block runs (nothing for short jobs)."""

    def __init__(self, spark: Any, say: Callable[[str], None], label: str,
                 interval: float = 3.0) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._say = say
        self._label = label
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def __enter__(self) -> TaskProgress:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def tasks(self) -> tuple[int, int]:
        """(completed, total) tasks of the active stages."""
        done = total = 0
        for stage_id in self._tracker.getActiveStageIds():
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                done, total = self.tasks()
            except Exception:  # the JVM may be shutting down; progress is best effort
                log.debug("progress poll failed", exc_info=True)
                return
            if total:
                self._say(f"{self._label}: {done}/{total} tasks")
