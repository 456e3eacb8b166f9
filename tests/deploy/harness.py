"""What the deployment tests share: free ports, waiting for a listener, docs/deploy.md's
nginx configurations made into a whole nginx.conf, and gateways (``groupcomm web``)
started as child processes. The fixtures that start and reap are in conftest.py."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groupcomm.tools.procs import LineProcess

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists()
                                  else None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_port(port: int, process: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nothing listens at {port}") from None
            time.sleep(0.05)


def nginx_block(containing: str) -> str:
    """The one nginx configuration of docs/deploy.md that contains ``containing``."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```nginx\n(.*?)```", text, re.DOTALL)
              if containing in b]
    assert len(blocks) == 1, f"docs/deploy.md has one nginx configuration with {containing!r}"
    return blocks[0]


def listening_on(block: str, port: int) -> str:
    """``block`` listening at the test's port in place of the page's 8080."""
    return block.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")


def nginx_conf(folder: Path, block: str) -> Path:
    """A whole nginx.conf around ``block`` (an http block's content), its paths in the
    test's folder, in the foreground."""
    temp = folder / "temp"
    temp.mkdir()
    temp.chmod(0o777)  # nginx's workers run as nobody when the test runs as root
    paths = "\n".join(f"    {kind}_temp_path {temp}/{kind};"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = folder / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
{paths}
{block}
}}
""", encoding="utf-8")
    return conf


def start_gateway(name: str, sessions: Sequence[str], users: Path, servers: Sequence[str],
                  key: Path, extra: Sequence[str] = ()) -> tuple[LineProcess, int]:
    """``groupcomm web`` serving ``sessions`` on a free port: the process and its port
    (the caller reaps the process, also when this raises)."""
    gateway = LineProcess(name, [
        sys.executable, "-m", "groupcomm.web.cli",
        *(arg for session in sessions for arg in ("--session", session)),
        "--users", str(users), "--http", "127.0.0.1:0", "--servers", ",".join(servers),
        "--key-file", str(key), "--causality", "matrix", *extra])
    return gateway, gateway_port(gateway)


def gateway_port(gateway: LineProcess) -> int:
    line = gateway.wait_line(lambda s: s.startswith("listening on "), 30)
    return int(re.search(r":(\d+) ", line)[1])


def gateway_stats(port: int) -> dict[str, Any]:
    """A gateway's ``/stats`` (asked directly, not through nginx: it answers the
    loopback only)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as answer:
        return json.load(answer)


def chatting_at_home(servers: Sequence[Any], key: Any, people: list[Any]
                     ) -> tuple[str, str, Any, Any, dict[str, list[str]]]:
    """alice and bob chatting in a session whose home is ``servers[0]`` (all listed,
    in that order), each having typed five lines the other has: (the session, the
    ``--servers`` list, alice, bob, what each typed). Their chats go into ``people``."""
    from groupcomm.protocol.placement import session_home
    from tests.apps.im_harness import type_lines, wait_all
    from tests.deploy.test_failover import chat

    addresses = [server.address for server in servers]
    session = next(n for n in (f"room-{i}" for i in range(1000))
                   if session_home(n, addresses) == addresses[0])
    listed = ",".join(addresses)
    alice = chat("alice", session, listed, key, people)
    bob = chat("bob", session, listed, key, people)
    alice.expect(r"\* bob joined")
    typed = {"alice": type_lines(alice, "a", 0, 5), "bob": type_lines(bob, "b", 0, 5)}
    wait_all(bob, "alice", typed["alice"], 20)
    return session, listed, alice, bob, typed
