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
    assert set(r.phases) == {"load", "train", "validate", "warmup", "inference"}
    assert r.phases["inference"].samples == 2 * 360 and r.metrics["inference_passes"] == 2
    assert r.values["accuracy"] > 0.5  # digits is easy: even 2 epochs learn it
    assert r.values["samples_per_joule"] == pytest.approx(720 / r.phases["inference"].energy_j)
    # The learning curve: one report per epoch, the last one the final accuracy.
    assert [p.step for p in r.intermediate] == [1, 2]
    assert r.intermediate[-1].values["accuracy"] == pytest.approx(r.values["accuracy"])
    assert all(p.values["train_loss"] > 0 and p.values["samples_per_joule"] > 0
               for p in r.intermediate)
    assert r.intermediate[0].energy_j < r.intermediate[1].energy_j  # joules so far, growing
    assert r.phases["train"].samples == 2 * (1797 - 360) and r.phases["validate"].samples == 720


def test_classifier_curve_is_pruned_and_off_switch(fixed_joules_meter):
    s = ecopt.Study(ecopt.SearchSpace({"width": ecopt.Fixed(16), "epochs": ecopt.Fixed(6)}),
                    [ecopt.Objective("accuracy"), ecopt.Objective("samples_per_joule")],
                    sampler="random", meter=fixed_joules_meter(),
                    pruner=ecopt.pruners.HyperbandPruner(max_resource=6, n_warmup_trials=0,
                                                         min_trials_at_rung=1, brackets=1))
    obj = ClassifierObjective(inference_passes=1, inference_min_s=0.0, lr=1e-2)
    s.optimize(obj, n_trials=1, show_progress=False)
    # A second trial that learns nothing (lr tiny) is ranked below the first at a rung.
    s.optimize(ClassifierObjective(inference_passes=1, inference_min_s=0.0, lr=1e-9),
               n_trials=4, show_progress=False)
    pruned = [r for r in s.records if r.state is ecopt.TrialState.PRUNED]
    assert [r.number for r in pruned] == [1, 2, 3, 4]  # at the first rung, epoch 1
    assert all([p.step for p in r.intermediate] == [1] for r in pruned)
    assert s.records[0].state is ecopt.TrialState.COMPLETE and len(s.records[0].intermediate) == 6
    off = ecopt.Study(ecopt.SearchSpace({"epochs": ecopt.Fixed(2)}),
                      [ecopt.Objective("accuracy"), ecopt.Objective("samples_per_joule")],
                      sampler="random", meter="estimate")
    off.optimize(ClassifierObjective(inference_passes=1, inference_min_s=0.0,
                                     report_curve=False), n_trials=1, show_progress=False)
    r = off.records[0]
    assert r.intermediate == () and "validate" not in r.phases


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


def test_a_rerun_resumes_up_to_trials_and_reruns_interrupted_ones(tmp_path):
    from ecopt.quickstart import quickstart_objectives, quickstart_space, run_quickstart, \
        trials_done
    from ecopt.trial import ErrorInfo, TrialOutcome

    out = tmp_path / "qs"
    with ecopt.Study(quickstart_space(1), quickstart_objectives(), storage=out,
                     sampler="random", meter="estimate", seed=0, name="quickstart") as s:
        for t in s.ask(3):
            s.tell(t, {"accuracy": 0.9, "samples_per_joule": 10.0})
        cut = s.ask()  # Ctrl-C during this one: recorded failed, error type Interrupted
        s.tell(cut, outcome=TrialOutcome.of(cut, error=ErrorInfo("Interrupted", "Ctrl-C", "")))
    assert trials_done(ecopt.load_study(out)) == 3
    run_quickstart(out, trials=3, sampler="random", meter="estimate", epochs=1,
                   show_progress=False)
    assert len(ecopt.load_study(out).records) == 4  # all 3 done: nothing ran
    run_quickstart(out, trials=4, sampler="random", meter="estimate", epochs=1,
                   show_progress=False)
    again = ecopt.load_study(out)
    assert len(again.records) == 5 and trials_done(again) == 4  # the interrupted one re-run
    assert again.records[-1].state is ecopt.TrialState.COMPLETE, again.records[-1].error
    with pytest.raises(ValueError, match="trials >= 1 must hold, got 0"):
        run_quickstart(out, trials=0)


@pytest.mark.slow
def test_quickstart_cli_end_to_end(tmp_path):
    out = tmp_path / "qs"
    # Not --quiet, and stderr a pipe: progress comes as one plain line per trial (issue 28:
    # nothing was printed until the end when piped).
    p = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "7",
                        "--epochs", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    progress = [x for x in p.stderr.splitlines() if x.startswith("ecopt quickstart: trial ")]
    assert [x.split(":")[1].split("(")[1].rstrip(")") for x in progress] == \
        [f"{k}/7" for k in range(1, 8)], p.stderr
    assert all("hv=" in x and "(estimated)" in x for x in progress) and "\r" not in p.stderr
    assert "Pareto front" in p.stdout and "ESTIMATED" in p.stdout
    assert "estimate-cpu-time" in p.stdout
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 7
    recs = [json.loads(x) for x in lines]
    # The Sobol design: min(2(d+1), 5) = 5, but at most a third of the 7 trials planned (at least 3).
    assert [r["proposed_by"] for r in recs] == ["sobol"] * 3 + ["qlognehvi"] * 4
    study = ecopt.load_study(out)
    assert len(study.pareto_front()) >= 1
    assert all([p.step for p in r.intermediate] == [1, 2] for r in study.records)  # per epoch
    # Re-running the same command resumes: the study has its 7 trials, nothing more runs
    # (issue 28: it added --trials more each time); a larger --trials extends it.
    p2 = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "7",
                         "--epochs", "2", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    assert p2.returncode == 0, p2.stderr
    assert "nothing to run" in p2.stderr and "Pareto front" in p2.stdout
    assert len(ecopt.load_study(out).records) == 7
    p2 = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "8",
                         "--epochs", "2", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    assert p2.returncode == 0, p2.stderr
    assert "resuming: 7 of 8 trials done, 1 to run" in p2.stderr
    assert len(ecopt.load_study(out).records) == 8
    # A different space in the same directory is a clear error, exit status 2.
    p3 = subprocess.run([sys.executable, "-m", "ecopt.cli", "quickstart", "--trials", "1",
                         "--epochs", "3", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    assert p3.returncode == 2 and "different space" in p3.stderr and "Traceback" not in p3.stderr


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_the_quickstart_front_never_holds_a_noise_flagged_trial(tmp_path, seed):
    # issue 28 item 1: the quickstart's headline trial once had a 3.5 ms inference window.
    from ecopt.quickstart import run_quickstart

    study = run_quickstart(tmp_path / "qs", trials=3, sampler="sobol", meter="estimate",
                           seed=seed, epochs=1, show_progress=False)
    for r in study.records:
        assert r.unreliable == () and not r.phases["inference"].short_window, r.number
    front = study.best_trials()
    assert front and all(not r.unreliable for r in front)
