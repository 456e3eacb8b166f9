"""The discrete-event simulator: hand-computed timings, determinism, traces that analyse
clean, the matrix model against the real module, matrix-delta against matrix, the CLI
and a tiny figure grid."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groupcomm.cli.simulate import main as sim_main
from groupcomm.sim import SimConfig, SimulationError, figures, script_from_dict, simulate
from groupcomm.tools.localnet import LocalNetwork
from tests.helpers import virtual_results
from trace_analysis.reference import check_directory

ROOT = Path(__file__).resolve().parents[2]
CAUSAL = ["matrix", "matrix-delta", "ks", "mfss", "cykas"]


def _script(sends: list[dict[str, Any]], processes: list[str] | None = None) -> Any:
    data: dict[str, Any] = {"sends": sends}
    if processes:
        data["processes"] = processes
    return script_from_dict(data)


def _stable(result: Any) -> dict[str, Any]:
    data = result.as_dict()
    for key in ("wall_s", "messages_per_s"):
        data.pop(key)
    return data


def _deliveries(sim: Any) -> dict[str, list[str]]:
    order: dict[str, list[str]] = {}
    for record in sim.records:
        if record["event"] == "deliver":
            order.setdefault(record["process"], []).append(record["msg"])
    return order


# -- hand-computed timings ---------------------------------------------------------------------
def test_one_message_at_one_kbps_takes_frame_time_plus_delay() -> None:
    # none adds no metadata: 64 header + 64 payload = 128 bytes at 1000 B/s = 128 ms, + 5 ms
    config = SimConfig(protocol="none", bandwidth_kbps=1.0, delay_ms=5.0)
    result, _ = simulate(config, _script([{"from": "a", "to": "b"}]))
    assert result.meta_bytes_total == 0
    assert result.wire_bytes_total == 128
    assert result.execution_time_ms == pytest.approx(133.0)
    assert (result.app_messages, result.control_messages, result.deliveries) == (1, 0, 1)


def test_second_frame_waits_for_the_nic() -> None:
    # sent at 0 and 10 ms; the NIC is busy 0-128 and 128-256 ms; arrivals 133 and 261 ms
    config = SimConfig(protocol="none", bandwidth_kbps=1.0, delay_ms=5.0, interval_ms=10.0)
    result, sim = simulate(config, _script([{"from": "a", "to": "b"}, {"from": "a", "to": "b"}]),
                           trace=True)
    assert result.execution_time_ms == pytest.approx(261.0)
    arrivals = [r["ts"] for r in sim.records if r["event"] == "deliver"]
    assert arrivals == pytest.approx([0.133, 0.261])


def test_job_start_and_end_are_timed() -> None:
    config = SimConfig(protocol="none", bandwidth_kbps=1.0, delay_ms=5.0)
    result, _ = simulate(config, _script([{"from": "a", "to": "b", "job_ms": 20}]))
    assert result.jobs == 1
    assert result.avg_job_start_ms == pytest.approx(133.0)
    assert result.execution_time_ms == pytest.approx(153.0)


def test_mfss_ack_round_trip() -> None:
    # message 128 B (no metadata) -> 133 ms; the ACK (64 B + its fields) goes back at once
    config = SimConfig(protocol="mfss", bandwidth_kbps=1.0, delay_ms=5.0)
    result, _ = simulate(config, _script([{"from": "a", "to": "b"}]))
    assert result.control_messages == 1
    ack_bytes = result.wire_bytes_total - 128
    assert ack_bytes == 64 + result.meta_bytes_total
    assert result.execution_time_ms == pytest.approx(133.0 + ack_bytes + 5.0)


def test_mfss_second_message_waits_for_the_ack_cykas_sends_it_eagerly() -> None:
    sends = [{"from": "a", "to": "b"}, {"from": "a", "to": "c"}]
    base = dict(bandwidth_kbps=1000.0, delay_ms=5.0, interval_ms=0.0)
    mfss, msim = simulate(SimConfig(protocol="mfss", **base), _script(sends), trace=True)
    cykas, csim = simulate(SimConfig(protocol="cykas", **base), _script(sends), trace=True)
    at = {r["msg"]: r["ts"] for r in msim.records if r["event"] == "deliver"}
    # the second message leaves a only after the first's ACK came back: > 2 delays
    assert at["a#2"] > 0.015
    assert cykas.eager_messages == 1
    cat = {r["msg"]: r["ts"] for r in csim.records if r["event"] == "deliver"}
    assert cat["a#2"] < 0.006
    assert cykas.execution_time_ms < mfss.execution_time_ms


# -- determinism --------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["cykas", "matrix"])
def test_same_seed_same_result_other_seed_differs(protocol: str) -> None:
    config = SimConfig(protocol=protocol, processes=8, messages_per_process=15,
                       bandwidth_kbps=20.0, interval_ms=2.0, job_fraction=0.2, job_ms=5.0,
                       seed=7)
    first, _ = simulate(config)
    second, _ = simulate(config)
    other, _ = simulate(SimConfig(**{**config.__dict__, "seed": 8}))
    assert _stable(first) == _stable(second)
    assert _stable(first) != _stable(other)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(SimulationError):
        simulate(SimConfig(bandwidth_kbps=0))
    with pytest.raises(SimulationError):
        simulate(SimConfig(protocol="cykas", engine="model"))


# -- traces -------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", CAUSAL)
@pytest.mark.parametrize("jitter", [0.0, 20.0])
def test_causal_modules_write_clean_traces(protocol: str, jitter: float, tmp_path: Path) -> None:
    config = SimConfig(protocol=protocol, processes=6, messages_per_process=12,
                       bandwidth_kbps=20.0, interval_ms=1.0, jitter_ms=jitter,
                       job_fraction=0.2, job_ms=3.0, seed=3)
    result, sim = simulate(config, trace=True)
    assert result.stuck == 0
    assert result.verdict is not None and result.verdict["causal_violations"] == 0
    sim.write_traces(str(tmp_path))
    checked = check_directory(tmp_path)
    assert checked.messages == 72
    assert checked.deliveries == 72
    assert (checked.causal_violations, checked.fifo_violations, checked.undelivered,
            checked.duplicates, checked.malformed_lines) == (0, 0, 0, 0, 0)


@pytest.mark.parametrize("jitter", [0.0, 20.0])
def test_vector_broadcasts_are_delivered_causally(jitter: float, tmp_path: Path) -> None:
    """Vector needs its join handshake (``base`` messages), so the simulated processes
    join one by one; every broadcast then reaches everyone, in causal order."""
    config = SimConfig(protocol="vector", processes=5, messages_per_process=6,
                       broadcast=True, bandwidth_kbps=50.0, interval_ms=1.0,
                       jitter_ms=jitter, seed=2)
    result, sim = simulate(config, trace=True)
    assert result.stuck == 0
    assert result.deliveries == 5 * 6 * 4
    sim.write_traces(str(tmp_path))
    checked = check_directory(tmp_path)
    assert (checked.causal_violations, checked.undelivered, checked.duplicates) == (0, 0, 0)


def test_none_violates_causality_under_jitter(tmp_path: Path) -> None:
    config = SimConfig(protocol="none", processes=6, messages_per_process=20,
                       bandwidth_kbps=1000.0, interval_ms=1.0, jitter_ms=30.0, seed=1)
    result, sim = simulate(config, trace=True)
    sim.write_traces(str(tmp_path))
    checked = check_directory(tmp_path)
    assert checked.causal_violations > 0
    assert result.verdict is not None
    assert result.verdict["causal_violations"] == checked.causal_violations


@pytest.mark.slow  # about a minute: a JVM starts (run with -m slow)
def test_spark_analysis_of_a_simulated_trace(tmp_path: Path) -> None:
    from trace_analysis.session import java_command

    if java_command() is None:
        pytest.skip("Spark needs Java")
    _, sim = simulate(SimConfig(protocol="cykas", processes=5, messages_per_process=8,
                                jitter_ms=10.0, seed=2), trace=True)
    sim.write_traces(str(tmp_path / "t"))
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "analyze", str(tmp_path / "t"), "--json", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    text = json.dumps(result)
    assert '"causal_violations": 0' in text
    assert '"fifo_violations": 0' in text
    assert '"messages": 40' in text


# -- the matrix model against the real module ---------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("bandwidth", [5.0, 1000.0])
def test_matrix_model_matches_real_module(seed: int, bandwidth: float) -> None:
    config = SimConfig(protocol="matrix", processes=7, messages_per_process=10,
                       bandwidth_kbps=bandwidth, interval_ms=1.0, job_fraction=0.3, job_ms=4.0,
                       hotspot_share=0.2 if seed == 2 else 0.0, seed=seed)
    real, real_sim = simulate(SimConfig(**{**config.__dict__, "engine": "real"}), trace=True)
    model, model_sim = simulate(SimConfig(**{**config.__dict__, "engine": "model"}), trace=True)
    assert (real.engine, model.engine) == ("real", "model")
    assert model.execution_time_ms == pytest.approx(real.execution_time_ms, abs=1e-9)
    assert model.avg_job_start_ms == pytest.approx(real.avg_job_start_ms, abs=1e-9)
    assert model.meta_bytes_total == real.meta_bytes_total
    assert model.wire_bytes_total == real.wire_bytes_total
    assert _deliveries(model_sim) == _deliveries(real_sim)
    assert model.verdict == real.verdict


# -- matrix-delta -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_matrix_delta_delivers_like_matrix_in_any_arrival_order(seed: int) -> None:
    names = [f"p{i}" for i in range(5)]
    outcome = {}
    for module in ("matrix", "matrix-delta"):
        net = LocalNetwork(names, module)
        rng = random.Random(seed)
        for k in range(40):
            sender = rng.choice(names)
            pool = [n for n in names if n != sender] + ([sender] if rng.random() < 0.1 else [])
            net.send(sender, k, rng.sample(pool, rng.choice([1, 1, 2])))
            for _ in range(rng.randint(0, 3)):
                if net.in_flight:
                    net.deliver(rng.randrange(len(net.in_flight)))  # links not FIFO
        net.run(rng)
        meta = sum(r["meta_bytes"] for r in net.records if r["event"] == "network_send")
        outcome[module] = ([net.delivered_payloads(n) for n in names], meta)
    assert outcome["matrix-delta"][0] == outcome["matrix"][0]
    assert outcome["matrix-delta"][1] < outcome["matrix"][1]


def test_matrix_delta_is_smaller_and_same_delivery_sets_in_the_simulator() -> None:
    config = SimConfig(processes=8, messages_per_process=30, bandwidth_kbps=50.0,
                       interval_ms=2.0, seed=4)
    full, full_sim = simulate(SimConfig(**{**config.__dict__, "protocol": "matrix"}), trace=True)
    delta, delta_sim = simulate(SimConfig(**{**config.__dict__, "protocol": "matrix-delta"}),
                                trace=True)
    assert delta.verdict is not None and delta.verdict["causal_violations"] == 0
    assert delta.deliveries == full.deliveries == 240
    assert delta.meta_bytes_total < 0.8 * full.meta_bytes_total
    assert delta.execution_time_ms < full.execution_time_ms
    assert {p: sorted(m) for p, m in _deliveries(delta_sim).items()} == {
        p: sorted(m) for p, m in _deliveries(full_sim).items()}


def test_matrix_delta_same_order_when_frame_sizes_do_not_matter() -> None:
    # a huge bandwidth: timings are set by the delays alone, so the runs coincide
    sends = [{"from": "a", "to": "c", "id": "m1"}, {"from": "a", "to": "b", "id": "m2"},
             {"from": "b", "to": "c", "id": "m3", "after": ["m2"]},
             {"from": "c", "to": ["a", "b"], "id": "m4", "after": ["m1"]}]
    data = {"sends": sends, "links": {"a->c": 40}}
    orders = {}
    for protocol in ("matrix", "matrix-delta"):
        config = SimConfig(protocol=protocol, bandwidth_kbps=1e9, delay_ms=5.0, interval_ms=0.0)
        result, sim = simulate(config, script_from_dict(data), trace=True)
        assert result.stuck == 0
        orders[protocol] = _deliveries(sim)
    assert orders["matrix-delta"] == orders["matrix"]
    assert orders["matrix"]["c"] == ["a#1", "b#1"]  # m3 waited for m1 (the slow link)


def test_filters_import_no_io() -> None:
    source = (ROOT / "filters" / "matrix_delta.py").read_text()
    for name in ("zmq", "threading", "time", "random", "socket"):
        assert f"import {name}" not in source


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_run_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = sim_main(["run", "--protocol", "cykas", "--processes", "5", "--bandwidth-kbps", "50",
                     "--delay-ms", "5", "--messages-per-process", "10", "--interval-ms", "1",
                     "--job-fraction", "0.1", "--job-ms", "5", "--hotspot-share", "0",
                     "--seed", "3", "--json", "--check"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("execution_time_ms", "avg_job_start_ms", "app_messages", "control_messages",
                "meta_bytes_total", "deliveries"):
        assert key in data
    assert data["deliveries"] == 50
    assert data["verdict"]["causal_violations"] == 0


def test_cli_run_script_and_trace_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"sends": [{"from": "a", "to": "b"},
                                            {"from": "b", "to": "a"}]}))
    code = sim_main(["run", "--protocol", "matrix", "--script", str(script), "--bandwidth-kbps",
                     "1", "--trace-dir", str(tmp_path / "t")])
    assert code == 0
    assert "execution_time_ms" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["a.jsonl", "b.jsonl"]


@pytest.mark.parametrize("argv", [
    ["run", "--protocol", "nope"],
    ["run", "--processes", "zero"],
    ["run", "--processes", "0"],
    ["run", "--bandwidth-kbps", "-5"],
    ["run", "--job-fraction", "2"],
    ["run", "--engine", "model", "--protocol", "cykas"],
    ["run", "--script", "/nonexistent/script.json"],
    ["run", "--protocol", "vector", "--processes", "3", "--messages-per-process", "1"],
    ["figure", "7"],
    ["figure", "4", "--master", "local[1]"],
    [],
])
def test_cli_bad_arguments_give_one_line_exit_2(argv: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1, err


# -- figures ------------------------------------------------------------------------------------
def test_tiny_figure_4_writes_csv_and_png(tmp_path: Path) -> None:
    info = figures.run_figure(4, tmp_path, scale="tiny")
    assert info["completed"] and info["done"] == info["runs"] == 16
    rows = Path(info["csv"]).read_text().splitlines()
    assert rows[0].startswith("figure,scenario,protocol")
    assert len(rows) == 17
    png = Path(info["png"]).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(info["crossover"]) == {"matrix", "matrix-delta"}


@pytest.mark.parametrize("figure", [5, 6])
def test_tiny_figures_5_and_6_via_cli(figure: int, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["figure", str(figure), "--tiny", "--out", str(tmp_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["completed"]
    summary = Path(info["summary_csv"]).read_text().splitlines()
    assert "exec_speedup" in summary[0] and len(summary) == 5
    assert (tmp_path / f"figure{figure}.png").stat().st_size > 1000


def test_grid_sizes() -> None:
    full4 = figures.grid(4)
    assert len(full4) == 5 * 4 * 3 + 4 * 4  # matrix-delta up to 200 processes
    assert {r["processes"] for r in full4} == {25, 50, 100, 200, 500}
    assert len(figures.grid(5)) == 4 * 5 * 3 * 2
    assert len(figures.grid(6)) == 2 * 4 * 3 * 2
    with pytest.raises(figures.FigureError):
        figures.grid(7)


def test_crossover_helper() -> None:
    rows = []
    for n, bw, times in [(10, 1000, (1, 2, 2)), (10, 100, (3, 2, 2)), (10, 20, (9, 3, 3))]:
        for protocol, t in zip(("matrix", "mfss", "cykas"), times, strict=True):
            rows.append({"processes": n, "bandwidth_kbps": bw, "protocol": protocol,
                         "execution_time_ms": t, "meta_bytes_total": 0})
    cross = figures.crossover(rows)
    assert cross["last_win"] == pytest.approx(0.01)
    assert cross["first_loss"] == pytest.approx(0.1)
    assert cross["estimate"] == pytest.approx((0.01 * 0.1) ** 0.5)


@pytest.mark.slow  # a JVM starts (run with -m slow)
def test_tiny_figure_as_spark_tasks(tmp_path: Path) -> None:
    from trace_analysis.session import java_command

    if java_command() is None:
        pytest.skip("Spark needs Java")
    done = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "simulate", "figure", "6", "--tiny", "--spark",
         "--out", str(tmp_path), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["completed"] and info["done"] == info["runs"] == 8
    local = figures.run_figure(6, tmp_path / "local", scale="tiny")
    # same runs, same virtual results (only wall-clock columns differ)
    assert virtual_results(Path(info["csv"])) == virtual_results(Path(local["csv"]))


def test_matrix_delta_under_the_model_checker() -> None:
    # every interleaving over unordered (non-FIFO) links: 3 processes, 1 send each in full,
    # 2 sends each up to a state bound (the full space, ~190,000 states, is checked in the
    # report: groupcomm check --protocol matrix-delta --processes 3 --messages 2)
    from groupcomm.check import CheckConfig, check

    assert check(CheckConfig(protocol="matrix-delta", processes=3, messages=1)).result == "ok"
    bounded = check(CheckConfig(protocol="matrix-delta", processes=3, messages=2,
                                max_states=15_000))
    assert bounded.property is None, bounded.detail
    assert bounded.states >= 15_000
