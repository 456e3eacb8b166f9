"""The PNG of ``groupcomm overhead --plot``: metadata bytes per application message of
each causality module, against the session's length (messages per process) or, when only
one length was measured, against the group size; and each module's bytes relative to
``matrix``'s in the same configuration, with a line at a quarter of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the share of matrix's metadata the relative panel marks
QUARTER = 0.25

_STYLES = {"matrix": ("tab:red", "-"), "matrix-delta": ("tab:purple", "--"),
           "ks": ("tab:green", "-"), "vector": ("tab:blue", ":"), "fifo": ("tab:grey", ":")}


def plot_metadata(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Draw the rows of :func:`groupcomm.tools.overhead.measure_overhead` to ``path``.

    Modules that carry no stamp (``none``, ``mfss``; ``cykas`` nearly none) cannot sit on
    a logarithmic axis and are named in the title instead. Raises ``ValueError`` when no
    measured module carries metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stamped = [m for m in dict.fromkeys(r["module"] for r in rows)
               if any(r["meta_bytes_per_message"] > 0 for r in rows if r["module"] == m)]
    if not stamped:
        raise ValueError("nothing to plot: none of the measured modules carries metadata")
    unstamped = [m for m in dict.fromkeys(r["module"] for r in rows) if m not in stamped]
    lengths = sorted({r["messages_per_process"] for r in rows})
    sizes = sorted({r["processes"] for r in rows})
    by_length = len(lengths) > 1
    panels = sizes if by_length else [None]
    relative = "matrix" in stamped and len(stamped) > 1
    figure, axes = plt.subplots(2 if relative else 1, len(panels), squeeze=False,
                                figsize=(5.2 * len(panels), 7.5 if relative else 4.2))
    matrix = {(r["processes"], r["messages_per_process"]): r["meta_bytes_per_message"]
              for r in rows if r["module"] == "matrix"}
    for column, size in enumerate(panels):
        top = axes[0][column]
        for module in stamped:
            part = sorted((r for r in rows if r["module"] == module
                           and (size is None or r["processes"] == size)),
                          key=lambda r: (r["messages_per_process"], r["processes"]))
            part = [r for r in part if r["meta_bytes_per_message"] > 0]
            if not part:
                continue
            xs = [r["messages_per_process" if by_length else "processes"] for r in part]
            colour, line = _STYLES.get(module, (None, "-"))
            top.plot(xs, [r["meta_bytes_per_message"] for r in part], marker="o",
                     markersize=4, color=colour, linestyle=line, label=module)
            if relative and module != "matrix":
                ratios = [(x, r["meta_bytes_per_message"]
                           / matrix[(r["processes"], r["messages_per_process"])])
                          for x, r in zip(xs, part, strict=True)
                          if matrix.get((r["processes"], r["messages_per_process"]))]
                if ratios:
                    axes[1][column].plot(*zip(*ratios, strict=True), marker="o", markersize=4,
                                         color=colour, linestyle=line, label=module)
        top.set_yscale("log")
        top.set_ylabel("metadata bytes per application message")
        top.set_title(f"{size} processes" if by_length
                      else f"{lengths[0]} messages per process")
        top.grid(True, which="both", alpha=0.3)
        top.legend(fontsize="small")
        bottom = axes[-1][column]
        if relative:
            bottom.axhline(QUARTER, color="grey", linewidth=0.8, linestyle=":",
                           label="a quarter of matrix's")
            bottom.set_ylim(0, 1.05)
            bottom.set_ylabel("relative to matrix's")
            bottom.grid(True, alpha=0.3)
            bottom.legend(fontsize="small")
        for ax in axes[:, column]:
            if by_length:  # the measured lengths as plain ticks on a log axis
                ax.set_xscale("log")
                ax.set_xticks(lengths, [str(n) for n in lengths])
                ax.minorticks_off()
        bottom.set_xlabel("messages per process (session length)" if by_length
                          else "processes")
    title = "Causal metadata per message, uniform random traffic"
    if unstamped:
        title += f" (no stamp: {', '.join(unstamped)})"
    figure.suptitle(title)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
