"""``groupcomm web bench``: how long a keystroke takes to reach another person's screen.

Browser to browser, terminal to terminal, and how many typing tabs one gateway holds
until that doubles (BENCHMARKS.md, "Web gateway")."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from typing import Any

from groupcomm.apps.batch_editors import EditorSession
from groupcomm.cli.args import ArgumentParser, CliError
from groupcomm.tools.procs import LineProcess
from groupcomm.web.auth import Users, login_link


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="groupcomm web bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--causality", default="matrix", help="causality module (default matrix)")
    parser.add_argument("--keys", type=int, default=200, help="keystrokes measured per pair")
    parser.add_argument("--interval", type=float, default=20.0, metavar="MS",
                        help="time between keystrokes (default 20 ms)")
    parser.add_argument("--rate", type=float, default=5.0, metavar="KEYS/S",
                        help="each load tab's typing rate in the capacity run (default 5)")
    parser.add_argument("--max-tabs", type=int, default=64,
                        help="the most tabs the capacity run tries (doubling from 2)")
    parser.add_argument("--skip", action="append", default=[],
                        choices=["browser", "terminal", "capacity"], help="leave a part out")
    parser.add_argument("--no-reliable", action="store_true",
                        help="gateway and terminal editors without the reliable layer")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(p99, 2)}


class Setup(EditorSession):
    """A session server and a gateway with ``users``; a context manager."""

    def __init__(self, causality: str, users: list[str], *options: str) -> None:
        super().__init__((), causality)
        #: the apps' options every member here runs with (``--no-reliable``)
        self.options = options
        try:
            users_file = self.folder / "users.json"
            store = Users(users_file)
            self.tokens = {name: store.add(name) for name in users}
            self.gateway = LineProcess("gateway", [
                sys.executable, "-m", "groupcomm.web.cli", "--session", "bench",
                "--server", self.server.address, "--key-file", str(self.key_file),
                "--users", str(users_file), "--http", "127.0.0.1:0", "--causality",
                causality, *options])
            line = self.gateway.wait_line(lambda x: x.startswith("listening on "),
                                          what="the gateway")
        except BaseException:
            super().close()
            raise
        self.url = line.split()[2]

    def close(self) -> None:
        self.gateway.terminate()
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


async def _capacity_step(setup: Setup, tabs: int, rate: float, probes: int,
                         interval: float) -> list[float]:
    """``tabs`` WebSocket tabs, all but two typing at ``rate``; the two measure a
    keystroke's latency from one to the other (sent to applied)."""
    import aiohttp

    host = setup.url.split("//", 1)[1]
    names = [f"t{k}" for k in range(tabs)]
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        sockets = {}
        for name in names:
            ws = await session.ws_connect(f"ws://{host}/ws/edit", origin=setup.url, max_msg_size=0)
            await ws.send_json({"type": "hello", "user": name, "token": setup.tokens[name]})
            sockets[name] = ws
        arrivals: dict[str, float] = {}
        applied = dict.fromkeys(names, 0)
        welcomed = {name: asyncio.Event() for name in names}
        member_of: dict[str, str] = {}

        async def read(name: str) -> None:
            ws = sockets[name]
            async for message in ws:
                data = json.loads(message.data)
                for event in data if isinstance(data, list) else [data]:
                    if event["type"] == "welcome":
                        member_of[name] = event["member"]
                        welcomed[name].set()
                    elif event["type"] == "deliver":
                        applied[name] = event["n"]
                        if name == names[1]:
                            arrivals[event["id"]] = time.time()
                await ws.send_json({"type": "applied", "n": applied[name]})

        readers = [asyncio.create_task(read(n)) for n in names]
        for event in welcomed.values():
            await asyncio.wait_for(event.wait(), 60)
        local = 0

        async def type_steadily(name: str) -> None:
            nonlocal local
            while not stop.is_set():
                local += 1
                await sockets[name].send_json({"type": "edit", "applied": applied[name],
                                               "local": f"~L{local}",
                                               "op": ["insert", None, "y"]})
                await asyncio.sleep(1 / rate)

        loaders = [asyncio.create_task(type_steadily(n)) for n in names[2:]]
        probe, samples = sockets[names[0]], []
        prefix = f"{member_of[names[0]]}#"
        for k in range(probes):
            sent = time.time()
            await probe.send_json({"type": "edit", "applied": applied[names[0]],
                                   "local": f"~L{k + 1}", "op": ["insert", None, "p"]})
            deadline = time.monotonic() + 20
            while (not any(mid.startswith(prefix) for mid in arrivals)
                   and time.monotonic() <= deadline):
                await asyncio.sleep(0.0005)
            found = [at for mid, at in arrivals.items() if mid.startswith(prefix)]
            if found:
                samples.append((max(found) - sent) * 1000)
            arrivals.clear()
            await asyncio.sleep(interval / 1000)
        stop.set()
        for task in loaders + readers:
            task.cancel()
        for ws in sockets.values():
            await ws.close()
    return samples


def capacity(setup: Setup, rate: float, max_tabs: int, probes: int,
             interval: float) -> list[dict[str, Any]]:
    steps, baseline, tabs = [], None, 2
    while tabs <= max_tabs:
        samples = asyncio.run(_capacity_step(setup, tabs, rate, probes, interval))
        row = {"tabs": tabs, **percentiles(samples)}
        steps.append(row)
        if baseline is None:
            baseline = row.get("p50_ms")
        elif row.get("p50_ms", float("inf")) >= 2 * baseline:
            break
        tabs *= 2
    return steps


def run(args: argparse.Namespace) -> int:
    if args.keys < 1 or args.interval < 0 or args.rate <= 0 or args.max_tabs < 2:
        raise CliError("groupcomm web bench: --keys >= 1, --interval >= 0, --rate > 0, "
                       "--max-tabs >= 2")
    result: dict[str, Any] = {"causality": args.causality, "keys": args.keys,
                              "interval_ms": args.interval, "reliable": not args.no_reliable}
    users = ["bw", "br", *[f"t{k}" for k in range(args.max_tabs)]]
    with Setup(args.causality, users, *(["--no-reliable"] if args.no_reliable else [])) as setup:
        if "terminal" not in args.skip:
            result["terminal_to_terminal"] = percentiles(
                terminal_latency(setup, args.keys, args.interval))
        if "browser" not in args.skip:
            result["browser_to_browser"] = percentiles(
                browser_latency(setup, args.keys, args.interval))
        if "capacity" not in args.skip:
            result["capacity"] = {"rate_per_tab": args.rate, "steps": capacity(
                setup, args.rate, args.max_tabs, min(args.keys, 100), args.interval)}
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
        print(f"  capacity: tabs typing {args.rate:g} keys/s each; latency between two")
        for row in result["capacity"]["steps"]:
            print(f"    {row['tabs']:4} tabs: p50 {row.get('p50_ms')} ms  "
                  f"p99 {row.get('p99_ms')} ms")
    return 0
