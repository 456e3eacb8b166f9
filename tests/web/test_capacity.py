"""``groupcomm web bench``'s capacity part: its arguments, its steps, the reason it gives
for stopping, the placement of sessions on gateway processes (unit), a gateway serving
several sessions, two gateway processes sharing a load, and a small real run (long)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from groupcomm.cli.args import CliError
from groupcomm.tools.procs import ProcessGroup
from groupcomm.tools.procstat import ProcessSample
from groupcomm.web import bench, capacity
from groupcomm.web.auth import Users
from groupcomm.web.capacity import (
    Limits,
    Step,
    combine,
    percentiles,
    placement,
    plan,
    table,
    verdict,
)
from tests.web.conftest import GatewayProcess


def test_plan_doubles_sessions_up_to_max_tabs() -> None:
    assert plan(10, 200) == [1, 2, 4, 8, 16, 20]
    assert plan(10, 160) == [1, 2, 4, 8, 16]
    assert plan(3, 6) == [1, 2]
    assert plan(10, 10) == [1]
    assert plan(10, 200, sessions=20) == [20]


@pytest.mark.parametrize(("args", "message"), [
    ((1, 10, None), "at least 2 tabs"),
    ((10, 5, None), "fewer than one session"),
    ((10, 200, 0), "at least 1"),
])
def test_plan_refuses_what_cannot_run(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan(*args)


def _row(**fields: object) -> dict:
    row = {"sessions": 2, "tabs_per_session": 3, "tabs": 6, "rate": 2.0, "n": 100,
           "p50_ms": 4.0, "p99_ms": 20.0, "undelivered": 0, "queued_max": 3,
           "gateway_mb_per_tab": 1.5}
    row.update(fields)
    return row


def test_verdict_says_which_limit_was_crossed() -> None:
    limits = Limits(p99_ms=50, queue=100, mb_per_tab=2)
    assert verdict(_row(), limits) is None
    assert verdict(_row(p99_ms=212.0), limits) == \
        "stopped at 6 tabs: p99 212 ms > 50 ms limit"
    assert verdict(_row(queued_max=150), limits) == \
        "stopped at 6 tabs: a tab's queue at the gateway grew to 150 events (limit 100)"
    assert "3 keystroke deliveries had not arrived" in verdict(_row(undelivered=3), limits)
    assert verdict(_row(gateway_mb_per_tab=2.5), limits) == \
        "stopped at 6 tabs: gateway memory 2.5 MB per tab > 2 MB limit"
    assert verdict(_row(gateway_mb_per_tab=2.5), Limits()) is None  # no memory limit
    assert verdict(_row(error="t4 could not log in: wrong token"), limits) == \
        "stopped at 6 tabs: t4 could not log in: wrong token"


def test_step_row_and_table() -> None:
    step = Step(2, 3, 2.0, samples=[float(k) for k in range(1, 101)], expected=102,
                gateway={"cpu_percent": 12.34, "rss_mb": 80.0, "rss_grown_mb": 10.0},
                queued_max=4)
    row = step.row()
    assert row["tabs"] == 6 and row["n"] == 100 and row["undelivered"] == 2
    assert row["p50_ms"] == 50.5 and row["p99_ms"] == 99.0
    assert row["gateway_cpu_percent"] == 12.3 and row["gateway_mb_per_tab"] == 2.0
    assert "server_cpu_percent" not in row
    header, line = table([row])
    assert "p99 ms" in header and "MB/tab" in header
    assert line.split()[:4] == ["2", "×", "3", "6"] and "12.3%" in line
    assert percentiles([]) == {"n": 0}


def _args(*argv: str):
    return bench.build_parser().parse_args(["--skip", "browser", "--skip", "terminal", *argv])


def test_arguments_defaults_and_refusals() -> None:
    args = _args()
    assert (args.rate, args.tabs_per_session, args.max_tabs, args.p99_limit) == (2, 10, 200, 50)
    bench.check(args)
    for argv, message in [(("--tabs-per-session", "1"), "at least 2 tabs"),
                          (("--max-tabs", "4"), "fewer than one session"),
                          (("--rate", "0"), "--rate > 0"),
                          (("--p99-limit", "0"), "--p99-limit > 0"),
                          (("--mb-per-tab", "0"), "--mb-per-tab > 0"),
                          (("--keys", "0"), "--keys >= 1"),
                          (("--sessions", "0"), "at least 1"),
                          (("--gateways", "0"), "at least 1"),
                          (("--gateways", "1,two"), "takes numbers")]:
        with pytest.raises(CliError, match=message):
            bench.check(_args(*argv))


def test_gateway_counts_in_the_order_given_each_once() -> None:
    assert bench.gateway_counts(_args()) == [1]
    assert bench.gateway_counts(_args("--gateways", "1,2")) == [1, 2]
    assert bench.gateway_counts(_args("--gateways", "2", "--gateways", "1,2")) == [2, 1]


def test_placement_spreads_sessions_round_robin() -> None:
    sessions = [f"cap{k}" for k in range(5)]
    assert placement(sessions, 2) == {"cap0": 0, "cap1": 1, "cap2": 0, "cap3": 1, "cap4": 0}
    assert set(placement(sessions, 1).values()) == {0}
    with pytest.raises(ValueError, match="at least 1"):
        placement(sessions, 0)


def test_several_gateways_summed_and_each_shown() -> None:
    each = [{"cpu_percent": 60.0, "cpu_seconds": 6.0, "rss_mb": 100.0, "rss_grown_mb": 9.0,
             "waited_percent": 5.0, "tabs": 10, "deliveries": 20_000},
            {"cpu_percent": 40.0, "cpu_seconds": 4.0, "rss_mb": 90.0, "rss_grown_mb": 9.0,
             "waited_percent": 1.0, "tabs": 10, "deliveries": 10_000}]
    step = Step(2, 10, 2.0, samples=[5.0] * 10, expected=10, gateway=combine(each),
                deliveries=30_000, per_gateway=each)
    row = step.row()
    assert row["gateways"] == 2 and row["gateway_cpu_percent"] == 100.0
    assert row["gateway_cpu_us_per_delivery"] == round(1e6 * 10 / 30_000, 1)
    assert row["gateway_mb_per_tab"] == 1.0  # 18 MB grown over 18 tabs (a first each)
    assert [g["cpu_us_per_delivery"] for g in row["per_gateway"]] == [300.0, 400.0]
    assert [g["mb_per_tab"] for g in row["per_gateway"]] == [1.0, 1.0]
    assert "each process: 10 tabs 60% 100 MB 1 MB/tab 300 µs; 10 tabs 40%" in \
        "\n".join(table([row]))
    assert "per_gateway" not in Step(1, 10, 2.0, per_gateway=each[:1]).row()


def test_collections_are_summed_over_the_gateways_full_ones_apart() -> None:
    def gateway(young: float, full: float, fulls: int) -> dict:
        return {"collector": {"generations": [
            {"collections": 9, "paused_ms": young, "longest_ms": 1.0},
            {"collections": 2, "paused_ms": 1.0, "longest_ms": 1.0},
            {"collections": fulls, "paused_ms": full, "longest_ms": full}]}}

    stats = {"gateways": [gateway(3.0, 40.0, 1), gateway(2.0, 0.0, 0)]}
    assert capacity.collections(stats) == (1, 40.0, 47.0)
    # a gateway that does not tell (an older one) counts as none
    assert capacity.collections({"gateways": [{"queued_max": 0}]}) == (0, 0.0, 0.0)


def test_process_sample_reads_this_process() -> None:
    import os

    first = ProcessSample.take(os.getpid())
    sum(range(200_000))  # some CPU
    second = ProcessSample.take(os.getpid())
    found = second.since(first)
    assert first.rss_mb > 1 and found["rss_mb"] == second.rss_mb
    assert found["cpu_percent"] >= 0
    with pytest.raises(OSError):
        ProcessSample.take(2 ** 22 + 1)  # above Linux's pid limit: no such process


@pytest.fixture()
def two_sessions(session_group: ProcessGroup, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path, session="first", users=("ann", "ben"),
                             extra=("--session", "second"))
    try:
        yield process
    finally:
        process.stop()


def test_gateway_serves_several_sessions(two_sessions: GatewayProcess) -> None:
    """A tab names its session with ?session=; without it, the first; an unknown one is
    refused (404) and counted; the session view has a view per session and page."""
    url = two_sessions.url
    host = url.split("//", 1)[1]

    async def welcome(http: aiohttp.ClientSession, user: str, query: str) -> dict:
        async with http.ws_connect(f"ws://{host}/ws/edit{query}") as ws:
            await ws.send_json({"type": "hello", "user": user,
                                "token": two_sessions.tokens[user]})
            while True:
                event = json.loads((await ws.receive(timeout=20)).data)
                if isinstance(event, dict) and event["type"] in ("welcome", "error"):
                    return event

    async def views(http: aiohttp.ClientSession) -> dict:
        async with http.ws_connect(f"ws://{host}/session/ws") as ws:
            await ws.send_json({"type": "hello", "view": "second/edit", "user": "ann",
                                "token": two_sessions.tokens["ann"]})
            return json.loads((await ws.receive(timeout=20)).data)

    async def run() -> tuple[dict, dict, int, dict]:
        async with aiohttp.ClientSession() as http:
            first = await welcome(http, "ann", "")
            second = await welcome(http, "ben", "?session=second")
            async with http.get(f"{url}/ws/edit?session=third") as answer:
                return first, second, answer.status, await views(http)

    first, second, status, snapshot = asyncio.run(run())
    # a session view per session and page: one session's members in each
    assert snapshot["type"] == "snapshot" and snapshot["view"] == "second/edit"
    assert snapshot["views"] == ["first/edit", "first/im", "second/edit", "second/im"]
    assert first["type"] == "welcome" and first["session"] == "first"
    assert second["type"] == "welcome" and second["session"] == "second"
    assert second["members"] == [second["member"]]  # alone in its session
    assert status == 404
    stats = two_sessions.stats()
    assert stats["counters"]["unknown_session"] == 1 and "queued_max" in stats
    # the startup's objects left out of collections, and the collections timed
    collector = stats["collector"]
    assert collector["frozen"] > 10_000 and len(collector["generations"]) == 3
    assert collector["generations"][0]["collections"] > 0


@pytest.mark.long
def test_small_capacity_run_prints_table_and_reason(tmp_path: Path) -> None:
    plot = tmp_path / "p99.png"
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.web.cli", "bench", "--skip", "browser", "--skip",
         "terminal", "--tabs-per-session", "3", "--max-tabs", "6", "--seconds", "3",
         "--plot", str(plot)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    ours, _, peer = out.partition("the same load against pycrdt-websocket")
    rows = [line.split() for line in ours.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [row[:4] for row in rows] in ([["1", "×", "3", "3"], ["2", "×", "3", "6"]],
                                         [["1", "×", "3", "3"]])
    for row in rows:  # p50, p99, the gateway's CPU, RSS and MB per tab were measured
        assert row[5] != "-" and row[7].endswith("%") and row[9] != "-"
    reason = next(line.strip() for line in ours.splitlines() if line.strip().startswith(
        ("stopped at", "held at every step")))
    assert reason.startswith(("held at every step up to 6 tabs", "stopped at 3 tabs: ",
                              "stopped at 6 tabs: "))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "step 1/2: 1 session(s) × 3 tabs" in done.stderr  # progress while it runs
    # the same steps against pycrdt-websocket, with a reason of their own
    peer_rows = [line.split() for line in peer.splitlines() if line.split()[:1] == ["1"]]
    assert peer_rows and peer_rows[0][:4] == ["1", "×", "3", "3"] and peer_rows[0][5] != "-"
    assert any(line.strip().startswith(("stopped at", "held at every step"))
               for line in peer.splitlines())


@pytest.mark.long
def test_two_gateway_processes_share_the_sessions_and_every_keystroke_arrives(
        tmp_path: Path) -> None:
    """``--gateways 2``: two gateway processes, each serving its sessions only (its
    ``/stats`` lists their tabs), and every keystroke reaches every other tab of its
    session."""
    users_file = tmp_path / "users.json"
    store = Users(users_file)
    users_of = {f"cap{s}": [f"t{s}{k}" for k in range(3)] for s in range(4)}
    tokens = {user: store.add(user) for users in users_of.values() for user in users}
    seen: list[dict] = []
    with bench.Setup("matrix", [], sessions=list(users_of), users_file=users_file,
                     gateways=2) as setup:
        pids = setup.pids()
        assert len(setup.gateways) == 2 and pids["gateway0"] != pids["gateway1"]
        assert setup.gateway_of == {"cap0": 0, "cap1": 1, "cap2": 0, "cap3": 1}

        def stats() -> dict:
            found = setup.stats()
            seen.append(found)
            return found

        step = asyncio.run(capacity.run_step(
            setup.url_of(), tokens, users_of, 4.0, 2.0, {**pids, "load": os.getpid()},
            stats, lambda line: None, setup.gateway_of))
        for gateway in setup.gateways:
            assert gateway.process.poll() is None  # both still running
    assert step.error is None
    assert step.expected > 0 and step.undelivered == 0 and len(step.samples) == step.expected
    row = step.row()
    assert row["gateways"] == 2 and [g["tabs"] for g in row["per_gateway"]] == [6, 6]
    assert all(g["cpu_percent"] > 0 for g in row["per_gateway"])
    # while typing: each process held the tabs of its own two sessions, six each
    tabs = [sorted(g["tabs"]) for g in seen[-1]["gateways"]]
    assert [len(t) for t in tabs] == [6, 6]
    assert all(t.startswith(("cap0/", "cap2/")) for t in tabs[0])
    assert all(t.startswith(("cap1/", "cap3/")) for t in tabs[1])
    # the gateways' collections while the tabs typed, both processes' summed
    young = sum(g["collector"]["generations"][0]["collections"] for g in seen[-1]["gateways"])
    assert young > 0 and row["gateway_collection_ms"] > 0
    assert row["gateway_full_collections"] >= 0 and row["gateway_full_collection_ms"] >= 0
