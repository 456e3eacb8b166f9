"""Space-time diagram of a small execution (matplotlib, Agg backend).

Processes are horizontal lines, time runs to the right; each message is an arrow from
its send to each of its deliveries. Deliveries that arrive after a message that depends
on them (the second message of a causal-violation triple) are red, duplicate deliveries
dotted, and a message that never reached a destination ends in a grey cross at the right
edge of that destination's line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from trace_analysis.execution import Execution

#: draw only executions with at most this many messages
MAX_MESSAGES = 300


#: the width of one character of a label at font size 7, as a share of the time axis
#: (an 11-inch figure)
CHAR_WIDTH = 0.0075


def label_lanes(points: list[tuple[float, str]], span: float) -> list[tuple[float, str, int]]:
    """Where the labels of one process's sends go: ``(x, text, lane)`` with lane 0 above
    the line and 1 below, each label starting after the previous one of its lane has
    ended; a label that fits in neither lane is left out (its dot stays)."""
    ends = [float("-inf"), float("-inf")]
    placed = []
    for x, text in sorted(points):
        for lane in (0, 1):
            if x >= ends[lane]:
                ends[lane] = x + (len(text) + 1) * CHAR_WIDTH * span
                placed.append((x, text, lane))
                break
    return placed


def draw_spacetime(
    execution: Execution,
    path: Path,
    violations: Iterable[dict],
    undelivered: Iterable[tuple[str, str]] = (),
    title: str = "",
) -> Path:
    """Write the diagram as a PNG at ``path``; ``violations`` are the listed triples."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.lines import Line2D

    processes = execution.processes
    sends = execution.sends()
    row = {p: i for i, p in enumerate(reversed(processes))}
    late = {(v["process"], v["delivered_second"]) for v in violations}
    early = {(v["process"], v["delivered_first"]) for v in violations}
    times = [e.ts for events in execution.events.values() for e in events] or [0.0]
    t0 = min(times)
    span = (max(times) - t0) or 1.0
    labels = len(sends) <= 40

    height = max(2.5, 0.6 * len(processes) + 1.5)
    fig, ax = plt.subplots(figsize=(11, height))
    for p in processes:
        ax.axhline(row[p], color="0.75", linewidth=1, zorder=0)
    for p, events in execution.events.items():
        seen: set[str] = set()
        for e in events:
            if e.event != "deliver":
                continue
            duplicate = e.msg in seen
            seen.add(e.msg)
            send = sends.get(e.msg)
            if send is None:
                ax.plot(e.ts - t0, row[p], marker="o", color="black", markersize=4)
                continue
            color = "tab:red" if (p, e.msg) in late and not duplicate else "tab:blue"
            if (p, e.msg) in early and color != "tab:red":
                color = "tab:orange"
            rad = 0.4 if send.process == p else 0.0
            ax.annotate(
                "", xy=(e.ts - t0, row[p]), xytext=(send.ts - t0, row[send.process]),
                arrowprops={"arrowstyle": "->", "color": color,
                            "linestyle": ":" if duplicate else "-",
                            "linewidth": 1.6 if color == "tab:red" else 1.0,
                            "connectionstyle": f"arc3,rad={rad}"},
            )
    for msg, dest in undelivered:
        send = sends.get(msg)
        if send is None or dest not in row:
            continue
        end = span * 1.04
        ax.plot([send.ts - t0, end], [row[send.process], row[dest]], color="0.55",
                linestyle="--", linewidth=0.9)
        ax.plot(end, row[dest], marker="x", color="0.35", markersize=8)
    for send in sends.values():
        ax.plot(send.ts - t0, row[send.process], marker="o", color="black", markersize=3)
    if labels:
        for process in processes:
            placed = label_lanes([(send.ts - t0, send.msg) for send in sends.values()
                                  if send.process == process], span)
            for x, text, lane in placed:
                ax.annotate(text, (x, row[process]), fontsize=7,
                            xytext=(2, 5 if lane == 0 else -11), textcoords="offset points")
    ax.set_yticks(list(row.values()), list(row.keys()))
    ax.set_xlim(-0.03 * span, span * 1.08)
    ax.set_ylim(-0.7, len(processes) - 0.3)
    ax.set_xlabel("time since the first event (trace ts units: s)")
    ax.set_title(title or "space-time diagram")
    legend = [
        Line2D([0], [0], color="tab:blue", label="message (send → deliver)"),
        Line2D([0], [0], color="tab:red", linewidth=1.6,
               label="causal violation: delivered after a message that depends on it"),
        Line2D([0], [0], color="tab:orange", label="delivered too early (overtook)"),
        Line2D([0], [0], color="tab:blue", linestyle=":", label="duplicate delivery"),
        Line2D([0], [0], color="0.55", linestyle="--", marker="x", label="never delivered"),
        Line2D([0], [0], color="black", marker="o", linestyle="", markersize=3, label="send"),
    ]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.16 - 0.8 / height),
              ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
