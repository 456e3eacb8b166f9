"""Where a gateway process's time goes during a capacity step: py-spy (an optional tool,
``pip install py-spy``, not a dependency) samples the process while the step types,
and the samples are summed by function (self time: the innermost frame)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: samples a second (py-spy's default is 100)
RATE = 100
#: functions a step's profile lists
TOP = 12


def py_spy() -> str | None:
    """The py-spy program: beside this Python's (a virtual environment's) or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


class StepProfile:
    """py-spy sampling one process for ``seconds``, its samples kept in ``raw``."""

    def __init__(self, pid: int, seconds: float, raw: Path) -> None:
        program = py_spy()
        if program is None:
            raise FileNotFoundError("py-spy is not installed (pip install py-spy)")
        self.raw = raw
        self._process = subprocess.Popen(
            [program, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
             "--rate", str(RATE), "--format", "raw", "--output", str(raw), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def finish(self, timeout: float = 30.0) -> dict[str, Any]:
        """The profile (``samples``, ``top``: share and function, self time) once py-spy
        is done; ``error`` instead when it could not sample (ptrace not allowed)."""
        try:
            _, errors = self._process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            return {"error": f"py-spy did not finish within {timeout:g} s"}
        if self._process.returncode != 0 or not self.raw.is_file():
            last = (errors or "").strip().splitlines()[-1:] or ["no output"]
            return {"error": f"py-spy failed: {last[0]}"}
        return {"file": str(self.raw), **top_functions(self.raw)}

    def stop(self) -> None:
        """End py-spy early (the step failed)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.communicate()


def top_functions(raw: Path, count: int = TOP) -> dict[str, Any]:
    """The functions the most samples of a py-spy raw file (``stack;frames count``
    lines) were in, by self time: ``function (file)`` and its percent of the samples."""
    own: Counter[str] = Counter()
    total = 0
    with open(raw, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            stack, _, number = line.rstrip("\n").rpartition(" ")
            if not stack or not number.isdigit():
                continue
            total += int(number)
            own[_function(stack.rsplit(";", 1)[-1])] += int(number)
    return {"samples": total,
            "top": [{"percent": round(100 * n / total, 1), "function": name}
                    for name, n in own.most_common(count)] if total else []}


def _function(frame: str) -> str:
    """``Socket.send (zmq/sugar/socket.py:713)`` as ``Socket.send (zmq/sugar/socket.py)``
    (py-spy shortens the paths): the lines of one function summed."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    return f"{name} ({path})" if path else name
