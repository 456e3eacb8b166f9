"""The capacity part of ``groupcomm web bench``: sessions × tabs per session × typing rate,
scripted WebSocket tabs (the page's protocol, not browsers) against one or more gateway
processes, growing until a limit is crossed, with the reason it stopped (BENCHMARKS.md,
"Capacity of the gateway").

Each step starts a fresh server and gateways (each session on one of them, :func:`placement`),
opens every tab, has each type at the rate
(phases spread over a keystroke's interval), then waits for every keystroke to reach
every other tab of its session. A keystroke's latency runs from the moment its tab sent
it to the moment each other tab of the session has read it from its socket; the load
generator runs on the same machine, so its own work is part of the figure."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupcomm.tools.procstat import ProcessSample

#: seconds a step waits after typing stopped for the last keystrokes to arrive
DRAIN_TIMEOUT = 15.0
#: seconds a tab has to log in before the step is abandoned
JOIN_TIMEOUT = 120.0
#: the share of a step's typing time, at its start, whose keystrokes are not counted
#: (each tab's first edit warms the gateway's paths up; the figure is the steady state)
WARM_UP = 0.2

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Limits:
    """Where the run stops: a keystroke's p99 above ``p99_ms``, a tab's queue of events at
    the gateway longer than ``queue``, keystrokes that never arrived, a gateway over
    ``mb_per_tab`` of memory per tab (None: no memory limit)."""

    p99_ms: float = 50.0
    queue: int = 1000
    mb_per_tab: float | None = None


@dataclass
class Step:
    """One load's outcome."""

    sessions: int
    tabs_per_session: int
    rate: float
    #: keystroke-to-screen latencies, ms, one per (keystroke, receiving tab)
    samples: list[float] = field(default_factory=list)
    expected: int = 0  # (keystroke, receiving tab) pairs that should have arrived
    gateway: dict[str, float] = field(default_factory=dict)  # cpu_percent, rss_mb
    server: dict[str, float] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)  # the load generator's
    queued_max: int = 0
    #: deliveries (keystroke, receiving tab) of the keys typed while CPU was measured
    deliveries: int = 0
    error: str | None = None
    #: each gateway process's own figures (with several): tabs, cpu_percent, cpu_seconds,
    #: rss_mb, rss_grown_mb, deliveries
    per_gateway: list[dict[str, float]] = field(default_factory=list)
    #: where the first gateway process's time went while the step typed (py-spy)
    profile: dict[str, Any] | None = None
    #: the gateways' garbage collections while the step typed: full ones, the time
    #: they stopped the process, and every collection's time (:func:`collections`)
    collections: tuple[int, float, float] | None = None

    @property
    def tabs(self) -> int:
        return self.sessions * self.tabs_per_session

    @property
    def undelivered(self) -> int:
        return max(0, self.expected - len(self.samples))

    def row(self) -> dict[str, Any]:
        """The step as the JSON report and the table have it."""
        row: dict[str, Any] = {"sessions": self.sessions, "tabs_per_session":
                               self.tabs_per_session, "tabs": self.tabs, "rate": self.rate,
                               **percentiles(self.samples), "undelivered": self.undelivered,
                               "queued_max": self.queued_max}
        if self.load:  # the load generator's own CPU: on this machine too
            row["load_cpu_percent"] = round(self.load["cpu_percent"], 1)
        for who, sample in (("gateway", self.gateway), ("server", self.server)):
            if sample:
                row[f"{who}_cpu_percent"] = round(sample["cpu_percent"], 1)
                # percent of the time its threads waited for a core (others held it)
                row[f"{who}_waited_percent"] = round(sample.get("waited_percent", 0.0), 1)
                row[f"{who}_rss_mb"] = round(sample["rss_mb"], 1)
                if self.deliveries:  # what contention on a shared machine hardly changes
                    row[f"{who}_cpu_us_per_delivery"] = round(
                        1e6 * sample["cpu_seconds"] / self.deliveries, 1)
                # grown since each process's first tab logged in, over the other tabs
                row[f"{who}_mb_per_tab"] = round(sample["rss_grown_mb"] / max(
                    1, self.tabs - max(1, len(self.per_gateway))), 3)
        row["gateways"] = max(1, len(self.per_gateway))
        if len(self.per_gateway) > 1:
            row["per_gateway"] = [_own_row(g) for g in self.per_gateway]
        if self.collections is not None:
            full, full_ms, every_ms = self.collections
            row["gateway_full_collections"] = full
            row["gateway_full_collection_ms"] = round(full_ms, 1)
            row["gateway_collection_ms"] = round(every_ms, 1)
        if self.profile is not None:
            row["profile"] = self.profile
        if self.error:
            row["error"] = self.error
        return row


def _own_row(sample: dict[str, float]) -> dict[str, Any]:
    """One gateway process's figures in a row."""
    tabs = int(sample["tabs"])
    own: dict[str, Any] = {"tabs": tabs, "cpu_percent": round(sample["cpu_percent"], 1),
                           "rss_mb": round(sample["rss_mb"], 1),
                           "mb_per_tab": round(sample["rss_grown_mb"] / max(1, tabs - 1), 3)}
    if sample.get("deliveries"):
        own["cpu_us_per_delivery"] = round(1e6 * sample["cpu_seconds"]
                                           / sample["deliveries"], 1)
    return own


def combine(samples: list[dict[str, float]]) -> dict[str, float]:
    """Several processes' :meth:`ProcessSample.since` figures as one: CPU and memory
    summed (CPU percent of one core, so two busy processes can pass 100)."""
    keys = ("cpu_percent", "cpu_seconds", "waited_percent", "rss_mb", "rss_grown_mb")
    return {key: sum(s.get(key, 0.0) for s in samples) for key in keys}


def placement(sessions: list[str], gateways: int) -> dict[str, int]:
    """Which gateway process (0 .. ``gateways``-1) serves each session: round-robin in
    the sessions' order, as a static nginx map of sessions to gateways (docs/deploy.md)
    routes them, so that the processes hold sessions evenly (one more at most)."""
    if gateways < 1:
        raise ValueError("--gateways must be at least 1")
    return {session: k % gateways for k, session in enumerate(sessions)}


def percentiles(samples: list[float]) -> dict[str, float]:
    """n, p50 and p99 (nearest rank) of ``samples`` in ms."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(p99, 2)}


def plan(per_session: int, most_total: int, sessions: int | None = None,
         noun: str = "tabs") -> list[int]:
    """The numbers of sessions the steps run: ``sessions`` alone if given, else doubling
    from one while the ``noun`` (tabs, members) fit in ``most_total``, the last step at
    ``most_total``'s sessions."""
    if per_session < 2:
        raise ValueError(f"a session needs at least 2 {noun} (one types, the others read)")
    if sessions is not None:
        if sessions < 1:
            raise ValueError("--sessions must be at least 1")
        return [sessions]
    most = most_total // per_session
    if most < 1:
        raise ValueError(f"--max-{noun} {most_total} is fewer than one session of "
                         f"{per_session} {noun}")
    steps, count = [], 1
    while count < most:
        steps.append(count)
        count *= 2
    return [*steps, most]


def add_load_arguments(group: Any, noun: str, *, queue_help: str, queue_unit: str,
                       memory_of: str) -> None:
    """The load's options a capacity bench shares: ``--{noun}-per-session``, ``--rate``,
    ``--sessions``, ``--max-{noun}``, ``--seconds`` and the limits (``--p99-limit``,
    ``--queue-limit``, ``--mb-per-{one}``), named after ``noun`` (tabs, members);
    :func:`check_load` checks them."""
    one = noun[:-1]
    group.add_argument(f"--{noun}-per-session", type=int, default=10, metavar="N",
                       help=f"{noun} in each session (default 10)")
    group.add_argument("--rate", type=float, default=2.0, metavar="KEYS/S",
                       help=f"each {one}'s typing rate (default 2)")
    group.add_argument("--sessions", type=int, metavar="N",
                       help="run this many sessions only (default: 1, 2, 4, ... sessions "
                       f"up to --max-{noun}, stopping at the first step over a limit)")
    group.add_argument(f"--max-{noun}", type=int, default=200,
                       help=f"the most {noun} the run tries (default 200)")
    group.add_argument("--seconds", type=float, default=10.0,
                       help="how long each step types (default 10)")
    group.add_argument("--p99-limit", type=float, default=50.0, metavar="MS",
                       help="a step whose p99 is above this saturates (default 50 ms)")
    group.add_argument("--queue-limit", type=int, default=1000, metavar=queue_unit,
                       help=queue_help)
    group.add_argument(f"--mb-per-{one}", type=float, metavar="MB",
                       help=f"... or {memory_of}'s memory per {one} above this "
                       "(default none)")


def check_load(prog: str, *, rate: float, seconds: float, p99_limit: float,
               queue_limit: int, mb_limit: float | None, per_session: int, most_total: int,
               sessions: int | None, noun: str = "tabs") -> list[int]:
    """The load's numbers checked (one ``CliError`` line naming ``prog``'s options, whose
    names end in ``noun``: ``--max-tabs``, ``--mb-per-tab``); the plan's sessions."""
    from groupcomm.cli.args import CliError

    one = noun[:-1]
    if rate <= 0 or seconds <= 0:
        raise CliError(f"{prog}: --rate > 0, --seconds > 0")
    if p99_limit <= 0 or queue_limit < 1 or (mb_limit is not None and mb_limit <= 0):
        raise CliError(f"{prog}: --p99-limit > 0, --queue-limit >= 1, --mb-per-{one} > 0")
    try:
        return plan(per_session, most_total, sessions, noun)
    except ValueError as error:
        raise CliError(f"{prog}: {error}") from None


def verdict(row: dict[str, Any], limits: Limits) -> str | None:
    """Why this step saturated the gateway (None: it held)."""
    tabs = row["tabs"]
    if row.get("error"):
        return f"stopped at {tabs} tabs: {row['error']}"
    if row.get("undelivered"):
        return (f"stopped at {tabs} tabs: {row['undelivered']} keystroke deliveries had not "
                f"arrived {DRAIN_TIMEOUT:g} s after typing stopped")
    if row.get("queued_max", 0) > limits.queue:
        return (f"stopped at {tabs} tabs: a tab's queue at the gateway grew to "
                f"{row['queued_max']} events (limit {limits.queue})")
    if row.get("p99_ms", 0) > limits.p99_ms:
        return f"stopped at {tabs} tabs: p99 {row['p99_ms']:g} ms > {limits.p99_ms:g} ms limit"
    per_tab = row.get("gateway_mb_per_tab")
    if limits.mb_per_tab is not None and per_tab is not None and per_tab > limits.mb_per_tab:
        return (f"stopped at {tabs} tabs: gateway memory {per_tab:g} MB per tab > "
                f"{limits.mb_per_tab:g} MB limit")
    return None


def table(rows: list[dict[str, Any]], gateway: str = "gateway") -> list[str]:
    """The steps as a text table (``gateway``: what the tabs connect to)."""
    lines = [f"  sessions × tabs  tabs  keys/s   p50 ms   p99 ms  {gateway + ' CPU':>11}  RSS MB"
             "  MB/tab  server CPU  RSS MB  MB/member  CPU µs/delivery"]
    for row in rows:
        lines.append(
            f"  {row['sessions']:8} × {row['tabs_per_session']:<4} {row['tabs']:5}  "
            f"{row['rate']:6g} {_num(row.get('p50_ms')):>8} {_num(row.get('p99_ms')):>8}  "
            f"{_num(row.get('gateway_cpu_percent'), '%'):>11} "
            f"{_num(row.get('gateway_rss_mb')):>7} {_num(row.get('gateway_mb_per_tab')):>7}  "
            f"{_num(row.get('server_cpu_percent'), '%'):>10} {_num(row.get('server_rss_mb')):>7}"
            f"  {_num(row.get('server_mb_per_tab')):>9}"
            f"  {_num(row.get('gateway_cpu_us_per_delivery'))}"
            + (f" + {row['server_cpu_us_per_delivery']:g}"
               if "server_cpu_us_per_delivery" in row else ""))
        if row.get("per_gateway"):
            lines.append("      each process: " + "; ".join(
                f"{g['tabs']} tabs {_num(g['cpu_percent'], '%')} {_num(g['rss_mb'])} MB "
                f"{_num(g['mb_per_tab'])} MB/tab {_num(g.get('cpu_us_per_delivery'))} µs"
                for g in row["per_gateway"]))
        found = row.get("profile")
        if found and "error" in found:
            lines.append(f"      profile: {found['error']}")
        elif found:
            lines.append(f"      where the first gateway process's time went "
                         f"({found['samples']} samples, self time):")
            lines += [f"        {item['percent']:5.1f}%  {item['function']}"
                      for item in found["top"]]
    return lines


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def plot(series: dict[int, list[dict[str, Any]]], path: Path, title: str, limit_ms: float,
         peer: list[dict[str, Any]] = ()) -> None:
    """p99 against tabs for each number of gateway processes (``series``), and p50 for
    one alone, as a PNG; ``peer``: pycrdt-websocket's steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    every: list[float] = []
    for count, rows in sorted(series.items()):
        measured = [r for r in rows if "p99_ms" in r]
        every += [r["p99_ms"] for r in measured]
        label = f"p99, {count} gateway process{'es' if count > 1 else ''}"
        axes.plot([r["tabs"] for r in measured], [r["p99_ms"] for r in measured], "o-",
                  label=label)
        if len(series) == 1:
            axes.plot([r["tabs"] for r in measured], [r["p50_ms"] for r in measured], "s--",
                      label="p50")
    peer = [r for r in peer if "p99_ms" in r]
    if peer:
        every += [r["p99_ms"] for r in peer]
        axes.plot([r["tabs"] for r in peer], [r["p99_ms"] for r in peer], "^-",
                  label="p99, pycrdt-websocket (one process)")
    highest = max(every or [limit_ms])
    if limit_ms <= 10 * highest:  # a limit far above every step would flatten the curves
        axes.axhline(limit_ms, color="grey", linestyle=":", label=f"limit {limit_ms:g} ms")
    axes.set_yscale("log")  # from milliseconds to seconds
    axes.set_xlabel("typing tabs")
    axes.set_ylabel("keystroke to screen (ms)")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


class _Tab:
    """One scripted tab: logs in, types, reads, acknowledges what it applied."""

    def __init__(self, session: str, user: str, token: str) -> None:
        self.session = session
        self.user = user
        self.token = token
        self.ws: Any = None
        self.welcomed = asyncio.Event()
        self.applied = 0
        #: local id -> when it was sent (time.perf_counter)
        self.sent_at: dict[str, float] = {}
        #: message id -> when it was sent (learnt from the ``sent`` answer)
        self.sent_ids: dict[str, float] = {}
        #: (message id, when it was read) of each delivery
        self.arrivals: list[tuple[str, float]] = []
        self.typed = 0
        self.error: str | None = None

    async def open(self, http: Any, url: str) -> None:
        host = url.split("//", 1)[1]
        self.ws = await http.ws_connect(f"ws://{host}/ws/edit?session={self.session}",
                                        max_msg_size=0)
        await self.ws.send_str(json.dumps({"type": "hello", "user": self.user,
                                           "token": self.token}))

    async def read(self) -> None:
        async for message in self.ws:
            now = time.perf_counter()
            data = json.loads(message.data)
            delivered = False
            for event in data if isinstance(data, list) else [data]:
                kind = event.get("type")
                if kind == "deliver":
                    self.applied = event["n"]
                    self.arrivals.append((event["id"], now))
                    delivered = True
                elif kind == "sent":
                    sent = self.sent_at.pop(event["local"], None)
                    if sent is not None:
                        self.sent_ids[event["id"]] = sent
                elif kind == "welcome":
                    self.welcomed.set()
                elif kind in ("error", "fatal"):
                    self.error = self.error or event.get("error", kind)
                    self.welcomed.set()
            if delivered:  # as the page does: one acknowledgement per batch
                await self.ws.send_str(json.dumps({"type": "applied", "n": self.applied}))

    async def type(self, rate: float, until: float) -> None:
        await asyncio.sleep(random.random() / rate)  # spread the tabs' phases
        interval, start = 1 / rate, time.perf_counter()
        while time.perf_counter() < until:
            self.typed += 1
            local = f"~L{self.typed}"
            self.sent_at[local] = time.perf_counter()
            await self.ws.send_str(json.dumps({"type": "edit", "applied": self.applied,
                                               "local": local, "op": ["insert", None, "k"]}))
            # on a fixed schedule: a late loop types the missed keys at once, as people do
            delay = start + self.typed * interval - time.perf_counter()
            await asyncio.sleep(max(0.0, delay))



async def close_all(readers: list[Any], sockets: list[Any]) -> None:
    """Cancel the reading tasks and close the WebSockets of a step (those opened)."""
    for task in readers:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    await asyncio.gather(*(ws.close() for ws in sockets if ws is not None),
                         return_exceptions=True)

async def _join_each(join: Callable[[_Tab], Any], tabs: list[_Tab]) -> None:
    for tab in tabs:
        await join(tab)


async def run_step(url_of: dict[str, str], tokens: dict[str, str],
                   users_of: dict[str, list[str]], rate: float, seconds: float,
                   pids: dict[str, int], stats: Callable[[], dict[str, Any]],
                   progress: Progress, gateway_of: dict[str, int] | None = None,
                   profile_to: Path | None = None) -> Step:
    """One load: ``users_of`` maps each session to its tabs' users, ``url_of`` to the
    gateway its tabs connect to, ``gateway_of`` to that gateway's number (``gatewayK``
    in ``pids``, with ``server`` and ``load``; all on gateway 0 if None). With
    ``profile_to``, py-spy samples gateway 0 while the tabs type, into that file."""
    import aiohttp

    gateway_of = gateway_of or {session: 0 for session in users_of}
    tabs_per_session = len(next(iter(users_of.values())))
    step = Step(len(users_of), tabs_per_session, rate)
    tabs = [_Tab(session, user, tokens[user])
            for session, users in users_of.items() for user in users]
    # each gateway's first tab: its login's scrypt memory is the process's, not a tab's
    firsts = list({gateway_of[t.session]: t for t in reversed(tabs)}.values())
    loop = asyncio.get_running_loop()
    profiler = None
    # no limit on connections (aiohttp allows 100 by default): one a tab
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        readers: list[asyncio.Task] = []
        try:
            async def join(tab: _Tab) -> None:
                await tab.open(http, url_of[tab.session])
                readers.append(asyncio.create_task(tab.read()))
                await asyncio.wait_for(tab.welcomed.wait(), JOIN_TIMEOUT)

            await _join_each(join, firsts)
            before = {who: ProcessSample.take(pid) for who, pid in pids.items()}
            # the sessions' tabs join side by side, each session's one at a time (the
            # joins are not what is measured)
            await asyncio.gather(*(_join_each(join, [t for t in tabs if t.session == s
                                                     and t not in firsts])
                                   for s in users_of))
            failed = next((t for t in tabs if t.error), None)
            if failed is not None:
                step.error = f"{failed.user} could not log in: {failed.error}"
                return step
            progress(f"{step.tabs} tabs joined; typing {rate:g} keys/s each for {seconds:g} s")
            joined = {who: ProcessSample.take(pid) for who, pid in pids.items()}
            collected = collections(await loop.run_in_executor(None, stats))
            counted_from = time.perf_counter() + WARM_UP * seconds
            until = time.perf_counter() + seconds
            typers = [asyncio.create_task(tab.type(rate, until)) for tab in tabs]
            if profile_to is not None:
                profiler = _profile(pids["gateway0"], seconds, profile_to, step)
            while time.perf_counter() < until:
                await asyncio.sleep(min(1.0, max(0.0, until - time.perf_counter())))
                step.queued_max = max(step.queued_max,
                                      (await loop.run_in_executor(None, stats))["queued_max"])
            await asyncio.gather(*typers)
            step.expected = sum(t.typed for t in tabs) * (tabs_per_session - 1)
            step.deliveries = step.expected
            deadline = time.perf_counter() + DRAIN_TIMEOUT
            while (sum(len(t.arrivals) for t in tabs) < step.expected
                   and time.perf_counter() < deadline):
                await asyncio.sleep(0.05)
            # from the first key to the last delivery: the CPU all the typing cost
            typed = {who: ProcessSample.take(pid) for who, pid in pids.items()}
            after = collections(await loop.run_in_executor(None, stats))
            step.collections = (after[0] - collected[0], after[1] - collected[1],
                                after[2] - collected[2])
            _measured(step, {who: typed[who].since(joined[who], before[who]) for who in pids},
                      tabs, gateway_of)
            if profiler is not None:
                step.profile = await loop.run_in_executor(None, profiler.finish)
                profiler = None
            failed = next((t for t in tabs if t.error), None)
            if failed is not None:
                step.error = f"{failed.user} was refused: {failed.error}"
        except TimeoutError:
            step.error = f"a tab was not welcomed within {JOIN_TIMEOUT:g} s"
            return step
        finally:
            if profiler is not None:
                profiler.stop()
            await close_all(readers, [t.ws for t in tabs])
    sent = {mid: at for t in tabs for mid, at in t.sent_ids.items()}
    step.expected = sum(1 for at in sent.values() if at >= counted_from) * (tabs_per_session - 1)
    step.samples = [(at - sent[mid]) * 1000 for t in tabs for mid, at in t.arrivals
                    if sent.get(mid, 0) >= counted_from]
    return step


def collections(stats: dict[str, Any]) -> tuple[int, float, float]:
    """From the gateways' ``/stats`` (``gateways``: each one's): full collections so far,
    the milliseconds they stopped their process, and every collection's milliseconds,
    summed over the gateways."""
    full, full_ms, every_ms = 0, 0.0, 0.0
    for each in stats.get("gateways", [stats]):
        generations = each.get("collector", {}).get("generations") or []
        if generations:
            full += generations[-1]["collections"]
            full_ms += generations[-1]["paused_ms"]
            every_ms += sum(g["paused_ms"] for g in generations)
    return full, full_ms, every_ms


def _profile(pid: int, seconds: float, raw: Path, step: Step) -> Any:
    """py-spy on ``pid`` for the typing; None (and the step says why) without it."""
    from groupcomm.web.profile_step import StepProfile

    try:
        return StepProfile(pid, seconds, raw)
    except OSError as error:
        step.profile = {"error": str(error)}
        return None


def _measured(step: Step, samples: dict[str, dict[str, float]], tabs: list[_Tab],
              gateway_of: dict[str, int]) -> None:
    """The processes' figures into ``step``: the gateways' summed, and each one's with
    its tabs and deliveries."""
    step.server, step.load = samples["server"], samples["load"]
    others = step.tabs_per_session - 1
    for number in range(len([who for who in samples if who.startswith("gateway")])):
        mine = [t for t in tabs if gateway_of[t.session] == number]
        step.per_gateway.append({**samples[f"gateway{number}"], "tabs": len(mine),
                                 "deliveries": sum(t.typed for t in mine) * others})
    step.gateway = combine(step.per_gateway)
