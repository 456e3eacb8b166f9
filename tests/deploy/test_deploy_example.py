"""docs/deploy.md's worked example, on the loopback with free ports: ``groupcomm serve
--workers 2``, a ``groupcomm web`` gateway per session given the ``--servers`` list,
Debian's nginx started with the page's configuration (routing each browser to its
session's gateway by host name, WebSockets passed through), and scripted browser tabs
(WebSockets through nginx) typing in both sessions. The first session's worker is
killed with SIGKILL mid-typing and its supervisor starts it again (nothing holds the
supervisor back): the first session's tabs move to the other worker and come back to the
restarted one, where the last third of the lines is typed; the second session's gateway
never hears of it, and every tab of both sessions ends with every line of the others
exactly once, under the member ids it joined with. The servers
share a PostgreSQL store: once the tabs have left, a terminal chat joining the first
session gets its whole conversation."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from groupcomm.protocol.placement import session_home
from groupcomm.tools.procs import LineProcess
from groupcomm.transport.keys import write_new_key
from groupcomm.web.auth import Users
from tests.deploy.harness import gateway_port, nginx_block

aiohttp = pytest.importorskip("aiohttp")
LINES = 30  # per tab; the kill comes after a third of them


def host_routing(gateways: dict[str, int]) -> str:
    """The page's host-name configuration, its example host names and gateway ports
    swapped for the test's sessions and gateways."""
    block = nginx_block("map $host $gateway")
    names = iter(gateways.items())
    for example in ("room-a", "room-b"):
        session, port = next(names)
        block = re.sub(rf"{example}\.localhost 127\.0\.0\.1:\d+;",
                       f"{session}.localhost 127.0.0.1:{port};", block)
    return block


@pytest.fixture
def deployment(tmp_path: Path, postgres_server, nginx) -> Iterator[dict]:
    store = postgres_server.create_database()
    key = tmp_path / "session.key"
    write_new_key(key)
    started: list[LineProcess] = []
    try:
        workers = LineProcess("workers", [
            sys.executable, "-m", "groupcomm.cli.serve", "--workers", "2", "--bind",
            "tcp://127.0.0.1:0", "--key-file", str(key), "--heartbeat-timeout", "1.5",
            "--store", store, "--snapshot-every", "20", "--snapshot-seconds", "1"])
        started.append(workers)
        servers = workers.wait_line(lambda s: s.startswith("servers: "), 30).split(
            ": ", 1)[1].split(",")
        pids = {}
        for line in workers.lines:
            found = re.match(r"worker \d+ \(pid (\d+)\): listening on (\S+)", line)
            if found:
                pids[found[2]] = int(found[1])
        names = (f"room-{i}" for i in range(1000))
        sessions = [next(n for n in names if session_home(n, servers) == servers[0]),
                    next(n for n in names if session_home(n, servers) == servers[1])]
        users = Users(tmp_path / "users.json")
        tokens = {name: users.add(name) for name in ("ann", "amy", "ben", "bea")}
        gateways = {}
        for session in sessions:
            gateway = LineProcess(session, [
                sys.executable, "-m", "groupcomm.web.cli", "--session", session,
                "--users", str(tmp_path / "users.json"), "--http", "127.0.0.1:0",
                "--servers", ",".join(servers), "--key-file", str(key),
                "--causality", "matrix"])
            started.append(gateway)
            gateways[session] = gateway_port(gateway)
        port = nginx(host_routing(gateways))
        yield {"port": port, "sessions": sessions, "tokens": tokens, "servers": servers,
               "pids": pids, "gateways": started[1:], "workers": workers,
               "supervisor": workers.process.pid, "key": key}
    finally:
        for process in reversed(started):
            if process.alive():
                process.process.send_signal(signal.SIGCONT)
            process.terminate()


async def run_tabs(setup: dict) -> dict[str, list[str]]:
    """Four tabs (ann, amy in the first session; ben, bea in the second) through nginx,
    each typing LINES lines; the first session's worker is killed after a third of
    them. Returns each tab's received line texts, in order, repeats included."""
    port = setup["port"]
    first, second = setup["sessions"]
    tabs = {"ann": first, "amy": first, "ben": second, "bea": second}
    got: dict[str, list[str]] = {name: [] for name in tabs}
    async with aiohttp.ClientSession() as client:
        sockets = {}
        for name, session in tabs.items():
            host = f"{session}.localhost:{port}"
            ws = await client.ws_connect(f"http://127.0.0.1:{port}/ws/im",
                                         headers={"Host": host}, origin=f"http://{host}")
            await ws.send_json({"type": "hello", "user": name,
                                "token": setup["tokens"][name]})
            sockets[name] = ws
        applied = dict.fromkeys(tabs, 0)
        welcomed = {name: asyncio.Event() for name in tabs}

        async def read(name: str) -> None:
            async for message in sockets[name]:
                data = json.loads(message.data)
                for event in data if isinstance(data, list) else [data]:
                    if event["type"] == "welcome":
                        welcomed[name].set()
                    elif event["type"] == "deliver":
                        applied[name] = event["n"]
                        if event.get("text", "").startswith("<"):
                            got[name].append(event["text"])
                    elif event["type"] == "state":
                        # the tab starts again from the gateway's state (a member told
                        # that the store's generation changed gets a fresh one): its
                        # view is that history, then what is delivered after it
                        applied[name] = event["handed"]
                        got[name] = re.findall(r"<[a-z]+\d{3}>", json.dumps(event["state"]))
                    elif event["type"] == "error":
                        raise AssertionError(f"{name}: {event}")
                await sockets[name].send_json({"type": "applied", "n": applied[name]})

        readers = [asyncio.create_task(read(name)) for name in tabs]
        for event in welcomed.values():
            await asyncio.wait_for(event.wait(), 60)
        await asyncio.sleep(1.0)  # each tab's member sees the other join

        home, following = setup["servers"]
        returned = asyncio.Event()

        async def watch_return() -> None:
            # the first session's two tabs move back once the supervisor started the
            # killed worker again (after the members' silence limit, so they all moved)
            back = f"moving from session server {following} to {home}"
            deadline = time.monotonic() + 60
            while sum(back in line for line in setup["gateways"][0].stderr_lines) < 2:
                assert time.monotonic() < deadline, setup["gateways"][0].stderr_tail(40)
                await asyncio.sleep(0.1)
            returned.set()

        async def type_lines(name: str) -> None:
            for k in range(LINES):
                if k == 2 * LINES // 3:
                    await returned.wait()  # the last third after the return home
                await sockets[name].send_json({"type": "say", "applied": applied[name],
                                               "text": f"<{name}{k:03d}>"})
                if name == "ann" and k == LINES // 3:
                    # the supervisor starts it again, as it would any worker that died
                    os.kill(setup["pids"][home], signal.SIGKILL)
                await asyncio.sleep(0.1)

        await asyncio.gather(watch_return(), *(type_lines(name) for name in tabs))
        others = {"ann": "amy", "amy": "ann", "ben": "bea", "bea": "ben"}
        deadline = time.monotonic() + 60
        while any(len(set(got[n])) < LINES for n in tabs):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # a late repeat would show
        for reader in readers:
            reader.cancel()
        for ws in sockets.values():
            await ws.close()
        assert set(others) == set(tabs)
    return got


@pytest.mark.long
def test_the_worked_example_runs_behind_nginx_and_survives_a_killed_worker(
        deployment: dict) -> None:
    got = asyncio.run(run_tabs(deployment))
    others = {"ann": "amy", "amy": "ann", "ben": "bea", "bea": "ben"}
    for name, other in others.items():
        wanted = [f"<{other}{k:03d}>" for k in range(LINES)]
        mine = [text for text in got[name] if text.startswith(f"<{other}")]
        assert mine == wanted, (name, mine)  # each once, in the order typed
    moved, still = (gateway.stderr_tail(400) for gateway in deployment["gateways"])
    home, following = deployment["servers"]
    for member in ("ann", "amy"):  # away from the killed worker, and back once restarted
        assert f"{member}: moving from session server {home} to {following}" in moved
        assert f"{member}: moving from session server {following} to {home}" in moved
    assert "back as a new member" not in moved  # the same member ids throughout
    assert "no answer from the session server" not in still
    assert "moving from session server" not in still
    # everyone left: a terminal chat joining the first session now gets the whole
    # conversation from the shared store, through whichever server the session is on
    cara = pexpect.spawn(
        sys.executable, ["-m", "groupcomm.apps.im", "--name", "cara", "--session",
                         deployment["sessions"][0], "--servers",
                         ",".join(deployment["servers"]), "--key-file",
                         str(deployment["key"]), "--causality", "matrix"],
        # the terminal's echo of typed keys can land inside a character the app
        # writes (a long line's middle dot): one odd character, not a failure
        encoding="utf-8", codec_errors="replace", timeout=30, dimensions=(40, 160),
        env={**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1"})
    cara.logfile_read = io.StringIO()
    try:
        cara.expect("cara joined")
        # the history is shown before "up to date", which may come after the join line
        if "* up to date (" not in cara.logfile_read.getvalue():
            cara.expect_exact("* up to date (")
        history = cara.logfile_read.getvalue()
        for name in ("ann", "amy"):
            said = re.findall(rf"\[{name}\] (<{name}\d+>)", history)
            # each once (a line resent after the move is kept after later ones)
            assert sorted(said) == [f"<{name}{k:03d}>" for k in range(LINES)], (name, history)
    finally:
        cara.close(force=True)
    workers = deployment["workers"]
    assert any("starting it again" in line for line in workers.stderr_lines)
