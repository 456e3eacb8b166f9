"""The Cykas paper's Figures 4-6 (004 §5): parameter grids, runs, CSV files and plots.
The grids, and the choices the paper leaves open, are in docs/sim_results.md.

A grid is a list of *run dicts*: :class:`SimConfig`'s keyword arguments plus labels
(``figure``, ``scenario``); :func:`run_one` turns one into a flat result dict, plain data
a Spark task or a worker process can take. :func:`run_grid` runs a grid (here, in worker
processes, or as Spark tasks) and stops cleanly on Ctrl-C with what finished.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import fields
from pathlib import Path
from typing import Any

from groupcomm.sim.engine import SimConfig, simulate

FIGURES = (4, 5, 6)
SCALES = ("full", "quick", "tiny")

FIG4_PROCESSES = (25, 50, 100, 200, 500)
FIG4_BANDWIDTHS = (20.0, 100.0, 1000.0, 10000.0)
FIG4_PROTOCOLS = ("matrix", "mfss", "cykas", "matrix-delta")
FIG4_INTERVAL_MS = 10.0
#: largest system matrix-delta runs at in Figure 4 (the real module; see the module doc)
DELTA_MAX_PROCESSES = 200

FIG5_JOBS_MS = (0.5, 5.0, 12.5, 25.0, 50.0)
FIG5_INTERVALS_MS = (1.0, 10.0, 100.0, 1000.0)
FIG6_HOTSPOTS = (0.0, 0.05, 0.10, 0.20)
FIG6_JOB_MS = 25.0
FIG6_JOB_SD_MS = 5.0

_CONFIG_FIELDS = {f.name for f in fields(SimConfig)}

#: columns written first in the CSV (the others follow in sorted order)
_LEAD = ("figure", "scenario", "protocol", "engine", "processes", "bandwidth_kbps",
         "delay_ms", "interval_ms", "messages_per_process", "job_fraction", "job_ms",
         "job_sd_ms", "hotspot_share", "seed", "ratio", "execution_time_ms",
         "avg_job_start_ms", "jobs", "app_messages", "control_messages", "meta_bytes_total",
         "wire_bytes_total", "deliveries", "eager_messages", "stuck", "wall_s",
         "messages_per_s")


class FigureError(ValueError):
    """A figure number or scale that does not exist."""


# -- grids ------------------------------------------------------------------------------------
def _grid4(scale: str) -> list[dict[str, Any]]:
    processes: Sequence[int] = FIG4_PROCESSES
    bandwidths: Sequence[float] = FIG4_BANDWIDTHS
    messages, delta_max = 100, DELTA_MAX_PROCESSES
    if scale == "quick":
        processes, delta_max = (25, 50, 100), 50
    elif scale == "tiny":
        processes, bandwidths, messages, delta_max = (4, 8), (20.0, 10000.0), 5, 8
    return [dict(figure=4, scenario="uniform", protocol=protocol, processes=n,
                 bandwidth_kbps=bw, delay_ms=5.0, messages_per_process=messages,
                 interval_ms=FIG4_INTERVAL_MS, seed=1)
            for n in processes for bw in bandwidths for protocol in FIG4_PROTOCOLS
            if protocol != "matrix-delta" or n <= delta_max]


def _mfss_and_cykas(points: list[dict[str, Any]], scale: str) -> list[dict[str, Any]]:
    """Each point of Figure 5 or 6 run with every seed of ``scale``, by MFSS and Cykas
    (the same workloads for both)."""
    seeds = (1, 2, 3) if scale == "full" else (1,)
    return [dict(point, seed=seed, protocol=protocol, bandwidth_kbps=50.0, delay_ms=5.0)
            for point in points for seed in seeds for protocol in ("mfss", "cykas")]


def _grid5(scale: str) -> list[dict[str, Any]]:
    jobs: Sequence[float] = FIG5_JOBS_MS
    intervals: Sequence[float] = FIG5_INTERVALS_MS
    n, messages = 100, 100
    if scale == "quick":
        jobs, messages = (0.5, 12.5, 50.0), 50
    elif scale == "tiny":
        jobs, intervals, n, messages = (5.0, 25.0), (1.0, 100.0), 6, 5
    return _mfss_and_cykas([dict(
        figure=5, scenario=f"interval {interval:g} ms", processes=n,
        messages_per_process=messages, interval_ms=interval, job_fraction=0.1, job_ms=job)
        for interval in intervals for job in jobs], scale)


def _grid6(scale: str) -> list[dict[str, Any]]:
    hotspots: Sequence[float] = FIG6_HOTSPOTS
    n, messages = 100, 100
    if scale == "quick":
        messages = 50
    elif scale == "tiny":
        hotspots, n, messages = (0.0, 0.2), 10, 5
    return _mfss_and_cykas([dict(
        figure=6, scenario="with jobs" if jobs else "without jobs", processes=n,
        messages_per_process=messages, interval_ms=10.0, job_fraction=0.1 if jobs else 0.0,
        job_ms=FIG6_JOB_MS if jobs else 0.0, job_sd_ms=FIG6_JOB_SD_MS if jobs else 0.0,
        hotspot_share=share, hotspot_weight=0.8)
        for jobs in (False, True) for share in hotspots], scale)


def grid(figure: int, scale: str = "full") -> list[dict[str, Any]]:
    """The run dicts of ``figure`` at ``scale`` (full, quick, or tiny for tests)."""
    if scale not in SCALES:
        raise FigureError(f"scale must be one of {', '.join(SCALES)}")
    if figure not in FIGURES:
        raise FigureError(f"no figure {figure}; figures: {', '.join(map(str, FIGURES))}")
    return {4: _grid4, 5: _grid5, 6: _grid6}[figure](scale)


# -- running ----------------------------------------------------------------------------------
def run_one(run: dict[str, Any]) -> dict[str, Any]:
    """Simulate one run dict; returns it merged with the result (plain data only)."""
    result, _ = simulate(SimConfig(**{k: v for k, v in run.items() if k in _CONFIG_FIELDS}))
    row = dict(run)
    row.update(result.as_dict())
    row["ratio"] = round(row["processes"] / row["bandwidth_kbps"], 6)
    return row


Progress = Callable[[int, int, dict[str, Any]], None]


def stderr_progress(label: str) -> Progress:
    """A progress callback printing ``label: done/total runs, elapsed`` on stderr."""
    started = time.monotonic()

    def report(done: int, total: int, row: dict[str, Any]) -> None:
        elapsed = time.monotonic() - started
        what = (f"{row.get('protocol')} n={row.get('processes')} "
                f"bw={row.get('bandwidth_kbps'):g} {row.get('scenario', '')}".rstrip())
        print(f"{label}: {done}/{total} runs done, {elapsed:.1f} s elapsed "
              f"(last: {what}, {row.get('wall_s', 0):.2f} s)", file=sys.stderr, flush=True)

    return report


def _cost(run: dict[str, Any]) -> float:
    """A rough relative cost, to start the longest runs first."""
    n = run.get("processes", 10)
    work = n * run.get("messages_per_process", 100)
    if run.get("protocol") == "matrix-delta" or (run.get("protocol") == "matrix" and n <= 50):
        work *= n
    return float(work)


def run_grid(runs: Sequence[dict[str, Any]], *, jobs: int = 1, spark: bool = False,
             master: str | None = None,
             progress: Progress | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Run every run dict; returns (rows in grid order, completed).

    ``completed`` is False when Ctrl-C stopped the grid: the rows are then those that
    finished. ``jobs > 1`` uses that many worker processes; ``spark`` runs each run as a
    Spark task instead (``master`` default ``local[2]``).
    """
    order = sorted(range(len(runs)), key=lambda i: -_cost(runs[i]))
    results: dict[int, dict[str, Any]] = {}
    total = len(runs)

    def done(index: int, row: dict[str, Any]) -> None:
        results[index] = row
        if progress is not None:
            progress(len(results), total, row)

    completed = True
    try:
        if spark:
            _run_spark(runs, order, master, done)
        elif jobs > 1:
            _run_pool(runs, order, jobs, done)
        else:
            for index in order:
                done(index, run_one(runs[index]))
    except KeyboardInterrupt:
        completed = False
        print(f"interrupted: keeping the {len(results)} of {total} runs that finished",
              file=sys.stderr, flush=True)
    return [results[i] for i in sorted(results)], completed


def _run_pool(runs: Sequence[dict[str, Any]], order: list[int], jobs: int,
              done: Callable[[int, dict[str, Any]], None]) -> None:
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(run_one, runs[i]): i for i in order}
        for future in as_completed(futures):
            done(futures[future], future.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


#: what a run imports on a Spark worker (shipped to workers whose Python lacks them)
SIM_WORKER_PACKAGES = ("msgpack", "numpy", "pluggy", "dill")


def _ship_packages(spark: Any) -> None:
    """Make groupcomm, filters and plugins importable on remote executors."""
    import tempfile
    import zipfile
    from importlib.util import find_spec

    def directory(package: str) -> Path:  # where it is, without importing it here
        spec = find_spec(package)
        assert spec is not None and spec.submodule_search_locations is not None
        return Path(next(iter(spec.submodule_search_locations))).resolve()

    archive = Path(tempfile.mkdtemp(prefix="groupcomm-sim-")) / "groupcomm_sim.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        # filters and plugins live outside the package's directory in a source checkout
        # (setup.cfg maps them): each goes in under the name it is imported by
        for package in ("groupcomm", "groupcomm.filters", "groupcomm.plugins"):
            root = directory(package)
            for path in root.rglob("*.py"):
                inside = path.relative_to(root)
                if package == "groupcomm" and inside.parts[0] in ("filters", "plugins",
                                                                  "apps"):
                    continue
                bundle.write(path, Path(package.replace(".", "/")) / inside)
        # the causality modules are registered through entry points: the workers find
        # them in this metadata (importlib.metadata reads distributions inside zips)
        from importlib import metadata

        distribution = metadata.distribution("groupcomm")
        info = f"groupcomm-{distribution.version}.dist-info"
        bundle.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: groupcomm\n"
                        f"Version: {distribution.version}\n")
        bundle.writestr(f"{info}/entry_points.txt",
                        distribution.read_text("entry_points.txt") or "")
    spark.sparkContext.addPyFile(str(archive))


def _run_spark(runs: Sequence[dict[str, Any]], order: list[int], master: str | None,
               done: Callable[[int, dict[str, Any]], None]) -> None:
    """Each run a Spark task calling :func:`run_one`; collected in batches (progress)."""
    import os

    from trace_analysis.session import get_spark

    # PySpark starts local Python workers with $PYSPARK_PYTHON (default: python3 on the
    # PATH), which may lack this project's dependencies; use this interpreter instead.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = get_spark(master, packages=SIM_WORKER_PACKAGES)
    context = spark.sparkContext
    if not context.master.startswith("local"):
        _ship_packages(spark)
    batch = max(2 * context.defaultParallelism, 2)
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        rdd = context.parallelize([(i, runs[i]) for i in chunk], len(chunk))
        for index, row in rdd.map(lambda item: (item[0], run_one(item[1]))).collect():
            done(index, row)


# -- summaries ---------------------------------------------------------------------------------
def write_csv(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write result rows as CSV (the lead columns first)."""
    rows = list(rows)
    keys = {k for row in rows for k in row}
    columns = [c for c in _LEAD if c in keys] + sorted(keys - set(_LEAD))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in columns})
    return path


def fig4_table(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (processes, bandwidth): each protocol's execution time (ms)."""
    table: dict[tuple[int, float], dict[str, Any]] = {}
    for row in rows:
        key = (int(row["processes"]), float(row["bandwidth_kbps"]))
        entry = table.setdefault(key, {"processes": key[0], "bandwidth_kbps": key[1],
                                       "ratio": key[0] / key[1]})
        entry[row["protocol"]] = float(row["execution_time_ms"])
        entry[f"{row['protocol']}_meta_bytes"] = int(row["meta_bytes_total"])
    return [table[k] for k in sorted(table, key=lambda k: (table[k]["ratio"], k))]


def crossover(rows: Iterable[dict[str, Any]], protocol: str = "matrix",
              rivals: Sequence[str] = ("mfss", "cykas")) -> dict[str, Any]:
    """Where ``protocol`` stops beating the best of ``rivals`` (processes/kBps).

    ``last_win``: the largest ratio at which it is faster than every rival; ``first_loss``:
    the smallest ratio at which it is slower than the best rival; ``estimate``: their
    geometric mean when ``first_loss >= last_win`` (a clean crossover; equal when two
    systems of the same ratio fall on either side), else None (the sides interleave).
    """
    wins, losses = [], []
    for entry in fig4_table(rows):
        if protocol not in entry or not all(r in entry for r in rivals):
            continue
        best = min(entry[r] for r in rivals)
        (wins if entry[protocol] < best else losses).append(entry["ratio"])
    last_win = max(wins) if wins else None
    first_loss = min(losses) if losses else None
    estimate = None
    if last_win is not None and first_loss is not None and first_loss >= last_win:
        estimate = math.sqrt(last_win * first_loss)
    return {"protocol": protocol, "last_win": last_win, "first_loss": first_loss,
            "estimate": estimate, "points": len(wins) + len(losses)}


def speedups(rows: Iterable[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Cykas speedup over MFSS per point (``key``: the grid's x variable), over seeds.

    ``exec_speedup`` = mean MFSS execution time / mean Cykas execution time; likewise
    ``job_start_speedup`` for the average job start time (None without jobs).
    """
    groups: dict[tuple[str, float], dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for row in rows:
        groups[(row["scenario"], float(row[key]))][row["protocol"]].append(row)
    out = []
    for (scenario, x), by in groups.items():
        mfss, cykas = by.get("mfss", []), by.get("cykas", [])
        if not mfss or not cykas:
            continue

        def mean(items: list[dict[str, Any]], field: str) -> float:
            return statistics.fmean(float(r[field]) for r in items)

        exec_m, exec_c = mean(mfss, "execution_time_ms"), mean(cykas, "execution_time_ms")
        start_m, start_c = mean(mfss, "avg_job_start_ms"), mean(cykas, "avg_job_start_ms")
        out.append({
            "scenario": scenario, key: x, "seeds": min(len(mfss), len(cykas)),
            "mfss_exec_ms": round(exec_m, 3), "cykas_exec_ms": round(exec_c, 3),
            "exec_speedup": round(exec_m / exec_c, 4) if exec_c else None,
            "mfss_job_start_ms": round(start_m, 3), "cykas_job_start_ms": round(start_c, 3),
            "job_start_speedup": round(start_m / start_c, 4) if start_c and start_m else None,
            "cykas_eager": round(mean(cykas, "eager_messages"), 1),
        })
    return sorted(out, key=lambda r: (_scenario_key(r["scenario"]), r[key]))


def _scenario_key(scenario: str) -> tuple[float, str]:
    digits = "".join(ch for ch in scenario if ch.isdigit() or ch == ".")
    try:
        return (float(digits), scenario)
    except ValueError:
        return (math.inf, scenario)


def summary(figure: int, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figure's plotted numbers as table rows."""
    if figure == 4:
        return fig4_table(rows)
    return speedups(rows, "job_ms" if figure == 5 else "hotspot_share")


# -- plots -------------------------------------------------------------------------------------
_COLOURS = {"matrix": "tab:red", "mfss": "tab:blue", "cykas": "tab:green",
            "matrix-delta": "tab:purple"}


def plot(figure: int, rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Draw ``figure`` from result rows as a PNG laid out like the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if figure == 4:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        table = fig4_table(rows)
        for protocol in FIG4_PROTOCOLS:
            points = [(e["ratio"], e[protocol]) for e in table if protocol in e]
            if not points:
                continue
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", markersize=4, label=protocol,
                    color=_COLOURS[protocol], linestyle="--" if protocol == "matrix-delta"
                    else "-")
        ax.axvline(0.02, color="grey", linewidth=0.8, linestyle=":",
                   label="paper's crossover (0.02)")
        ax.set(xscale="log", yscale="log", xlabel="processes / kBps",
               ylabel="execution time (ms)",
               title="Figure 4: scalability (5 ms propagation, 100 messages/process)")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    elif figure == 5:
        table = speedups(rows, "job_ms")
        scenarios = sorted({r["scenario"] for r in table}, key=_scenario_key)
        fig, axes = plt.subplots(1, max(len(scenarios), 1), figsize=(3.2 * max(len(scenarios), 1),
                                 3.6), sharey=True, squeeze=False)
        for ax, scenario in zip(axes[0], scenarios, strict=False):
            part = [r for r in table if r["scenario"] == scenario]
            xs = [r["job_ms"] for r in part]
            ax.plot(xs, [r["exec_speedup"] for r in part], marker="o", color="tab:blue",
                    label="execution time")
            ax.plot(xs, [r["job_start_speedup"] or math.nan for r in part], marker="s",
                    color="tab:orange", label="avg job start time")
            ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
            ax.set(title=scenario, xlabel="job length (ms)")
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylabel("Cykas speedup over MFSS")
        axes[0][0].legend(fontsize="small")
        fig.suptitle("Figure 5: 100 processes, 50 kBps, 5 ms, 10 % of messages start jobs")
    elif figure == 6:
        table = speedups(rows, "hotspot_share")
        scenarios = ["without jobs", "with jobs"]
        shares = sorted({r["hotspot_share"] for r in table})
        fig, ax = plt.subplots(figsize=(6.5, 4))
        width = 0.8 / len(scenarios)
        for k, scenario in enumerate(scenarios):
            values = {r["hotspot_share"]: r["exec_speedup"] for r in table
                      if r["scenario"] == scenario}
            xs = [i + (k - (len(scenarios) - 1) / 2) * width for i in range(len(shares))]
            ax.bar(xs, [values.get(s, math.nan) for s in shares], width=width,
                   label=scenario, color=("tab:blue", "tab:orange")[k])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xticks=range(len(shares)), xticklabels=[f"{s * 100:g}%" for s in shares],
               xlabel="hotspot processes (80 % of messages go to them)",
               ylabel="Cykas speedup over MFSS (execution time)",
               title="Figure 6: hotspots (100 processes, 50 kBps, 10 ms interval)")
        ax.legend()
        ax.grid(True, axis="y", alpha=0.3)
    else:
        raise FigureError(f"no figure {figure}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_figure(figure: int, out_dir: str | Path, *, scale: str = "full", jobs: int = 1,
               spark: bool = False, master: str | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Run a figure's grid and write ``figureN.csv``, ``figureN_summary.csv`` and
    ``figureN.png`` under ``out_dir``; returns paths, counts and timings."""
    runs = grid(figure, scale)
    started = time.monotonic()
    rows, completed = run_grid(runs, jobs=jobs, spark=spark, master=master,
                               progress=progress)
    wall = time.monotonic() - started
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "figure": figure, "scale": scale, "runs": len(runs), "done": len(rows),
        "completed": completed, "wall_s": round(wall, 1),
    }
    if rows:
        info["csv"] = str(write_csv(rows, out / f"figure{figure}.csv"))
        info["summary_csv"] = str(write_csv(summary(figure, rows),
                                            out / f"figure{figure}_summary.csv"))
        info["png"] = str(plot(figure, rows, out / f"figure{figure}.png"))
        if figure == 4:
            info["crossover"] = {p: crossover(rows, p) for p in ("matrix", "matrix-delta")}
    return info
