"""Export an execution as a ShiViz log (https://bestchai.bitbucket.io/shiviz/), one line
per event (``alice {"alice":2,"bob":1} deliver bob#1 from bob``, parsed with :data:`REGEX`).

ShiViz rejects a log unless each host's own clock entry is 1 on its first event and rises
by exactly 1 on each later one. A trace may be partial (malformed lines dropped, a
process without a file), so the clocks are rebuilt from the logged events alone.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from trace_analysis.execution import AppEvent, Execution

log = logging.getLogger(__name__)

REGEX = r"(?<host>\S+) (?<clock>\{[^}]*\}) (?<event>.*)"
_SPACE = re.compile(r"\s+")


def host_name(process: str) -> str:
    """``process`` without whitespace (ShiViz splits the host field on it)."""
    return _SPACE.sub("_", process) or "_"


def _describe(event: AppEvent) -> str:
    if event.event == "send":
        return f"send {event.msg} to {','.join(event.dests) or '(nobody)'}"
    return f"deliver {event.msg} from {event.sender}"


def shiviz_lines(execution: Execution) -> list[str]:
    """The log lines, in an order where every send comes before its deliveries."""
    queues = {p: list(events) for p, events in execution.events.items()}
    logged_sends = set(execution.sends())
    clocks: dict[str, dict[str, int]] = {p: {} for p in queues}
    send_clock: dict[str, dict[str, int]] = {}
    heads = dict.fromkeys(queues, 0)
    lines: list[str] = []
    remaining = sum(len(q) for q in queues.values())
    while remaining:
        progressed = False
        for process, queue in queues.items():
            while heads[process] < len(queue):
                event = queue[heads[process]]
                waiting = (event.event == "deliver" and event.msg in logged_sends
                           and event.msg not in send_clock)
                if waiting:
                    break
                _log_event(event, clocks[process], send_clock, lines)
                heads[process] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            # a delivery recorded before its send (clock skew in a broken trace): log the
            # earliest blocked delivery without the merge rather than give up
            process = min((p for p in queues if heads[p] < len(queues[p])),
                          key=lambda p: queues[p][heads[p]].ts)
            event = queues[process][heads[process]]
            log.warning("ShiViz export: %s delivered %s before its send was logged",
                        process, event.msg)
            _log_event(event, clocks[process], {}, lines)
            heads[process] += 1
            remaining -= 1
    return lines


def _log_event(event: AppEvent, clock: dict[str, int], send_clock: dict[str, dict[str, int]],
               lines: list[str]) -> None:
    host = host_name(event.process)
    if event.event == "deliver":
        for other, count in send_clock.get(event.msg, {}).items():
            if clock.get(other, 0) < count:
                clock[other] = count
    clock[host] = clock.get(host, 0) + 1
    if event.event == "send":
        send_clock.setdefault(event.msg, dict(clock))
    lines.append(f"{host} {json.dumps(clock, separators=(',', ':'))} {_describe(event)}")


def write_shiviz(execution: Execution, directory: Path) -> tuple[Path, Path]:
    """Write ``shiviz.log`` and ``shiviz_regex.txt`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "shiviz.log"
    regex_path = directory / "shiviz_regex.txt"
    log_path.write_text("\n".join(shiviz_lines(execution)) + "\n", encoding="utf-8")
    regex_path.write_text(REGEX + "\n", encoding="utf-8")
    return log_path, regex_path
