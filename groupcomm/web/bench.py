"""``groupcomm web bench``: how long a keystroke takes to reach another person's screen.

Browser to browser, terminal to terminal, and how many typing tabs one gateway process,
or several, hold (sessions × tabs per session × typing rate, until a limit is crossed:
capacity.py; BENCHMARKS.md, "Web gateway")."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from groupcomm.apps.batch_editors import EditorSession
from groupcomm.cli.args import ArgumentParser, CliError
from groupcomm.tools.procs import LineProcess
from groupcomm.web import capacity as capacity_run
from groupcomm.web.auth import Users, login_link
from groupcomm.web.capacity import percentiles


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="groupcomm web bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--causality", default="matrix", help="causality module (default matrix)")
    parser.add_argument("--keys", type=int, default=200, help="keystrokes measured per pair")
    parser.add_argument("--interval", type=float, default=20.0, metavar="MS",
                        help="time between keystrokes (default 20 ms)")
    capacity = parser.add_argument_group("capacity (scripted WebSocket tabs on gateways)")
    capacity.add_argument("--gateways", action="append", metavar="N[,N...]",
                          help="gateway processes the sessions are spread over, round-robin "
                          "as a static nginx map would route them (default 1; several, "
                          "as 1,2 or repeated: each step runs with each, alternating)")
    capacity_run.add_load_arguments(
        capacity, "tabs", queue_help="... or a tab's queue at the gateway longer than this",
        queue_unit="EVENTS", memory_of="the gateway")
    capacity.add_argument("--keep-going", action="store_true",
                          help="run every step, also past the first over a limit (the "
                          "ceiling and the reason are reported all the same)")
    capacity.add_argument("--profile", metavar="DIR",
                          help="sample the first gateway process with py-spy while each "
                          "step types (pip install py-spy); raw samples in DIR, the top "
                          "functions in the report")
    capacity.add_argument("--plot", metavar="PNG", help="write p99 against tabs here")
    parser.add_argument("--skip", action="append", default=[],
                        choices=["browser", "terminal", "capacity", "peer"],
                        help="leave a part out (peer: the capacity load against "
                        "pycrdt-websocket's server)")
    parser.add_argument("--no-reliable", action="store_true",
                        help="gateway and terminal editors without the reliable layer")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


class Setup(EditorSession):
    """A session server and ``gateways`` gateway processes with ``users`` (added to
    ``users_file``, a new one if None) serving ``sessions``, each session on one of them
    (:func:`capacity.placement`; fewer processes than asked when there are fewer
    sessions); a context manager."""

    def __init__(self, causality: str, users: list[str], *options: str,
                 sessions: list[str] | None = None, users_file: Path | None = None,
                 gateways: int = 1) -> None:
        super().__init__((), causality)
        #: the apps' options every member here runs with (``--no-reliable``)
        self.options = options
        sessions = sessions or ["bench"]
        #: session -> the number of the gateway process serving it
        self.gateway_of = capacity_run.placement(sessions, min(gateways, len(sessions)))
        self.gateways: list[LineProcess] = []
        self.urls: list[str] = []
        try:
            users_file = users_file or self.folder / "users.json"
            store = Users(users_file)
            self.tokens = {name: store.add(name) for name in users}
            for number in range(min(gateways, len(sessions))):
                names = [arg for name in sessions if self.gateway_of[name] == number
                         for arg in ("--session", name)]
                self.gateways.append(LineProcess(f"gateway{number}", [
                    sys.executable, "-m", "groupcomm.web.cli", *names,
                    "--server", self.server.address, "--key-file", str(self.key_file),
                    "--users", str(users_file), "--http", "127.0.0.1:0", "--causality",
                    causality, *options]))
            for gateway in self.gateways:  # they start side by side
                line = gateway.wait_line(lambda x: x.startswith("listening on "),
                                         what=f"the gateway {gateway.name}")
                self.urls.append(line.split()[2])
        except BaseException:
            self.close()
            raise
        #: the first gateway's address (the only one with one process)
        self.url = self.urls[0]

    @property
    def gateway(self) -> LineProcess:
        return self.gateways[0]

    def url_of(self) -> dict[str, str]:
        """Each session's gateway's address."""
        return {session: self.urls[n] for session, n in self.gateway_of.items()}

    def pids(self) -> dict[str, int]:
        """The processes a step measures: ``gateway0``, ``gateway1``, ..., the server."""
        return {**{f"gateway{n}": g.process.pid for n, g in enumerate(self.gateways)},
                "server": self.server.process.pid}

    def stats(self) -> dict[str, Any]:
        """The gateways' ``/stats``: each one's, and the longest queue of any tab."""
        each = []
        for url in self.urls:
            with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
                each.append(json.loads(answer.read()))
        return {"queued_max": max(s["queued_max"] for s in each), "gateways": each}

    def close(self) -> None:
        for gateway in self.gateways:
            gateway.terminate()
        super().close()


def terminal_latency(setup: Setup, keys: int, interval: float) -> list[float]:
    """``type`` at one terminal editor until the other says it applied it."""
    writer = setup.editor("tw", "bench-terminal", "--coalesce", "0", *setup.options)
    reader = setup.editor("tr", "bench-terminal", "--coalesce", "0", *setup.options)
    try:
        writer.wait_members(2)
        samples = []
        for k in range(1, keys + 1):
            sent = time.time()
            writer.type('type "x"')
            line = reader.ask(f"wait-applied {k} 20", (f"applied {k} at ",), 40, f"edit {k}")
            samples.append((float(line.rsplit(" ", 1)[1]) - sent) * 1000)
            time.sleep(interval / 1000)
        return samples
    finally:
        writer.quit("quit")
        reader.quit("quit")


#: in the receiving tab: the wall-clock time each applied edit was drawn
RECORD = """
window.drawnAt = [];
const render = editor.render.bind(editor);
editor.render = function () {
  const applied = this.replica.applied;
  render();
  if (applied !== (window.lastApplied || 0)) {
    window.lastApplied = applied;
    window.drawnAt.push([applied, performance.timeOrigin + performance.now()]);
  }
};
"""


def browser_latency(setup: Setup, keys: int, interval: float) -> list[float]:
    """A character typed in one Chromium tab until the other has drawn it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not browser or not driver_path:
        raise CliError("groupcomm web bench: no chromium and chromedriver (apt-get install "
                       "chromium chromium-driver, or --skip browser)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                 "--disable-backgrounding-occluded-windows"):
        options.add_argument(flag)
    drivers = []
    try:
        for name in ("bw", "br"):
            driver = webdriver.Chrome(service=Service(driver_path), options=options)
            drivers.append(driver)
            driver.get(login_link(setup.url, name, setup.tokens[name], "edit"))
            _wait(lambda d=driver: d.execute_script(
                "return document.getElementById('status').className === 'open'"), "tab")
        writer, reader = drivers
        _wait(lambda: reader.execute_script("return editor.replica.members.length") == 2, "members")
        reader.execute_script(RECORD)
        sent = []
        for _ in range(keys):
            sent.append(writer.execute_script(
                "const t = performance.timeOrigin + performance.now(); editor.insert('x'); "
                "return t;"))
            time.sleep(interval / 1000)
        _wait(lambda: reader.execute_script("return editor.replica.applied") >= keys, "all keys")
        drawn = dict(reader.execute_script("return window.drawnAt"))
        return [drawn[k + 1] - sent[k] for k in range(keys) if k + 1 in drawn]
    finally:
        for driver in drivers:
            driver.quit()


def _wait(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CliError(f"groupcomm web bench: timed out waiting for {what}")
        time.sleep(0.02)


def gateway_counts(args: argparse.Namespace) -> list[int]:
    """The numbers of gateway processes asked for (``--gateways 1,2`` or repeated), in
    the order given, each once; [1] by default."""
    counts: list[int] = []
    for spec in args.gateways or ["1"]:
        for part in spec.split(","):
            try:
                count = int(part)
            except ValueError:
                raise CliError(f"groupcomm web bench: --gateways takes numbers, not "
                               f"{part!r}") from None
            if count < 1:
                raise CliError("groupcomm web bench: --gateways must be at least 1")
            if count not in counts:
                counts.append(count)
    return counts


def capacity(args: argparse.Namespace, progress: capacity_run.Progress) -> dict[str, Any]:
    """The capacity steps, each with a fresh server and gateways, with each number of
    gateway processes in turn (alternating, so that their ratio is of one sitting),
    until a step crosses a limit for that number; the series, and the plot's path."""
    plan = capacity_run.plan(args.tabs_per_session, args.max_tabs, args.sessions)
    limits = capacity_run.Limits(args.p99_limit, args.queue_limit, args.mb_per_tab)
    counts = gateway_counts(args)
    most = plan[-1] * args.tabs_per_session
    progress(f"capacity: {len(plan)} step(s) up to {most} tabs on "
             f"{' and '.join(map(str, counts))} gateway process(es); making {most} users")
    users = [f"t{k}" for k in range(most)]
    series = {count: {"gateways": count, "steps": [], "stopped": None} for count in counts}
    with tempfile.TemporaryDirectory(prefix="groupcomm-capacity-") as folder:
        users_file = Path(folder) / "users.json"
        store = Users(users_file)
        tokens = {name: store.add(name) for name in users}
        for number, sessions in enumerate(plan, 1):
            users_of = {f"cap{s}": users[s * args.tabs_per_session:
                                         (s + 1) * args.tabs_per_session]
                        for s in range(sessions)}
            for count in counts:
                run = series[count]
                if run["stopped"] and not args.keep_going:
                    continue
                progress(f"step {number}/{len(plan)}: {sessions} session(s) × "
                         f"{args.tabs_per_session} tabs, {args.rate:g} keys/s each, "
                         f"{count} gateway process(es)")
                with Setup(args.causality, [], *_options(args), sessions=list(users_of),
                           users_file=users_file, gateways=count) as setup:
                    step = asyncio.run(capacity_run.run_step(
                        setup.url_of(), tokens, users_of, args.rate, args.seconds,
                        {**setup.pids(), "load": os.getpid()}, setup.stats, progress,
                        setup.gateway_of, _profile_file(args, count, sessions)))
                row = step.row()
                run["steps"].append(row)
                progress(f"  {row['tabs']} tabs on {row['gateways']} process(es): p50 "
                         f"{row.get('p50_ms')} ms, p99 {row.get('p99_ms')} ms, gateway CPU "
                         f"{row.get('gateway_cpu_percent')}%, "
                         f"{row.get('gateway_cpu_us_per_delivery')} µs per delivery, "
                         f"{row.get('gateway_mb_per_tab')} MB per tab, waiting for a core "
                         f"{row.get('gateway_waited_percent')}%, load generator CPU "
                         f"{row.get('load_cpu_percent')}%, "
                         f"{row.get('gateway_full_collections')} full garbage collection(s) "
                         f"stopping the gateway {row.get('gateway_full_collection_ms')} ms "
                         f"({row.get('gateway_collection_ms')} ms with the young ones)")
                run["stopped"] = run["stopped"] or capacity_run.verdict(row, limits)
    for run in series.values():
        run["stopped"] = run["stopped"] or _held(run["steps"], limits)
        run["ceiling"] = _ceiling(run["steps"], limits)
    first = series[counts[0]]
    result = {"rate_per_tab": args.rate, "tabs_per_session": args.tabs_per_session,
              "seconds": args.seconds, "p99_limit_ms": args.p99_limit,
              "series": list(series.values()),
              # the first number's, as with one gateway process
              "steps": first["steps"], "stopped": first["stopped"]}
    if "peer" not in args.skip:
        result["peer"] = _peer(args, plan, limits, progress)
    if args.plot:
        capacity_run.plot({count: run["steps"] for count, run in series.items()},
                          Path(args.plot), f"sessions of {args.tabs_per_session} tabs, "
                          f"{args.rate:g} keys/s each; {args.causality}", args.p99_limit,
                          result.get("peer", {}).get("steps", []))
        result["plot"] = args.plot
    return result


def _profile_file(args: argparse.Namespace, count: int, sessions: int) -> Path | None:
    if not args.profile:
        return None
    folder = Path(args.profile)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"gateways{count}-tabs{sessions * args.tabs_per_session}.raw"


def _ceiling(rows: list[dict[str, Any]], limits: capacity_run.Limits) -> int | None:
    """The most tabs of a step within every limit (None: no step was)."""
    held = [row["tabs"] for row in rows if capacity_run.verdict(row, limits) is None]
    return max(held, default=None)


def _held(rows: list[dict[str, Any]], limits: capacity_run.Limits) -> str:
    return (f"held at every step up to {rows[-1]['tabs']} tabs (p99 within "
            f"{limits.p99_ms:g} ms; raise --max-tabs to find the limit)")


def _peer(args: argparse.Namespace, plan: list[int], limits: capacity_run.Limits,
          progress: capacity_run.Progress) -> dict[str, Any]:
    """The same steps against pycrdt-websocket's server, if it is installed."""
    try:
        import pycrdt.websocket  # noqa: F401
    except ImportError:
        return {"stopped": "not run: pycrdt-websocket is not installed (pip install "
                "pycrdt-websocket, or --skip peer)", "steps": []}
    from groupcomm.web import crdt_peer

    rows, reason = crdt_peer.peer_steps(plan, args.tabs_per_session, args.rate,
                                        args.seconds,
                                        lambda row: capacity_run.verdict(row, limits),
                                        progress)
    return {"steps": rows, "stopped": reason or _held(rows, limits)}


def _options(args: argparse.Namespace) -> list[str]:
    return ["--no-reliable"] if args.no_reliable else []


def check(args: argparse.Namespace) -> None:
    """A clear error for arguments no run can take."""
    if args.keys < 1 or args.interval < 0:
        raise CliError("groupcomm web bench: --keys >= 1, --interval >= 0")
    capacity_run.check_load(
        "groupcomm web bench", rate=args.rate, seconds=args.seconds,
        p99_limit=args.p99_limit, queue_limit=args.queue_limit, mb_limit=args.mb_per_tab,
        per_session=args.tabs_per_session, most_total=args.max_tabs, sessions=args.sessions)
    gateway_counts(args)
    if args.profile:
        from groupcomm.web.profile_step import py_spy

        if py_spy() is None:
            raise CliError("groupcomm web bench: --profile needs py-spy (pip install py-spy)")


def run(args: argparse.Namespace) -> int:
    check(args)
    result: dict[str, Any] = {"causality": args.causality, "keys": args.keys,
                              "interval_ms": args.interval, "reliable": not args.no_reliable}

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if "terminal" not in args.skip or "browser" not in args.skip:
        with Setup(args.causality, ["bw", "br"], *_options(args)) as setup:
            if "terminal" not in args.skip:
                progress("terminal to terminal ...")
                result["terminal_to_terminal"] = percentiles(
                    terminal_latency(setup, args.keys, args.interval))
            if "browser" not in args.skip:
                progress("browser to browser ...")
                result["browser_to_browser"] = percentiles(
                    browser_latency(setup, args.keys, args.interval))
    if "capacity" not in args.skip:
        result["capacity"] = capacity(args, progress)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"causality {args.causality}{'' if args.no_reliable else ' over the reliable layer'}; "
          f"{args.keys} keystrokes {args.interval:g} ms apart")
    for key in ("terminal_to_terminal", "browser_to_browser"):
        if key in result:
            row = result[key]
            print(f"  {key.replace('_', ' '):22} p50 {row.get('p50_ms')} ms  "
                  f"p99 {row.get('p99_ms')} ms  (n={row['n']})")
    if "capacity" in result:
        _print_capacity(result["capacity"], args)
    return 0


def _print_capacity(found: dict[str, Any], args: argparse.Namespace) -> None:
    for run in found["series"]:
        count = run["gateways"]
        print(f"  capacity of {'one gateway process' if count == 1 else f'{count} gateway processes'}: "
              f"{found['tabs_per_session']} tabs per session, each typing {args.rate:g} keys/s "
              f"for {args.seconds:g} s; keystroke to every other tab of its session")
        for line in capacity_run.table(run["steps"]):
            print(f"  {line}")
        print(f"  {run['stopped']}")
        print(f"  ceiling: {run['ceiling']} tabs within the limits" if run["ceiling"]
              else "  ceiling: no step within the limits")
    if "peer" in found:
        print("  the same load against pycrdt-websocket (its server, one process; "
              "scripted Yjs clients):")
        for line in capacity_run.table(found["peer"]["steps"], "peer"):
            print(f"  {line}")
        print(f"  {found['peer']['stopped']}")
    if "plot" in found:
        print(f"  plot: {found['plot']}")
