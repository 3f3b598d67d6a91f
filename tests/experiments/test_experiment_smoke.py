"""Each experiment script runs end to end with a tiny budget and writes its study dirs and summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

pytestmark = pytest.mark.slow

COMMON = ["--quiet", "--meter", "estimate"]


@pytest.fixture(autouse=True)
def _restore_logging():
    """The scripts quieten ecopt's and transformers' loggers; give other tests theirs back."""
    import logging

    ecopt_level = logging.getLogger("ecopt").level
    hf = logging.getLogger("transformers")
    hf_level = hf.level
    yield
    logging.getLogger("ecopt").setLevel(ecopt_level)
    hf.setLevel(hf_level)


def _facts(out):
    assert (out / "summary.md").exists()
    return json.loads((out / "summary.json").read_text())


def _is_study(path):
    assert (path / "study.json").exists() and (path / "trials.jsonl").exists(), path
    return [json.loads(line) for line in (path / "trials.jsonl").read_text().splitlines()]


def test_gemma_batch_smoke(script, tmp_path):
    out = tmp_path / "gb"
    rc = script("gemma_batch").main([
        *COMMON, "--out", str(out), "--trials", "3", "--n-init", "1", "--grid", "1,8,4096",
        "--hidden", "32", "--vocab", "128", "--layers", "1", "--max-new-tokens", "4",
        "--prompt-len", "4", "--min-window-s", "0", "--max-batch", "4096",
        "--max-memory-gb", "0.01"])
    assert rc == 0
    facts = _facts(out)
    opt, grid = facts["optimiser"], facts["grid"]
    assert opt["evaluations"] == 3 and grid["evaluations"] == 3
    assert grid["infeasible"] == 1  # batch 4096 is over the emulated 10 MB ceiling
    for key in ("best_batch", "best_tokens_per_joule", "ratio_to_batch1", "search_energy_j",
                "payback_tokens", "baseline_tokens_per_joule", "evals_to_95pct_of_grid_best"):
        assert key in opt, key
    assert opt["search_energy_j"] > 0
    trials = _is_study(out / "optimiser")
    assert trials[0]["params"] == {"batch_size": 1} and trials[0]["proposed_by"] == "user"
    _is_study(out / "grid")
    text = (out / "summary.md").read_text()
    for needle in ("best batch", "ratio best / batch 1", "payback", "grid evaluations",
                   "ESTIMATED", "command: `python experiments/gemma_batch.py"):
        assert needle in text, needle


def test_gemma_batch_grid_mode(script, tmp_path):
    out = tmp_path / "gbg"
    rc = script("gemma_batch").main([
        *COMMON, "--out", str(out), "--sampler", "grid", "--grid", "1,4", "--hidden", "32",
        "--vocab", "64", "--layers", "1", "--max-new-tokens", "3", "--prompt-len", "2",
        "--min-window-s", "0"])
    assert rc == 0
    facts = _facts(out)
    assert "optimiser" not in facts and not (out / "optimiser").exists()
    assert facts["search"]["evaluations"] == 2 and facts["search"]["ratio_to_batch1"] > 0
    assert "payback_tokens" in facts["search"] and len(_is_study(out / "grid")) == 2


def test_nas_cnn_smoke(script, tmp_path):
    out = tmp_path / "nas"
    rc = script("nas_cnn").main([*COMMON, "--out", str(out), "--trials", "2", "--n-init", "2",
                                 "--epochs", "1", "--inference-passes", "1"])
    assert rc == 0
    facts = _facts(out)
    for m in ("qlognehvi", "random"):
        c = facts["methods"][m]
        assert c["n_pareto"] >= 1 and 0 < c["best_accuracy"] <= 1
        assert "hypervolume" in c and "samples_per_joule_at_matched" in c
        assert len(_is_study(out / m)) == 2
    assert facts["hand_tuned"]["accuracy"] > 0
    text = (out / "summary.md").read_text()
    assert "Pareto-optimal" in text and "hypervolume" in text and "Hand-tuned" in text


def test_metric_validity_smoke(script, tmp_path):
    out = tmp_path / "mv"
    rc = script("metric_validity").main([*COMMON, "--out", str(out), "--channels", "4,8",
                                         "--depths", "1", "--strides", "1,2",
                                         "--image-size", "16", "--batch", "4",
                                         "--min-window-s", "0"])
    assert rc == 0
    facts = _facts(out)
    assert facts["n_models"] == 4 and len(_is_study(out / "study")) == 4
    for proxy in ("params", "flops"):
        assert set(facts["correlations"][proxy]) >= {"spearman", "pearson"}
    assert (out / "metric_validity.png").stat().st_size > 0
    assert len(facts["stride_pairs"]) == 2
    # A re-run resumes the finished grid (no new trials); --overwrite keeps the old study aside.
    mv = script("metric_validity")
    args = [*COMMON, "--out", str(out), "--channels", "4,8", "--depths", "1", "--strides",
            "1,2", "--image-size", "16", "--batch", "4", "--min-window-s", "0", "--no-plot"]
    assert mv.main(args) == 0 and len(_is_study(out / "study")) == 4
    assert mv.main([*args, "--overwrite"]) == 0
    old = [p for p in out.iterdir() if p.name.startswith("study.old-")]
    assert len(old) == 1 and len(_is_study(old[0])) == 4
    assert len(_is_study(out / "study")) == 4


def test_energy_scaling_smoke(script, tmp_path):
    out = tmp_path / "es"
    rc = script("energy_scaling").main([*COMMON, "--out", str(out), "--sizes",
                                        "16x1,32x1,64x1", "--vocab", "64", "--batch", "2",
                                        "--max-new-tokens", "3", "--prompt-len", "2",
                                        "--min-window-s", "0"])
    assert rc == 0
    facts = _facts(out)
    assert set(facts["fit"]) >= {"slope", "intercept", "r2"} and len(facts["configs"]) == 3
    assert (out / "energy_scaling.png").exists() and len(_is_study(out / "study")) == 3


def test_consistency_smoke(script, tmp_path):
    out = tmp_path / "co"
    rc = script("consistency").main([*COMMON, "--out", str(out), "--devices", "cpu:1t,cpu",
                                     "--sizes", "16x1,32x1,64x1", "--vocab", "64", "--batch",
                                     "2", "--max-new-tokens", "3", "--min-window-s", "0"])
    assert rc == 0
    facts = _facts(out)
    s = facts["spread"]
    assert s["devices"] == ["cpu:1t", "cpu"] and len(s["models"]) == 3
    assert s["std_across_models_log10"] > 0 and "cpu:1t vs cpu" in s["spearman"]
    assert len(_is_study(out / "cpu_1t")) == 3 and len(_is_study(out / "cpu")) == 3
    assert "SAME CPU" in (out / "summary.md").read_text()


@pytest.mark.parametrize("name", ["gemma_batch", "nas_cnn", "metric_validity",
                                  "energy_scaling", "consistency"])
def test_help_runs_from_a_clean_process(name):
    res = subprocess.run([sys.executable, str(EXPERIMENTS / f"{name}.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "--out" in res.stdout and "--meter" in res.stdout
