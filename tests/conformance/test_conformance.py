"""``groupcomm conformance``: the example plugin's module passes and its known-bad
variant fails with a counterexample; the built-ins behave as their flags declare (every
one, fully, under ``-m slow``; ``matrix`` and a known-bad one quickly by default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groupcomm.check.renaming import SymmetryError, declared_headers
from groupcomm.conformance import CHECKS, Declared, assert_conformant, run_conformance
from groupcomm.conformance.cli import main
from groupcomm.core.registry import available_modules, get_module
from groupcomm.filters.none import NoneModule
from tests.conformance.conftest import run_with


def test_the_ses_plugin_passes_and_its_known_bad_variant_fails(ses_site: Path) -> None:
    done = run_with(ses_site, "-m", "groupcomm.cli", "conformance", "ses", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "result: conformant" in done.stdout
    assert "fail" not in done.stdout.split()
    done = run_with(ses_site, "-m", "groupcomm.cli", "conformance", "ses-forgets-pairs",
                    "--quick", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["known_bad"] and not report["passed"] and report["as_declared"]
    failed = {c["check"]: c for c in report["checks"] if c["status"] == "fail"}
    assert {"random-executions", "cause-before-effect"} <= set(failed)
    assert any("causally follows" in step or "delivers" in step
               for step in failed["cause-before-effect"]["counterexample"])


def test_the_plugin_is_listed_with_its_flags(ses_site: Path) -> None:
    done = run_with(ses_site, "-m", "groupcomm.cli", "filters", "--json")
    assert done.returncode == 0, done.stderr
    modules = {m["name"]: m for m in json.loads(done.stdout)["causality_modules"]}
    assert modules["ses"]["origin"] == "groupcomm-ses-plugin 0.1.0"
    assert modules["ses"]["flags"] == ["symmetry"]
    assert modules["ses-forgets-pairs"]["flags"] == ["known-bad", "symmetry"]


def test_matrix_passes_every_quick_check_in_process() -> None:
    seen = []
    report = assert_conformant("matrix", quick=True, progress=seen.append)
    assert [o.check for o in report.outcomes] == list(CHECKS)
    assert seen == report.outcomes
    assert {o.status for o in report.outcomes} == {"pass", "n/a"}
    assert {o.check for o in report.outcomes if o.status == "n/a"} == {"stress",
                                                                        "trace-analysis"}


def test_a_known_bad_builtin_is_caught_with_a_counterexample(capsys) -> None:
    assert main(["scalar-id", "--quick", "--only", "random-executions",
                 "--only", "model-check"]) == 0
    out = capsys.readouterr().out
    assert out.count("fail ") == 2 and "counterexample:" in out
    assert "result: known-bad, caught with a counterexample (as declared)" in out


def test_checks_that_do_not_apply_say_which_flag(capsys) -> None:
    report = run_conformance("mfss", quick=True, only=["replicated-convergence"])
    (outcome,) = report.outcomes
    assert outcome.status == "n/a" and "one unicast per destination" in outcome.detail
    report = run_conformance("none", quick=True, only=["cause-before-effect",
                                                       "random-executions"])
    assert [o.status for o in report.outcomes] == ["pass", "n/a"]
    assert "arrival order" in report.outcomes[1].detail


def test_bad_arguments_are_one_line(capsys) -> None:
    assert main(["no-such-module"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown causality module 'no-such-module'" in err
    assert main(["matrix", "--only", "everything"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown check"):
        run_conformance("matrix", only=["everything"])


def test_a_module_may_supply_its_own_header_renamer() -> None:
    def rename_pair(value, rename):
        return (rename(value[0]), value[1])

    class Renaming(NoneModule):
        name = "renaming"
        symmetry_headers = {"x": rename_pair, "n": "int"}

    renamers = declared_headers(Renaming())
    assert renamers["x"](("p1", 3), {"p1": "p2"}.__getitem__) == ("p2", 3)

    class Unknown(NoneModule):
        name = "unknown-kind"
        symmetry_headers = {"x": "pair"}

    with pytest.raises(SymmetryError, match="declares header 'x' of kind 'pair'"):
        declared_headers(Unknown())


def test_declared_flags_come_from_the_class_not_the_name() -> None:
    flags = Declared.of(get_module("vector"))
    assert flags.broadcast_only and flags.order == "causal" and not flags.known_bad
    assert Declared.of(get_module("fifo")).order == "fifo"
    assert Declared.of(get_module("cykas")).sender_side


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(available_modules()))
def test_every_installed_module_behaves_as_it_declares(module: str) -> None:
    assert_conformant(module)


@pytest.mark.slow
def test_a_stress_run_with_drops_and_churn(tmp_path: Path) -> None:
    report = run_conformance("matrix", only=["stress"], stress=True,
                             trace_dir=tmp_path / "traces")
    (outcome,) = report.outcomes
    assert outcome.status == "pass", (outcome.detail, outcome.counterexample)
    assert list((tmp_path / "traces").glob("*.jsonl"))
