"""``groupcomm watch`` as a process: its refusals, and a page's WebSocket getting the
steps of trace lines written while it runs (the browser tests are in
test_session_live.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp
import pytest

from groupcomm.tools.procs import LineProcess
from groupcomm.web.watch import main


def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trace-dir", str(tmp_path / "none")]) == 2
    assert main(["--trace-dir", str(tmp_path), "--port", "70000"]) == 2
    assert main(["--trace-dir", str(tmp_path), "--poll", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"groupcomm watch: --trace-dir {tmp_path / 'none'} is not a directory",
                   "groupcomm watch: --port must be 0 to 65535, got 70000",
                   "groupcomm watch: --poll must be > 0"]


def line(ts: float, process: str, event: str, **fields) -> str:
    return json.dumps({"ts": ts, "process": process, "event": event, "protocol": "vector",
                       **fields}) + "\n"


async def page_steps(url: str, trace: Path) -> tuple[dict, list[dict]]:
    """Open the page's WebSocket, then append lines: the snapshot and the steps pushed."""
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await ws.send_json({"type": "hello", "view": "."})
        snapshot = await ws.receive_json(timeout=10)
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(line(2.0, "bob", "send", msg="bob#1", sender="bob",
                              dests=["alice"], vc={"bob": 1}))
            handle.write("{broken\n")
        steps: list[dict] = []
        while len(steps) < 1:
            message = await ws.receive_json(timeout=10)
            steps.extend(message.get("steps", []))
        return snapshot, steps


def test_a_page_gets_the_steps_of_lines_written_while_it_watches(tmp_path: Path) -> None:
    trace = tmp_path / "bob.jsonl"
    trace.write_text(line(1.0, "bob", "join", client="bob"), encoding="utf-8")
    watch = LineProcess("watch", [sys.executable, "-m", "groupcomm.web.watch",
                                  "--trace-dir", str(tmp_path), "--port", "0",
                                  "--poll", "0.05"])
    try:
        url = watch.wait_line(lambda x: x.startswith("watching "), what="the URL").split()[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/session")
        snapshot, steps = asyncio.run(page_steps(url.replace("http", "ws") + "/ws", trace))
        assert snapshot["type"] == "snapshot" and snapshot["views"] == ["."]
        assert [(s["kind"], s["process"]) for s in snapshot["steps"]] == [("join", "bob")]
        assert [(s["kind"], s["msg"]) for s in steps] == [("send", "bob#1")]
        assert steps[0]["state"]["clock"] == {"bob": 1}
    finally:
        watch.terminate()
    assert "bob.jsonl:3: bad trace line skipped (not JSON" in watch.stderr_tail(10)
