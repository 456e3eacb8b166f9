"""A small run's application events held in memory, and its space-time diagram: processes
are lines, each message an arrow from its send to each delivery. The time axis is the
order of the events, one column per distinct time stamp, so a burst within a millisecond
is legible and idle stretches take no room (:func:`idle_gaps` marks them)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class AppEvent:
    """A ``send`` or ``deliver`` recorded by ``process``."""

    process: str
    event: str
    msg: str
    sender: str
    ts: float
    dests: tuple[str, ...] = ()


@dataclass
class Execution:
    """Per process, its application events in line order."""

    events: dict[str, list[AppEvent]] = field(default_factory=dict)

    def sends(self) -> dict[str, AppEvent]:
        """The first send of each message."""
        found: dict[str, AppEvent] = {}
        for events in self.events.values():
            for e in events:
                if e.event == "send":
                    found.setdefault(e.msg, e)
        return found

    def add(self, event: AppEvent) -> None:
        self.events.setdefault(event.process, []).append(event)


def undelivered_pairs(execution: Execution) -> list[tuple[str, str]]:
    """Every (message, destination) with no delivery of the message there, sorted."""
    delivered = {(e.msg, p) for p, events in execution.events.items()
                 for e in events if e.event == "deliver"}
    return sorted((msg, dest) for msg, send in execution.sends().items()
                  for dest in set(send.dests) if (msg, dest) not in delivered)


def collect(events: DataFrame) -> Execution:
    """Collect the sends and deliveries of ``events`` (callers check the size first)."""
    from pyspark.sql import functions as F

    rows = (
        events.filter(F.col("event").isin("send", "deliver"))
        .select("process", "event", "msg", "sender", "ts", "dests", "file", "blk", "rid")
        .orderBy("file", "blk", "rid")
        .collect()
    )
    execution = Execution()
    for r in rows:
        execution.add(AppEvent(r["process"], r["event"], r["msg"], r["sender"],
                               float(r["ts"]), tuple(r["dests"] or ())))
    return execution


#: the most messages drawn; a larger execution is drawn as a window of this many
WINDOW_MESSAGES = 40
#: a character of a label at font size 7, as a share of the time axis of 11 inches
CHAR_WIDTH = 0.0075
#: inches of figure width per event column, and the bounds of the width
INCHES_PER_COLUMN = 0.07
MIN_WIDTH, MAX_WIDTH = 8.0, 24.0
#: a step between columns this many times the median one is marked as idle time
IDLE_FACTOR = 20.0


def label_lanes(points: list[tuple[float, str]], span: float,
                char_width: float = CHAR_WIDTH) -> list[tuple[float, str, int]]:
    """Where the labels of one process's sends go: ``(x, text, lane)``, lane 0 above the
    line and 1 below, each label after the end of the previous one in its lane
    (``char_width`` of ``span`` per character); one that fits in neither is left out."""
    ends = [float("-inf"), float("-inf")]
    placed = []
    for x, text in sorted(points):
        for lane in (0, 1):
            if x >= ends[lane]:
                ends[lane] = x + (len(text) + 1) * char_width * span
                placed.append((x, text, lane))
                break
    return placed


@dataclass(frozen=True)
class Window:
    """The messages drawn: ``first``..``last`` (1-based, by send time) of ``total``."""

    messages: frozenset[str]
    first: int
    last: int
    total: int
    around: str

    @property
    def whole(self) -> bool:
        return self.first == 1 and self.last == self.total

    def describe(self) -> str:
        """``messages 21-60 of 300 by send time, around ...``; empty when whole."""
        if self.whole:
            return ""
        return (f"messages {self.first:,}-{self.last:,} of {self.total:,} by send time"
                f"{f', around {self.around}' if self.around else ''}")


def choose_window(execution: Execution, late: set[tuple[str, str]],
                  undelivered: Sequence[tuple[str, str]]) -> Window:
    """The messages to draw: all when at most :data:`WINDOW_MESSAGES`, else that many
    consecutive ones by send time, centred on the message of the first late delivery,
    else on the first undelivered message, else from the start."""
    size = WINDOW_MESSAGES
    sends = sorted(execution.sends().values(), key=lambda e: (e.ts, e.msg))
    order = [e.msg for e in sends]
    total = len(order)
    if total <= size:
        return Window(frozenset(order), 1, total, total, "")
    focus, around = None, ""
    late_deliveries = sorted((e.ts, e.msg) for p, events in execution.events.items()
                             for e in events if e.event == "deliver" and (p, e.msg) in late)
    if late_deliveries:
        focus, around = late_deliveries[0][1], "the first delivery out of causal order"
    else:
        missing = [msg for msg, _ in undelivered if msg in set(order)]
        if missing:
            focus = min(missing, key=order.index)
            around = "the first message never delivered"
    start = 0
    if focus is not None:
        start = min(max(0, order.index(focus) - size // 2), total - size)
    chosen = order[start:start + size]
    return Window(frozenset(chosen), start + 1, start + len(chosen), total, around)


def idle_gaps(columns: Sequence[float]) -> list[int]:
    """The columns after which the time stands still more than :data:`IDLE_FACTOR`
    times the median step between columns."""
    steps = [b - a for a, b in zip(columns, columns[1:], strict=False)]
    if len(steps) < 2:
        return []
    median = sorted(steps)[len(steps) // 2]
    return [i for i, step in enumerate(steps) if step > IDLE_FACTOR * median > 0]


def draw_spacetime(execution: Execution, path: Path, violations: Iterable[dict],
                   undelivered: Iterable[tuple[str, str]] = (), title: str = "") -> Path:
    """Write the diagram as a PNG at ``path``; ``violations`` are the listed triples."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.lines import Line2D

    processes = sorted(execution.events)
    sends = execution.sends()
    row = {p: i for i, p in enumerate(reversed(processes))}
    triples = list(violations)
    late = {(v["process"], v["delivered_second"]) for v in triples}
    early = {(v["process"], v["delivered_first"]) for v in triples}
    missing = list(undelivered)
    window = choose_window(execution, late, missing)
    drawn = window.messages

    deliveries: list[tuple[str, AppEvent, bool]] = []  # (process, event, duplicate)
    for p, events in execution.events.items():
        seen: set[str] = set()
        for e in events:
            if e.event != "deliver":
                continue
            duplicate = e.msg in seen
            seen.add(e.msg)
            if e.msg in drawn or (e.msg not in sends and window.whole):
                deliveries.append((p, e, duplicate))
    shown_sends = [s for m, s in sends.items() if m in drawn]
    # the distinct times, sorted: column i of the diagram is the i-th
    columns = sorted({s.ts for s in shown_sends} | {e.ts for _, e, _ in deliveries}) or [0.0]

    def x_of(ts: float) -> float:
        return float(bisect.bisect_left(columns, ts))

    span = float(max(1, len(columns) - 1))
    width = min(MAX_WIDTH, max(MIN_WIDTH, 2.0 + INCHES_PER_COLUMN * len(columns)))
    height = max(2.5, 0.6 * len(processes) + 1.5)
    arrows = len(deliveries)
    thin = 1.0 if arrows <= 60 else 0.7 if arrows <= 200 else 0.5
    head = 8 if arrows <= 200 else 6

    fig, ax = plt.subplots(figsize=(width, height))
    for p in processes:
        ax.axhline(row[p], color="0.75", linewidth=1, zorder=0)
    for i in idle_gaps(columns):  # where a stretch of idle time takes no room
        ax.axvline(i + 0.5, color="0.6", linestyle=(0, (2, 3)), linewidth=0.8, zorder=0)
    for p, e, duplicate in deliveries:
        send = sends.get(e.msg)
        if send is None:
            ax.plot(x_of(e.ts), row[p], marker="o", color="black", markersize=4)
            continue
        color = "tab:red" if (p, e.msg) in late and not duplicate else "tab:blue"
        if (p, e.msg) in early and color != "tab:red":
            color = "tab:orange"
        rad = 0.4 if send.process == p else 0.0
        ax.annotate(
            "", xy=(x_of(e.ts), row[p]), xytext=(x_of(send.ts), row[send.process]),
            arrowprops={"arrowstyle": "->", "color": color, "mutation_scale": head,
                        "linestyle": ":" if duplicate else "-",
                        "linewidth": {"tab:red": 1.6, "tab:orange": 1.2}.get(color, thin),
                        "connectionstyle": f"arc3,rad={rad}"},
            zorder=3 if color == "tab:red" else 2,
        )
    end = span * 1.04 + 1
    for msg, dest in missing:
        send = sends.get(msg)
        if send is None or dest not in row or msg not in drawn:
            continue
        ax.plot([x_of(send.ts), end], [row[send.process], row[dest]], color="0.55",
                linestyle="--", linewidth=0.9)
        ax.plot(end, row[dest], marker="x", color="0.35", markersize=8)
    for send in shown_sends:
        ax.plot(x_of(send.ts), row[send.process], marker="o", color="black", markersize=3)
    char_width = CHAR_WIDTH * 11 / width
    for process in processes:
        placed = label_lanes([(x_of(s.ts), s.msg) for s in shown_sends
                              if s.process == process], span, char_width)
        for x, text, lane in placed:
            ax.annotate(text, (x, row[process]), fontsize=7,
                        xytext=(2, 5 if lane == 0 else -11), textcoords="offset points")
    ax.set_yticks(list(row.values()), list(row.keys()))
    ax.set_xlim(-0.03 * span - 0.5, end + 0.5 + 0.03 * span)
    ax.set_ylim(-0.7, len(processes) - 0.3)
    t0 = columns[0]
    ticks = sorted({round(i * (len(columns) - 1) / 6) for i in range(7)})
    ax.set_xticks([float(i) for i in ticks], [f"{columns[i] - t0:.4g}" for i in ticks])
    ax.set_xlabel("events in time order, one column per time stamp (labels: trace time "
                  "since the first drawn event, ts units: s; dotted: idle time left out)")
    heading = title or "space-time diagram"
    if window.describe():
        heading += f"\n{window.describe()}"
    ax.set_title(heading)
    legend = [
        Line2D([0], [0], color="tab:blue", label="message (send → deliver)"),
        Line2D([0], [0], color="tab:red", linewidth=1.6,
               label="causal violation: delivered after a message that depends on it"),
        Line2D([0], [0], color="tab:orange", label="delivered too early (overtook)"),
        Line2D([0], [0], color="tab:blue", linestyle=":", label="duplicate delivery"),
        Line2D([0], [0], color="0.55", linestyle="--", marker="x", label="never delivered"),
        Line2D([0], [0], color="black", marker="o", linestyle="", markersize=3, label="send"),
    ]
    fig.tight_layout()
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.1 - 0.35 / height),
              ncol=3, fontsize=8, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return path
