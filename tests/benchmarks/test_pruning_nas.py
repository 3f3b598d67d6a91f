"""benchmarks/nas_curves.py: the live NAS problem of the energy-aware-search benchmark."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ecopt
from benchmarks import nas_curves
from benchmarks.pruning import summarise, tables
from ecopt import pareto


@pytest.fixture(scope="module")
def problem() -> nas_curves.NasProblem:
    return nas_curves.NasProblem(epochs=2, n_init=2, budget=3, inference_passes=1)


@pytest.fixture(scope="module")
def runs(problem: nas_curves.NasProblem) -> list[dict]:
    return [nas_curves.run_one(problem, m, 0, 3) for m in ("ecopt", "optuna-hyperband")]


@pytest.mark.slow  # a GP fit and five small CNN trainings: seconds of CPU
def test_a_run_has_the_pruning_benchmarks_structure_and_counts_every_trials_joules(runs):
    for r in runs:
        n = len(r["states"])
        assert n == 3 and r["problem"] == "nas" and r["max_step"] == 2
        for key in ("hv", "energy_j", "epochs", "values", "trial_j", "phase_j", "proposal_j",
                    "proposal_s", "params"):
            assert len(r[key]) == n, key
        assert all(j > 0 for j in r["trial_j"])  # estimated joules of every trial
        assert r["energy_j"] == pytest.approx(np.cumsum(r["trial_j"]).tolist())
        for t_j, phases, state, v in zip(r["trial_j"], r["phase_j"], r["states"], r["values"]):
            assert t_j == pytest.approx(sum(phases.values()))
            assert (v is not None) == (state == "complete")
        assert math.isnan(r["max_hv"])  # until scored against every run's union front
    # The Optuna arm's ask is metered too (joules may round to 0 on a fast ask; never None).
    assert all(p is not None and p >= 0 for p in runs[1]["proposal_j"])


@pytest.mark.slow
def test_score_puts_every_run_against_the_union_front(runs):
    got = nas_curves.score(runs)
    Y = np.array([v for r in runs for v in r["values"] if v is not None])
    assert got["n_complete"] == len(Y)
    assert got["max_hv"] == pytest.approx(pareto.hypervolume(Y, got["reference_point"],
                                                             ["max", "max"]))
    assert min(got["reference_point"]) >= 0
    for r in runs:
        assert r["max_hv"] == got["max_hv"]
        assert all(a <= b + 1e-9 for a, b in zip(r["hv"], r["hv"][1:]))
        assert r["hv"][-1] <= got["max_hv"] * (1 + 1e-9)
    rows = {row[1]: row for row in tables(summarise(runs))["pruning"]["rows"]}
    assert set(rows) == {"ecopt", "optuna-hyperband"} and rows["ecopt"][0] == "nas"
    extra = nas_curves.with_proposals_table(runs)
    assert [row[1] for row in extra["rows"]] == ["ecopt", "optuna-hyperband"]


def test_a_pruned_trial_keeps_the_joules_of_the_epochs_it_ran(problem):
    class StopAtFirst(ecopt.pruners.Pruner):
        name = "stop-at-first"

        def decide(self, trial, history):
            return ecopt.pruners.Decision(True, "test")

    study = ecopt.Study(problem.space, problem.objectives, storage=None, meter="estimate",
                        sampler="random", pruner=StopAtFirst(), seed=0)
    rec = study.optimize(problem.objective, n_trials=1, show_progress=False)[0]
    row = nas_curves.trial_row(rec)
    assert row["state"] == "pruned" and row["epochs"] == 1 and row["values"] is None
    assert {"train", "validate"} <= set(row["phase_j"]) and "inference" not in row["phase_j"]
    assert row["trial_j"] == pytest.approx(sum(row["phase_j"].values()))
    assert row["phase_j"]["train"] > 0


def test_the_hyperband_scalarisation_scales_by_the_initial_designs_range():
    s = nas_curves.scalariser([[0.5, 100.0], [0.9, 1000.0], [0.7, 300.0]])
    assert s(0.9, 1000.0) == pytest.approx(0.0)
    assert s(0.5, 100.0) == pytest.approx(1.0)
    assert s(0.9, 100.0) == pytest.approx(0.5)


def test_budgeted_methods_are_refused_for_nas(problem):
    with pytest.raises(ValueError, match="ecopt-budget"):
        nas_curves.run_one(problem, "ecopt-budget", 0, 2)
