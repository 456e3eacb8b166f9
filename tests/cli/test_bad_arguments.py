"""Arguments a person can get wrong, given to the real commands: injected delays that
would hold every frame forever, known-bad modules, a trace directory that cannot be
created, and a server refused before it writes its key."""

from __future__ import annotations

import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator

GROUPCOMM = [sys.executable, "-m", "groupcomm.cli"]
SESSION = ["--name", "alice", "--session", "s", "--server", "tcp://127.0.0.1:9"]


def refused(*argv: str) -> str:
    """Run ``groupcomm ARGV``; it must fail with exit 2 and one line: that line."""
    done = subprocess.run([*GROUPCOMM, *argv], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["im", "edit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e9", "1e12", "-1", "soon"])
def test_a_delay_that_is_not_a_finite_number_up_to_an_hour_is_one_line(
        command: str, value: str) -> None:
    line = refused(command, *SESSION, "--delay", f"bob={value}")
    assert line == (f"groupcomm {command}: --delay bob={value}: delay must be a finite "
                    f"number of ms from 0 to 3600000 (one hour), got {value}")


@pytest.mark.parametrize("value", ["nan", "inf", "1e9", "-5"])
def test_a_jitter_that_is_not_a_finite_number_up_to_an_hour_is_one_line(value: str) -> None:
    line = refused("im", *SESSION, "--jitter", value)
    assert line.startswith(f"groupcomm im: --jitter {float(value)}: jitter must be a finite "
                           "number of ms from 0 to 3600000 (one hour), got ")
    refused_stress = refused("stress", "--jitter", value, "--no-analysis")
    assert "jitter must be a finite number of ms from 0 to 3600000" in refused_stress


def test_a_delay_to_oneself_is_one_line() -> None:
    assert refused("im", *SESSION, "--delay", "alice=50") == (
        "groupcomm im: --delay alice=50: cannot delay messages to alice: that is this "
        "member itself")


def test_the_api_refuses_the_same_delays_with_the_same_words(group: ProcessGroup) -> None:
    assert group.server is not None
    with Communicator("alice", "s", server=group.server.address,
                      key_file=str(group.key_file)) as comm:
        for bad in (math.nan, math.inf, 1e9, -1.0):
            with pytest.raises(ValueError, match=r"^delay must be a finite number of ms "
                               r"from 0 to 3600000 \(one hour\), got "):
                comm.set_minimum_delay_to_peer("bob", bad)
            with pytest.raises(ValueError, match=r"^jitter must be a finite number of ms "
                               r"from 0 to 3600000 \(one hour\), got "):
                comm.set_delay_variation(bad)
        with pytest.raises(ValueError, match="^cannot delay messages to alice: that is "
                           "this member itself$"):
            comm.set_minimum_delay_to_peer("alice", 10)
        comm.set_minimum_delay_to_peer("bob", 3_600_000)  # the bound itself is accepted
        comm.set_minimum_delay_to_peer("bob", 0)
        comm.set_delay_variation(0)


def test_a_trace_directory_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker / "traces"
    for argv in (["im", *SESSION], ["edit", *SESSION], ["simulate", "run"]):
        line = refused(*argv, "--trace-dir", str(target))
        assert line.endswith(f": cannot create trace directory {target}: Not a directory")
        assert "Errno" not in line


def first_stderr_lines(argv: Sequence[str], wanted: str, timeout: float = 60.0,
                       stdin: str | None = None) -> list[str]:
    """Start ``argv``, read its stderr until a line holds ``wanted`` (or it ends, or the
    deadline passes), then stop it; the lines read."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        assert process.stdin is not None
        if stdin is not None:
            process.stdin.write(stdin)
        process.stdin.close()
        while not any(wanted in line for line in seen):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
    finally:
        # Ctrl-C lets the command stop what it started; then nothing of its process
        # group may stay
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)
        reader.join(10)
    return seen


WHY = {"scalar-id": "global scalar id; wrong with concurrent senders",
       "last-sender": "last-sender stamp; misses all but one cause"}


@pytest.mark.long
@pytest.mark.parametrize(("command", "module"), [
    ("demo", "scalar-id"), ("stress", "last-sender"), ("text-bench", "scalar-id"),
    ("bench", "last-sender"),
])
def test_a_known_bad_module_gets_one_warning_line_naming_why(command: str,
                                                              module: str) -> None:
    extra = {"demo": ["--no-analysis"], "stress": ["--no-analysis"],
             "text-bench": [], "bench": ["--messages", "100", "--repeat", "1"]}[command]
    lines = first_stderr_lines([*GROUPCOMM, command, "--causality", module, *extra],
                               "known-bad")
    warnings = [line for line in lines if "known-bad" in line]
    assert warnings == [
        f"groupcomm {command}: warning: {module} is a known-bad module, kept as a "
        f"counterexample: {WHY[module]}; messages may be delivered out of causal order"]


def test_the_chat_warns_of_a_known_bad_module_and_a_good_one_gets_no_warning(
        group: ProcessGroup) -> None:
    assert group.server is not None
    base = [*GROUPCOMM, "im", "--session", "s", "--server", group.server.address,
            "--key-file", str(group.key_file)]
    lines = first_stderr_lines([*base, "--name", "alice", "--causality", "scalar-id"],
                               "known-bad", stdin="/quit\n")
    assert [line for line in lines if "known-bad" in line] == [
        "groupcomm im: warning: scalar-id is a known-bad module, kept as a counterexample: "
        f"{WHY['scalar-id']}; messages may be delivered out of causal order"]
    done = subprocess.run([*base, "--name", "bob", "--causality", "matrix"], input="/quit\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr


def test_serve_refused_for_a_bad_argument_writes_no_key_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPCOMM_KEY")}
    env["TMPDIR"] = str(tmp_path)
    for argv in (["--bind", "tcp://127.0.0.1:99999"], ["--curve-dir", str(tmp_path / "no")],
                 ["--heartbeat-timeout", "0"], ["--bind", "nonsense"]):
        done = subprocess.run([*GROUPCOMM, "serve", *argv], capture_output=True, text=True,
                              timeout=60, env=env)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert list(tmp_path.iterdir()) == [], argv
