"""How far a running Spark job has got (tasks done of tasks), every few seconds, from the
status tracker (Spark's console progress bar is off: it would interleave with our output).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)


@contextlib.contextmanager
def task_progress(spark: Any, say: Callable[[str], None], label: str,
                  interval: float = 3.0) -> Iterator[None]:
    """``with task_progress(spark, say, "parsing"):`` says ``parsing: 12/108 tasks`` every
    ``interval`` seconds while the block runs."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            try:
                stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:  # the JVM may be shutting down; progress is best effort
                log.debug("progress poll failed", exc_info=True)
                return
            stages = [info for info in stages if info is not None]
            total = sum(info.numTasks for info in stages)
            if total:
                say(f"{label}: {sum(info.numCompletedTasks for info in stages)}/{total} tasks")

    thread = threading.Thread(target=run, name="spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
