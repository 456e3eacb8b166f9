"""The command line explains itself and turns bad arguments into one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from groupcomm.cli.main import SUBCOMMANDS, main


def test_overview_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("command", ["serve", "bench"])
def test_subcommand_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_unknown_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown command 'frobnicate'" in err and "\n" not in err


def test_bad_arguments_are_one_line_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "serve", "--heartbeat-timeout", "soon"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--heartbeat-timeout" in result.stderr


@pytest.mark.parametrize(("bind", "says"), [
    ("tcp://127.0.0.1:99999", "ports are 0-65535"),
    ("127.0.0.1", "is not tcp://HOST:PORT or HOST:PORT"),
])
def test_serve_refuses_a_bad_bind_address_in_one_line(bind: str, says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "serve", "--bind", bind],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr


def test_serve_refuses_a_bad_key_file(tmp_path) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not hex")
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "serve", "--key-file", str(bad)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "hex" in result.stderr and "Traceback" not in result.stderr


def test_serve_generates_a_private_key_file_and_never_prints_the_key(tmp_path) -> None:
    import os
    import signal
    import time

    key_path = tmp_path / "new.key"
    process = subprocess.Popen(
        [sys.executable, "-m", "groupcomm.cli", "serve", "--bind", "tcp://127.0.0.1:0",
         "--new-key-file", str(key_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GROUPCOMM_KEY")},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        second = process.stdout.readline()
        assert first.startswith("listening on tcp://127.0.0.1:")
        assert second.strip() == f"key file: {key_path.resolve()}"
        deadline = time.monotonic() + 10
        while not key_path.exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert key_path.stat().st_mode & 0o777 == 0o600
        assert key_path.read_text().strip() not in first + second
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


# one routing of each kind in the default suite, the other two with the long tests
@pytest.mark.parametrize("routing, extra, compressed", [
    ("direct", [], False), ("relayed", [], True),
    pytest.param("relayed", ["--compress-frames", "off"], False, marks=pytest.mark.long),
    pytest.param("direct", ["--compress-frames", "on"], True, marks=pytest.mark.long)])
def test_bench_measures_both_sides_end_to_end(routing: str, extra: list[str],
                                              compressed: bool) -> None:
    """The real bench, small: both rates, their ratio and CPU per message per side."""
    import json

    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "bench", "--messages", "2000", "--repeat",
         "1", "--routing", routing, *extra, "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["routing"] == routing
    assert figures["compress_frames"] is compressed
    assert figures["baseline_msgs_per_s"] > 0 and figures["communicator_msgs_per_s"] > 0
    assert figures["ratio"] == pytest.approx(
        figures["communicator_msgs_per_s"] / figures["baseline_msgs_per_s"], rel=0.01)
    for name in ("baseline", "communicator"):
        for side in ("sender", "receiver"):
            assert figures["cpu_us_per_msg"][name][side] > 0
    assert figures["cpu_ratio"] > 0


@pytest.mark.long  # real processes and seconds of work: CI runs it
def test_bench_measures_the_round_trip_bound_for_acknowledged_sends() -> None:
    """mfss waits for an ACK per message: the bench measures the plain pyzmq round trip
    in the same run and reports mfss's rate as a fraction of one message per round trip."""
    import json

    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "bench", "--causality", "mfss", "--messages",
         "300", "--repeat", "1", "--round-trips", "300", "--critical-path", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    rtt = figures["round_trip_us"] / 1e6
    assert rtt > 0 and figures["polled_round_trip_us"] > 0
    assert figures["round_trip_bound_msgs_per_s"] == pytest.approx(1 / rtt, rel=0.01)
    assert figures["fraction_of_round_trip_bound"] == pytest.approx(
        figures["communicator_msgs_per_s"] * rtt, rel=0.02)
    # one message per round trip at most: a module that sent faster would not be waiting
    # for its acknowledgements (with a margin: the two are measured minutes apart)
    assert 0 < figures["fraction_of_round_trip_bound"] < 3
    # where a message's time goes: every message frame answered by an ACK and back
    path = figures["critical_path"]
    for part in ("sender_turnaround", "sender_to_receiver", "receiver_turnaround",
                 "receiver_to_sender"):
        assert path[part]["n"] >= 290 and path[part]["median_us"] > 0
        assert path[part]["p10_us"] <= path[part]["median_us"] <= path[part]["p90_us"]
    for side in ("sender", "receiver"):
        send_call = path[f"{side}_send_call"]["median_us"]
        assert 0 < send_call <= path[f"{side}_turnaround"]["p90_us"]
    assert path["sum_of_medians_us"] > 0
    # the handling taken out of the time per message, and what the rest allows
    # (the rate is printed as a whole number: on a slow machine its rounding moves the time
    # per message by up to half a message per second's worth)
    rate = figures["communicator_msgs_per_s"]
    per_message = 1e6 / rate
    assert path["rest_us"] == pytest.approx(
        per_message - 2 * path["handling_us_per_turnaround"], abs=0.2 + 0.5e6 / rate**2)
    assert path["fraction_without_handling"] == pytest.approx(
        figures["round_trip_us"] / path["rest_us"], rel=0.01)
    assert path["handling_budget_us"] >= 0


def test_bench_critical_path_is_refused_for_modules_whose_frames_are_not_answered() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "bench", "--causality", "fifo",
         "--critical-path"], capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "--critical-path needs a module whose senders wait for acknowledgements" in (
        result.stderr)
    assert "Traceback" not in result.stderr


def test_bench_round_trip_is_not_measured_for_modules_that_do_not_wait() -> None:
    from groupcomm.tools.bench import waits_for_acknowledgements

    assert waits_for_acknowledgements("mfss") and waits_for_acknowledgements("cykas")
    assert not any(waits_for_acknowledgements(m) for m in ("none", "fifo", "vector", "matrix"))
