"""``groupcomm stress`` with real processes: short fault runs in the default suite, the
issue's full runs behind the ``slow`` marker (``pytest -m slow``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long


def stress(*args: str, timeout: float = 400) -> dict:
    done = subprocess.run([sys.executable, "-m", "groupcomm.cli", "stress", "--json", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_clean(result: dict) -> None:
    assert result["settled"], result
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert result["protocol_errors"] == 0
    assert all(v == 0 for v in result["held_at_end"].values()), result


def test_stress_matrix_with_jitter_and_spark_analysis() -> None:
    result = stress("--processes", "4", "--messages", "600", "--causality", "matrix",
                    "--jitter", "10")
    assert_clean(result)
    assert result["causal_violations"] == 0
    assert result["analysis"]["undelivered"] == 0 and result["analysis"]["duplicates"] == 0
    assert all(0 < mb < 500 for mb in result["peak_rss_mb"].values())


@pytest.mark.parametrize("causality", ["matrix", "ks", "cykas", "vector"])
def test_stress_drops_and_duplicates_under_the_reliable_layer(causality: str) -> None:
    result = stress("--processes", "3", "--messages", "300", "--causality", causality,
                    "--drop", "0.05", "--duplicate", "0.05", "--jitter", "5", "--no-analysis")
    assert result["filters"][0] == "reliable"
    assert_clean(result)


def test_stress_without_the_reliable_layer_loses_dropped_frames() -> None:
    result = stress("--processes", "3", "--messages", "300", "--causality", "none",
                    "--drop", "0.1", "--no-reliable", "--no-analysis", "--timeout", "15")
    assert result["lost"] > 0


def test_stress_killed_client_survivors_keep_going() -> None:
    result = stress("--processes", "4", "--messages", "1200", "--rate", "300",
                    "--causality", "matrix", "--kill", "p3@1", "--no-analysis")
    assert result["killed"] == ["p3"] and "p3" not in result["peak_rss_mb"]
    assert_clean(result)


@pytest.mark.parametrize("options", [["--reliable"], ["--direct"]], ids=["relayed+reliable",
                                                                        "direct"])
def test_stress_server_restart_loses_nothing(options: list[str]) -> None:
    result = stress("--processes", "3", "--messages", "1500", "--rate", "300",
                    "--causality", "matrix", "--restart-server@1", "--no-analysis",
                    "--timeout", "60", *options)
    assert_clean(result)


@pytest.mark.parametrize("causality", [
    "matrix", "cykas",
    # about 30 s each; mfss shares cykas' sender-side handling of departures, and ks
    # under churn is also in test_incarnations
    pytest.param("mfss", marks=pytest.mark.slow),
    pytest.param("ks", marks=pytest.mark.slow),
])
def test_stress_churn_late_join_leave_restart_and_false_suspicion(causality: str) -> None:
    # rate-limited so that the traffic spans the churn (about 12 s of it)
    result = stress("--processes", "5", "--messages", "1500", "--rate", "25",
                    "--causality", causality, "--churn", "--reliable", "--timeout", "120")
    assert_clean(result)
    assert result["causal_violations"] == 0 and result["duplicates_in_trace"] == 0
    churn = result["churn"]
    assert churn["clients"] == ["p3", "p4", "p5"] and "late" in result["peak_rss_mb"]
    # the late joiner was a stable member: what it was sent is in the accounting
    assert result["expected"] > 0 and result["delivered"] == result["expected"]
    # the killed and the frozen clients came back as new members; their old traces end
    # without a departure
    assert set(result["analysis"]["abrupt_endings"]) >= {"p4", "p5"}


def test_stress_bad_arguments() -> None:
    for args, needle in [(["--churn", "--processes", "4"], "--churn needs at least 5"),
                         (["--kill", "p9@1"], "clients are p1..p4"),
                         (["--kill", "p1"], "NAME@SECONDS"),
                         (["--drop", "2"], "probability"),
                         (["--causality", "nope"], "unknown causality module")]:
        done = subprocess.run([sys.executable, "-m", "groupcomm.cli", "stress", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and needle in done.stderr, (args, done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("causality", ["matrix", "vector", "mfss", "cykas"])
@pytest.mark.parametrize("faults", [[], ["--drop", "0.05", "--duplicate", "0.05"]],
                         ids=["clean", "drop+dup"])
def test_full_stress_runs(causality: str, faults: list[str]) -> None:
    result = stress("--processes", "8", "--messages", "10000", "--causality", causality,
                    "--jitter", "20", *faults, timeout=3600)
    assert_clean(result)
    assert result["causal_violations"] == 0
