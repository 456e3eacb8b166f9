"""CPU time and resident memory of a process, from ``/proc`` (Linux): what a benchmark
reports for the processes it started."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


def _waited(pid: int) -> float:
    """The run-queue waits of the process's threads, in seconds (0 without schedstats)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


@dataclass(frozen=True)
class ProcessSample:
    """A process's CPU seconds (user + system) and resident memory at one moment."""

    pid: int
    at: float  # time.perf_counter()
    cpu_seconds: float
    rss_mb: float
    #: seconds its threads were ready to run and waited for a core (``schedstat``): on a
    #: shared machine, how much the others held it back
    waited_seconds: float = 0.0

    @classmethod
    def take(cls, pid: int) -> ProcessSample:
        """Read ``/proc/PID``; OSError if the process is gone."""
        with open(f"/proc/{pid}/stat") as f:
            # the command name, in parentheses, may hold spaces: fields count after it
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        rss_kb = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
                    break
        return cls(pid, time.perf_counter(), cpu, rss_kb / 1024, _waited(pid))

    def since(self, start: ProcessSample, base: ProcessSample | None = None) -> dict[str, float]:
        """CPU use between ``start`` and this sample (percent of one core), the memory
        now, and how much it grew since ``base`` (``start`` if None)."""
        wall = max(self.at - start.at, 1e-9)
        return {"cpu_percent": 100 * (self.cpu_seconds - start.cpu_seconds) / wall,
                "cpu_seconds": self.cpu_seconds - start.cpu_seconds,
                "waited_percent": 100 * (self.waited_seconds - start.waited_seconds) / wall,
                "rss_mb": self.rss_mb,
                "rss_grown_mb": self.rss_mb - (base or start).rss_mb}
