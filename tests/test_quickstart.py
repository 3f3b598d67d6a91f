"""The README's main job, `ecopt quickstart`, end to end (small budget)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ecopt
from ecopt.workloads.classifier import ClassifierObjective, build_mlp, count_parameters


def test_mlp_builder_and_objective_phases():
    m = build_mlp(64, 10, width=16, depth=2)
    assert count_parameters(m) == 64 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10
    with pytest.raises(ValueError, match="width >= 1 must hold"):
        build_mlp(64, 10, width=0, depth=1)
    s = ecopt.Study(ecopt.SearchSpace({"width": ecopt.Int(8, 32), "epochs": ecopt.Fixed(2)}),
                    [ecopt.Objective("accuracy"), ecopt.Objective("samples_per_joule")],
                    sampler="random", meter="estimate")
    s.optimize(ClassifierObjective(inference_passes=2, inference_min_s=0.0), n_trials=1)
    r = s.records[0]
    assert r.state is ecopt.TrialState.COMPLETE, r.error
    assert set(r.phases) == {"load", "train", "warmup", "inference"}
    assert r.phases["inference"].samples == 2 * 360 and r.metrics["inference_passes"] == 2
    assert r.values["accuracy"] > 0.5  # digits is easy: even 2 epochs learn it
    assert r.values["samples_per_joule"] == pytest.approx(720 / r.phases["inference"].energy_j)


def test_the_inference_window_lasts_long_enough_to_measure():
    # A timed warm-up pass sets the passes, so the inference window is >= inference_min_s.
    s = ecopt.Study(ecopt.SearchSpace({"width": ecopt.Int(8, 16), "epochs": ecopt.Fixed(1)}),
                    [ecopt.Objective("accuracy"), ecopt.Objective("samples_per_joule")],
                    sampler="random", meter="estimate")
    s.optimize(ClassifierObjective(inference_passes=1, inference_min_s=0.2), n_trials=1)
    r = s.records[0]
    passes = r.metrics["inference_passes"]
    assert passes > 1 and r.phases["inference"].samples == passes * 360
    assert r.phases["warmup"].samples == 2 * 360


@pytest.mark.slow
def test_quickstart_cli_end_to_end(tmp_path):
    out = tmp_path / "qs"
    p = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "7",
                        "--epochs", "2", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "Pareto front" in p.stdout and "ESTIMATED" in p.stdout
    assert "estimate-cpu-time" in p.stdout
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 7
    recs = [json.loads(x) for x in lines]
    assert [r["proposed_by"] for r in recs][:7].count("sobol") == 7  # 2*(d+1) = 10 initial
    study = ecopt.load_study(out)
    assert len(study.pareto_front()) >= 1
    # Re-running resumes the same directory: numbering continues.
    p2 = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "1",
                         "--epochs", "2", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    assert p2.returncode == 0, p2.stderr
    assert len(ecopt.load_study(out).records) == 8
    # A different space in the same directory is a clear error, exit status 2.
    p3 = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "1",
                         "--epochs", "3", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    assert p3.returncode == 2 and "different space" in p3.stderr and "Traceback" not in p3.stderr
