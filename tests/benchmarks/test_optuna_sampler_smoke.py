"""Smoke test of benchmarks/optuna_sampler.py: shapes, shared design, a readable record."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("optuna")

from benchmarks import optuna_sampler  # noqa: E402
from benchmarks.mobo import initial_design  # noqa: E402
from benchmarks.problems import make_problem  # noqa: E402
from docs.recorded import read_run  # noqa: E402


@pytest.mark.slow
def test_runs_every_sampler_inside_optuna_and_records(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    methods = ["optuna-ecopt", "optuna-tpe"]
    try:
        import optuna_integration  # noqa: F401
        methods.append("optuna-botorch")
    except ImportError:
        pass
    monkeypatch.chdir(tmp_path)
    argv = ["--problems", "branincurrin", "--methods", ",".join(methods), "--seeds", "1",
            "--budget", "8", "--out", str(tmp_path / "out"), "--record", "t"]
    assert optuna_sampler.main(argv) == 0
    runs = [json.loads(line) for line in (tmp_path / "out" / "runs-main.jsonl").read_text()
            .splitlines()]
    assert sorted(r["method"] for r in runs) == sorted(methods)
    design = initial_design(make_problem("branincurrin"), 0)
    for r in runs:
        assert r["params"][:6] == design  # every method starts from the same Sobol points
        hv = np.asarray(r["hv"])
        assert hv.shape == (8,) and np.all(np.diff(hv) >= -1e-12)
        assert len(r["ask_s"]) == len(r["ask_cpu_s"]) == 2
    (run_dir,) = (tmp_path / "docs" / "results" / "optuna_sampler").iterdir()
    rec = read_run(run_dir)
    assert rec.script == "benchmarks/optuna_sampler.py" and rec.energy is None
    table = rec.tables["branincurrin"]
    assert table.columns[-1] == "ask CPU s" and len(table.rows) == len(methods)


@pytest.mark.slow
def test_the_user_protocol_runs_optimize_on_sqlite_beside_an_ecopt_study(
        tmp_path: Path) -> None:
    methods = ["optuna-ecopt", "ecopt-study", "optuna-tpe"]
    argv = ["--protocol", "user", "--problems", "branincurrin", "--methods", ",".join(methods),
            "--seeds", "1", "--budget", "7", "--out", str(tmp_path / "out")]
    assert optuna_sampler.main(argv) == 0
    runs = {r["method"]: r for r in map(json.loads, (tmp_path / "out" / "runs-main.jsonl")
                                        .read_text().splitlines())}
    assert sorted(runs) == sorted(methods)
    for r in runs.values():
        assert r["protocol"] == "user" and len(r["params"]) == len(r["hv"]) == 7
        assert len(r["ask_cpu_s"]) == 7 - 7 // 2 and all(s >= 0 for s in r["ask_cpu_s"])
    # Both start from the same Sobol points (a 7-trial ecopt.Study then caps its design at 3,
    # a third of its planned trials: Optuna's sampler is not told the plan).
    assert runs["optuna-ecopt"]["params"][:3] == runs["ecopt-study"]["params"][:3]
    assert runs["optuna-tpe"]["params"] != runs["optuna-ecopt"]["params"]
    assert "optuna-ecopt / ecopt-study (mean final HV): branincurrin " in (
        tmp_path / "out" / "report.md").read_text()
