"""Each experiment script runs end to end with a tiny budget and writes its study dirs and summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ecopt

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
                "payback_tokens", "baseline_tokens_per_joule", "evals_to_95pct_of_grid_best",
                "best_decode_tokens_per_joule", "best_prefill_j_per_prompt",
                "best_decode_window_s", "tokens_for_search_energy", "within_5pct_of_grid_best"):
        assert key in opt, key
    assert opt["search_energy_j"] > 0
    # The optimiser's own cost and what it spent to reach the grid's best (issue 38 item 4):
    # trials + metered proposals in trial order, read back from the study's own log.
    recs = ecopt.load_study(out / "optimiser").records
    props = sum(r.proposal["search"]["energy_j"] for r in recs
                if r.proposal and "search" in r.proposal)
    assert opt["proposals_energy_j"] == pytest.approx(props)
    assert opt["proposals_share_of_trials"] == pytest.approx(props / opt["search_energy_j"])
    if opt["energy_to_grid_best_j"] is not None:
        assert 0 < opt["energy_to_grid_best_j"] <= opt["search_energy_j"] + props + 1e-9
    else:
        assert opt["best_fraction_of_grid_best"] < 0.95
    assert opt["tokens_for_search_energy"] == pytest.approx(opt["search_energy_j"]
                                                            * opt["best_tokens_per_joule"])
    assert grid["best_batch"] < 4096 and opt["smallest_infeasible_batch"] in (None, 4096)
    for key in ("script", "command", "git_commit", "versions", "machine", "energy"):
        assert key in facts, key  # the recorded-run header
    assert facts["energy"]["measured"] is False and facts["device"] == "cpu"
    # Every table of the summary is kept cell for cell, for docs to copy.
    tables = facts["tables"]
    assert set(tables) == {"result", "optimiser_trials", "grid_trials"}
    md = (out / "summary.md").read_text()
    for row in tables["optimiser_trials"]["rows"]:
        assert "| " + " | ".join(row) + " |" in md
    trials = _is_study(out / "optimiser")
    assert trials[0]["params"] == {"batch_size": 1} and trials[0]["proposed_by"] == "user"
    _is_study(out / "grid")
    text = (out / "summary.md").read_text()
    for needle in ("best batch", "ratio best / batch 1", "payback", "grid evaluations",
                   "ESTIMATED", "command: `python experiments/gemma_batch.py",
                   "payback the other way", "decode tokens/J", "prefill J per prompt",
                   "that / the grid's energy", "their share of its trials' energy"):
        assert needle in text, needle



def test_gemma_batch_transfer_from_an_earlier_run(script, tmp_path):
    """--transfer-from: a smaller model's run warms this one (issue 25 item 4)."""
    small = ["--hidden", "32", "--vocab", "128", "--layers", "1", "--max-new-tokens", "4",
             "--prompt-len", "4", "--min-window-s", "0", "--max-batch", "256",
             "--max-memory-gb", "0.01", "--no-grid", "--n-init", "1"]
    src = tmp_path / "small"
    assert script("gemma_batch").main([*COMMON, "--out", str(src), "--trials", "4",
                                       *small]) == 0
    out = tmp_path / "warm"
    assert script("gemma_batch").main([*COMMON, "--out", str(out), "--trials", "3",
                                       *small[:1], "48", *small[2:],
                                       "--transfer-from", str(src)]) == 0
    opt = _facts(out)["optimiser"]
    assert opt["transfer_from"][0]["path"] == str(src / "optimiser")
    assert opt["transfer_from"][0]["trials_used"] >= 1
    # Batch 1 is the user's baseline; the next proposals come from the source's front.
    assert opt["proposed_by"].get("transfer", 0) >= 1 and opt["evaluations"] == 3
    assert "Warm start: the optimiser learned from" in (out / "summary.md").read_text()
    assert len(ecopt.load_study(out / "optimiser").records) == 3  # none of the source's
    with pytest.raises(SystemExit, match="neither a gemma_batch run"):
        script("gemma_batch").main([*COMMON, "--out", str(tmp_path / "x"),
                                    "--transfer-from", str(tmp_path)])
    with pytest.raises(SystemExit, match="needs --sampler qlognehvi"):
        script("gemma_batch").main([*COMMON, "--out", str(tmp_path / "x"), "--sampler",
                                    "random", "--transfer-from", str(src)])

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
        # Each trial reported its learning curve: one point per epoch (--epochs 1).
        recs = ecopt.load_study(out / m).records
        assert all([p.step for p in r.intermediate] == [1] for r in recs)
        assert all(r.intermediate[-1].values["accuracy"] == r.values["accuracy"] for r in recs)
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


QUICK = {"gemma_batch": [], "nas_cnn": ["--methods", "random"], "metric_validity": [],
         "energy_scaling": [], "consistency": []}


@pytest.mark.parametrize("name", list(QUICK))
def test_quick_path_on_the_cpu_device(name, script, tmp_path):
    out = tmp_path / name
    assert script(name).main([*COMMON, "--quick", "--device", "cpu", "--out", str(out),
                              *QUICK[name]]) == 0
    facts = _facts(out)
    assert facts["command"].startswith(f"python experiments/{name}.py")
    trials = [t for d in out.iterdir() if (d / "trials.jsonl").exists() for t in _is_study(d)]
    assert trials and all(t["user_attrs"].get("device") == "cpu" for t in trials
                          if t["state"] == "complete")
    assert all(t["metrics"].get("peak_host_rss_gb", 0) > 0 for t in trials
               if t["state"] == "complete")


@pytest.mark.parametrize("name", ["gemma_batch", "nas_cnn", "metric_validity", "energy_scaling",
                                  "consistency"])
def test_cuda_without_a_gpu_stops_before_anything_runs(name, script, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / name
    with pytest.raises(SystemExit, match="cuda"):
        script(name).main([*COMMON, "--device", "cuda", "--out", str(out)])
    assert not any(out.glob("*/trials.jsonl")) if out.exists() else True


def test_nas_cnn_reads_cifar10_batches(script, tmp_path):
    import pickle

    import numpy as np

    root = tmp_path / "cifar" / "cifar-10-batches-py"
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, n in (("data_batch_1", 24), ("data_batch_2", 24), ("test_batch", 16)):
        with open(root / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         b"labels": [int(v) for v in rng.integers(0, 10, n)]}, f)
    out = tmp_path / "nas"
    assert script("nas_cnn").main([*COMMON, "--quick", "--device", "cpu", "--methods", "random",
                                   "--no-hand", "--cifar10", str(tmp_path / "cifar"),
                                   "--out", str(out)]) == 0
    facts = _facts(out)
    assert facts["default_data"] is False and "CIFAR-10" in facts["data"]
    assert "(48 train / 16 test images)" in facts["data"]
    trials = _is_study(out / "random")
    assert trials[0]["user_attrs"]["data"].startswith("CIFAR-10 python batches")
    text = (out / "summary.md").read_text()
    assert "on CIFAR-10" in text and "NOT CIFAR-10" not in text


def test_nas_cnn_resumes_to_the_budget_and_stops_on_time(script, tmp_path):
    out = tmp_path / "nas"
    args = [*COMMON, "--quick", "--device", "cpu", "--methods", "random", "--no-hand",
            "--out", str(out)]
    nas = script("nas_cnn")
    assert nas.main([*args, "--trials", "1"]) == 0 and len(_is_study(out / "random")) == 1
    assert nas.main([*args, "--trials", "3"]) == 0 and len(_is_study(out / "random")) == 3
    # A budget already spent: no new trial, the summary says why.
    assert nas.main([*args, "--trials", "5", "--time-budget-s", "1e-9"]) == 0
    assert len(_is_study(out / "random")) == 3
    assert "stopped early" in (out / "summary.md").read_text()
    assert "random stopped after 0 of 2 trials" in _facts(out)["stopped_early"]
