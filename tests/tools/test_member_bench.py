"""``groupcomm member-bench``: its arguments (one line, exit code 2), the placement of
members in load processes, the reasons it stops (unit), one real step of terminal
members through a session server, and small whole runs with the pycrdt-websocket peer
(long)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from groupcomm.tools.members import bench as member_bench
from groupcomm.tools.members.step import Limits, Load, from_peer, run_step, verdict


@pytest.mark.parametrize(("argv", "says"), [
    (["--members-per-session", "1"], "a session needs at least 2 members"),
    (["--max-members", "5"], "--max-members 5 is fewer than one session of 10 members"),
    (["--sessions", "0"], "--sessions must be at least 1"),
    (["--rate", "0"], "--rate > 0, --seconds > 0"),
    (["--seconds", "-1"], "--rate > 0, --seconds > 0"),
    (["--p99-limit", "0"], "--p99-limit > 0"),
    (["--mb-per-member", "-1"], "--mb-per-member > 0"),
    (["--members-per-process", "0"], "--members-per-process must be at least 1"),
    (["--skip", "browser"], "invalid choice: 'browser'"),
    (["--causality", "bogus"], "unknown causality module 'bogus'"),
    (["--causality", "fifo"], "refusing fifo: it orders each sender's messages"),
    (["--causality", "scalar-id"], "refusing scalar-id: a known-bad module"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], says: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert member_bench.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and err.startswith("groupcomm member-bench: ") and says in err
    assert "web bench" not in err and "tabs" not in err
    assert captured.out == ""


def test_plan_and_placement() -> None:
    args = member_bench.build_parser().parse_args([])
    assert member_bench.check(args) == [1, 2, 4, 8, 16, 20]
    load = Load(sessions=2, per_session=3, rate=2.0, seconds=1.0, per_process=4)
    assert load.members == 6
    assert load.placement() == [["m0-0@cap0", "m0-1@cap0", "m0-2@cap0", "m1-0@cap1"],
                                ["m1-1@cap1", "m1-2@cap1"]]


def _row(**fields: object) -> dict:
    row = {"sessions": 2, "members_per_session": 3, "members": 6, "rate": 2.0, "n": 100,
           "p50_ms": 4.0, "p99_ms": 20.0, "undelivered": 0, "held_max": 3,
           "lag_p99_ms": 1.0, "server_mb_per_member": 0.2}
    row.update(fields)
    return row


def test_verdict_says_which_limit_was_crossed() -> None:
    limits = Limits(p99_ms=50, queue=100, mb_per_member=1)
    assert verdict(_row(), limits) is None
    assert verdict(_row(p99_ms=212.0), limits) == \
        "stopped at 6 members: p99 212 ms > 50 ms limit"
    assert verdict(_row(held_max=150), limits) == \
        "stopped at 6 members: a member's module held 150 messages (limit 100)"
    assert "3 keystroke deliveries had not arrived" in verdict(_row(undelivered=3), limits)
    assert verdict(_row(lag_p99_ms=80.0), limits) == (
        "stopped at 6 members: 1% of the keys were typed more than 80 ms behind the "
        "schedule (> 50 ms): the load processes, not the server, are the limit here")
    assert verdict(_row(server_mb_per_member=2.5), limits) == \
        "stopped at 6 members: server memory 2.5 MB per member > 1 MB limit"
    assert verdict(_row(server_mb_per_member=2.5), Limits()) is None  # no memory limit
    assert verdict(_row(error="load0: error join: refused"), limits) == \
        "stopped at 6 members: load0: error join: refused"


def test_peer_rows_in_this_bench_s_names() -> None:
    peer = {"sessions": 1, "tabs_per_session": 3, "tabs": 3, "rate": 2.0, "n": 10,
            "p50_ms": 1.0, "p99_ms": 2.0, "undelivered": 0, "gateway_cpu_percent": 3.5,
            "gateway_rss_mb": 44.0, "gateway_mb_per_tab": 0.05,
            "gateway_cpu_us_per_delivery": 400.0, "gateway_waited_percent": 0.1}
    row = from_peer(peer)
    assert row["members"] == 3 and row["members_per_session"] == 3
    assert row["server_cpu_percent"] == 3.5 and row["server_mb_per_member"] == 0.05
    assert not any(key.startswith("gateway") or "tab" in key for key in row)
    header, line = member_bench.table([row], "peer server")
    assert "peer server CPU" in header and "MB/member" in header
    assert line.split()[:4] == ["1", "×", "3", "3"] and "3.5%" in line
    assert line.split()[-1] == "-"  # its load generator's CPU is not measured


def test_one_step_of_terminal_members_through_a_server() -> None:
    """Two members of one session in one load process, through a real server: every
    keystroke reaches the other, with its latency, the server's CPU and memory."""
    said: list[str] = []
    row = run_step(Load(sessions=1, per_session=2, rate=20.0, seconds=0.5, per_process=2),
                   said.append)
    assert "error" not in row, row
    assert row["members"] == 2 and row["load_processes"] == 1
    assert row["undelivered"] == 0 and row["n"] >= 10  # 2 × 10 keys, 20% warm-up
    assert said == ["2 members joined (1 load process); typing 20 keys/s each for 0.5 s"]
    assert 0 < row["p50_ms"] <= row["p99_ms"] < 10_000
    assert row["server_rss_mb"] > 1 and row["server_cpu_percent"] >= 0
    assert row["load_cpu_percent"] > 0 and row["held_max"] >= 0
    assert row["server_cpu_percent_per_member"] >= 0 and row["load_mb_per_member"] > 1
    assert verdict(row, Limits(p99_ms=1e6)) is None


def _bench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupcomm.cli", "member-bench",
                           "--members-per-session", "3", "--max-members", "6", "--seconds", "2",
                           "--members-per-process", "2", *argv],
                          capture_output=True, text=True, timeout=240)


def _rows(text: str, first: tuple[str, ...] = ("1", "2")) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[:1]
            and line.split()[0] in first and "×" in line]


@pytest.mark.long
def test_small_run_prints_rows_reason_plot_and_the_peer(tmp_path: Path) -> None:
    plot = tmp_path / "p99.png"
    done = _bench("--plot", str(plot))
    assert done.returncode == 0, done.stderr
    ours, _, peer = done.stdout.partition("the same load against pycrdt-websocket")
    rows = _rows(ours)
    assert [row[:4] for row in rows] in ([["1", "×", "3", "3"], ["2", "×", "3", "6"]],
                                         [["1", "×", "3", "3"]])
    for row in rows:  # p50, p99, the server's CPU, RSS, MB per member, the load's CPU
        assert float(row[5]) <= float(row[6]) and row[7].endswith("%")
        assert float(row[8]) > 1 and row[9] != "-" and row[-2].endswith("%")
        assert row[-1] in ("(2)", "(3)")  # load processes: 2 members in each
    reason = next(line.strip() for line in ours.splitlines() if line.strip().startswith(
        ("stopped at", "held at every step")))
    assert reason.startswith(("held at every step up to 6 members", "stopped at 3 members: ",
                              "stopped at 6 members: "))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "step 1/2: 1 session(s) × 3 members" in done.stderr  # progress while it runs
    assert "3 members joined (2 load processes)" in done.stderr
    peer_rows = _rows(peer, ("1",))
    assert peer_rows and peer_rows[0][:4] == ["1", "×", "3", "3"] and peer_rows[0][5] != "-"
    assert any(line.strip().startswith(("stopped at", "held at every step"))
               for line in peer.splitlines())


@pytest.mark.long
def test_a_tiny_limit_stops_at_the_first_step_with_its_reason() -> None:
    done = _bench("--p99-limit", "0.001", "--skip", "peer", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(result["steps"]) == 1 and "peer" not in result
    step = result["steps"][0]
    assert step["members"] == 3 and step["n"] > 0
    assert result["stopped"].startswith("stopped at 3 members: ")
    assert "0.001 ms" in result["stopped"]  # the p99 limit, or the typing schedule's


@pytest.mark.long
def test_a_step_whose_members_cannot_join_stops_with_the_reason() -> None:
    """A load process that cannot join its members says why; the step's row carries it
    and the run stops there (the processes are reaped)."""
    row = run_step(Load(sessions=1, per_session=2, rate=2.0, seconds=1.0, per_process=2,
                        causality="no-such-module"), lambda line: None)
    assert row["error"].startswith("load0: error join: ")
    assert "no-such-module" in row["error"] and "p99_ms" not in row
    assert verdict(row, Limits()).startswith("stopped at 2 members: load0: error join: ")
