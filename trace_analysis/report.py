"""``--report DIR``: the files of docs/analysis.md, "What it reports"."""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trace_analysis.spacetime import AppEvent, Execution, draw_spacetime

log = logging.getLogger(__name__)

SHIVIZ_MAX_EVENTS = 20_000


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(f"{prefix}.{key}" if prefix else str(key), inner))
        return out
    return {prefix: value}


def write_tables(result: Mapping[str, Any], directory: Path) -> list[Path]:
    paths = []
    per_protocol = {name: _flat("", values) for name, values in result["per_protocol"].items()}
    for key, table, absent in (("protocol", per_protocol, None),
                               ("process", result["per_process"], 0)):
        columns = sorted({column for values in table.values() for column in values})
        paths.append(_write_csv(directory / f"per_{key}.csv", [key, *columns],
                                [[name, *(values.get(c, absent) for c in columns)]
                                 for name, values in sorted(table.items())]))
    paths.append(_write_csv(directory / "malformed_samples.csv",
                            ["file", "line", "reason", "text"],
                            [[s["file"], s["line"], s["reason"], s["text"]]
                             for s in result["malformed_samples"]]))
    return paths


def _save(fig: Any, path: Path) -> Path:
    from matplotlib import pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_latency(samples: Mapping[str, Sequence[float]], path: Path) -> Path:
    """Empirical CDF of the latency per protocol (log scale when it spans decades)."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    drawn = {name: np.sort(np.asarray(values, dtype=float))
             for name, values in sorted(samples.items()) if len(values)}
    for name, data in drawn.items():
        ax.step(data, np.arange(1, len(data) + 1) / len(data), where="post",
                label=f"{name} (n={len(data):,})")
    if drawn and all(data[0] > 0 for data in drawn.values()):
        ax.set_xscale("log")
    ax.set_xlabel("send → deliver latency (ms)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_title("latency distribution per protocol")
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no deliveries", ha="center", transform=ax.transAxes)
    return _save(fig, path)


def plot_meta_bytes(per_protocol: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Bars: metadata bytes and control bytes per application message, per protocol."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    names = sorted(per_protocol)
    meta = [per_protocol[n].get("meta_bytes_per_message") or 0 for n in names]
    control = [per_protocol[n].get("control_bytes_per_message") or 0 for n in names]
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(names) + 2), 4.5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], meta, width=0.4, label="metadata on messages")
    ax.bar([x + 0.2 for x in xs], control, width=0.4, label="control messages")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("bytes per application message")
    ax.set_title("protocol overhead per application message")
    ax.legend(fontsize=8)
    return _save(fig, path)


def write_report(result: dict[str, Any], directory: str | Path,
                 latency_samples: Mapping[str, Sequence[float]], execution: Execution | None,
                 undelivered: Sequence[tuple[str, str]],
                 triples: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Write every report file but ``summary.json`` (:func:`write_summary`, once the result
    is complete); returns {what: path}, also stored in ``result["report"]``.
    ``execution`` is None for a run over :data:`SHIVIZ_MAX_EVENTS`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = {path.stem: str(path) for path in write_tables(result, out)}
    files["violations"] = str(_write_csv(
        out / "violations.csv", ["process", "delivered_first", "delivered_second", "fifo"],
        [[t["process"], t["delivered_first"], t["delivered_second"], t["fifo"]]
         for t in triples]))
    files["latency_plot"] = str(plot_latency(latency_samples, out / "latency.png"))
    notes = []
    per_protocol = result["per_protocol"]
    if any(per_protocol[n].get("meta_bytes_per_message") or
           per_protocol[n].get("control_bytes_per_message") for n in per_protocol):
        files["meta_bytes_plot"] = str(plot_meta_bytes(per_protocol, out / "meta_bytes.png"))
    else:  # an empty chart says nothing: name the reason instead
        notes.append("no meta_bytes plot: no protocol metadata or control traffic "
                     f"({', '.join(sorted(per_protocol)) or 'no protocol'})")
    messages = result["messages"]
    if execution is not None:
        files["spacetime"] = str(draw_spacetime(
            execution, out / "spacetime.png", triples, undelivered,
            title=f"{_count(messages, 'message')}, {_violations_title(result)}"))
        for what, name, text in (("shiviz_log", "shiviz.log", "\n".join(shiviz_lines(execution))),
                                 ("shiviz_regex", "shiviz_regex.txt", REGEX)):
            (out / name).write_text(text + "\n", encoding="utf-8")
            files[what] = str(out / name)
    else:
        notes.append(f"no ShiViz log and no space-time diagram: more than "
                     f"{SHIVIZ_MAX_EVENTS:,} sends and deliveries")
    result["report"] = files
    result["report_notes"] = notes
    files["summary"] = str(out / "summary.json")
    return files


def written_files(result: Mapping[str, Any]) -> list[str]:
    """The report files of ``result`` that exist, by name (``latency.png``, ...)."""
    return sorted(Path(path).name for path in (result.get("report") or {}).values()
                  if Path(path).is_file())


def write_summary(result: Mapping[str, Any], directory: str | Path) -> Path:
    path = Path(directory) / "summary.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _violations_title(result: Mapping[str, Any]) -> str:
    """What the red arrows of the diagram are: ``3 deliveries out of causal order (12
    violating triples)``."""
    late, triples = result["violating_deliveries"], result["causal_violations"]
    if not late:
        return "no delivery out of causal order"
    return (f"{_count(late, 'delivery')} out of causal order "
            f"({_count(triples, 'violating triple')})")


def _count(n: int, noun: str) -> str:
    """``1 causal violation``, ``3 causal violations``."""
    if n == 1:
        return f"{n:,} {noun}"
    return f"{n:,} {noun[:-1]}ies" if noun.endswith("y") else f"{n:,} {noun}s"


REGEX = r"(?<host>\S+) (?<clock>\{[^}]*\}) (?<event>.*)"
_SPACE = re.compile(r"\s+")


def shiviz_lines(execution: Execution) -> list[str]:
    """The ShiViz log lines (https://bestchai.bitbucket.io/shiviz/), one per event
    (``alice {"alice":2,"bob":1} deliver bob#1 from bob``, parsed with :data:`REGEX`), in
    an order where every send comes before its deliveries. ShiViz rejects a log unless
    each host's own clock entry is 1 on its first event and rises by exactly 1 on each
    later one; a trace may be partial (malformed lines dropped, a process without a
    file), so the clocks are rebuilt from the logged events alone."""
    queues = {p: list(events) for p, events in execution.events.items()}
    logged_sends = set(execution.sends())
    clocks: dict[str, dict[str, int]] = {p: {} for p in queues}
    send_clock: dict[str, dict[str, int]] = {}
    heads = dict.fromkeys(queues, 0)
    lines: list[str] = []
    remaining = sum(len(q) for q in queues.values())
    while remaining:
        done = remaining
        for process, queue in queues.items():
            while heads[process] < len(queue):
                event = queue[heads[process]]
                if (event.event == "deliver" and event.msg in logged_sends
                        and event.msg not in send_clock):
                    break
                _log_event(event, clocks[process], send_clock, lines)
                heads[process] += 1
                remaining -= 1
        if remaining == done:
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
    host = _SPACE.sub("_", event.process) or "_"  # ShiViz splits the host field on spaces
    if event.event == "deliver":
        for other, count in send_clock.get(event.msg, {}).items():
            if clock.get(other, 0) < count:
                clock[other] = count
    clock[host] = clock.get(host, 0) + 1
    if event.event == "send":
        send_clock.setdefault(event.msg, dict(clock))
        what = f"send {event.msg} to {','.join(event.dests) or '(nobody)'}"
    else:
        what = f"deliver {event.msg} from {event.sender}"
    lines.append(f"{host} {json.dumps(clock, separators=(',', ':'))} {what}")
