"""Data workloads as study objectives: knobs from params, phases, failures recorded."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ecopt
from ecopt.meters import get_meter
from ecopt.trial import Trial, TrialState
from ecopt.workloads.images import ImageFolderObjective
from ecopt.workloads.ncf import NCFObjective, hit_rate, leave_last_out
from ecopt.workloads.tabular import TabularObjective


@pytest.mark.slow
def test_study_over_backends_and_workers_records_failures_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.dataframe", None)  # dask "not installed"
    space = ecopt.SearchSpace({
        "backend": ecopt.Categorical(["polars", "dask"]),
        "num_workers": ecopt.Categorical([0, 999]),
        "epochs": ecopt.Fixed(2),
        "threads": ecopt.Fixed(1),
    })
    study = ecopt.Study(space, [ecopt.Objective("rmse", "min"),
                                ecopt.Objective("train_rows_per_joule", "max")],
                        storage=tmp_path / "study", sampler="grid", meter="estimate")
    study.optimize(TabularObjective(n_rows=200), n_trials=4, show_progress=False)
    recs = {(r.params["backend"], r.params["num_workers"]): r for r in study.records}
    assert len(recs) == 4
    ok = recs[("polars", 0)]
    assert ok.state is TrialState.COMPLETE
    assert ok.values["rmse"] > 0 and ok.values["train_rows_per_joule"] > 0
    assert set(ok.phases) == {"load", "preprocess", "train", "inference"}
    assert ok.phases["train"].samples == 160 * 2
    assert ok.metrics["peak_ram_mb_train"] > 0 and not ok.measured
    bad_workers = recs[("polars", 999)]
    assert bad_workers.state is TrialState.FAILED and "num_workers=999" in bad_workers.error.message
    no_dask = recs[("dask", 0)]
    assert no_dask.state is TrialState.FAILED
    assert no_dask.error.type == "BackendUnavailableError" and "'dask'" in no_dask.error.message
    # The log on disk says the same.
    assert len(ecopt.load_study(tmp_path / "study").records) == 4


def test_classification_reports_accuracy():
    obj = TabularObjective(task="classification", n_rows=200)
    trial = Trial(0, {"backend": "pandas", "epochs": 3, "cache": False, "threads": 1},
                  get_meter("estimate"))
    out = obj(trial)
    assert set(out) == {"accuracy", "train_rows_per_joule"}
    assert 0.5 <= out["accuracy"] <= 1.0  # smoker is easy to read off charges
    assert "samples_per_joule_inference" in trial.metrics
    assert "samples_per_joule" not in trial.metrics  # one name, one definition


def test_old_training_metric_name_still_works_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="train_rows_per_joule"):
        obj = TabularObjective(n_rows=200, returns=("rmse", "samples_per_joule"))
    trial = Trial(0, {"backend": "pandas", "epochs": 2, "threads": 1}, get_meter("estimate"))
    out = obj(trial)
    assert set(out) == {"rmse", "samples_per_joule"}
    # The same figure as the new name: training rows x epochs per joule of the pipeline.
    e = sum(trial.phases[p].energy_j for p in ("load", "preprocess", "train"))
    assert out["samples_per_joule"] == pytest.approx(160 * 2 / e)
    assert trial.metrics["train_rows_per_joule"] == out["samples_per_joule"]


def test_leave_last_out_and_hit_rate_by_hand():
    users = np.array([0, 0, 0, 1, 1])
    items = np.array([3, 1, 2, 0, 2])
    times = np.array([10, 30, 30, 5, 1])
    tr, te = leave_last_out(users, items, times)
    assert te.tolist() == [2, 3]  # user 0: t=30 tie -> larger item (2); user 1: t=5
    assert sorted(tr.tolist()) == [0, 1, 4]

    import torch

    class Oracle(torch.nn.Module):  # scores the held-out item highest
        def forward(self, u, i):
            return (i == torch.tensor([2, 0])[u]).float()

    rated = np.sort(users * 4 + items)
    rng = np.random.default_rng(0)
    assert hit_rate(Oracle(), users[te], items[te], 4, rated, rng, k=1, n_negatives=3) == 1.0


def test_ncf_objective_reports_hit_rate():
    obj = NCFObjective(n_users=30, n_movies=50, n_ratings=900)
    trial = Trial(0, {"backend": "polars", "epochs": 1, "batch_size": 512, "threads": 1},
                  get_meter("estimate"))
    out = obj(trial)
    assert 0.0 <= out["hit_rate"] <= 1.0 and out["train_rows_per_joule"] > 0
    # The 30 test users, scored again and again until the window is long enough to measure.
    calls = trial.metrics["inference_calls"]
    assert trial.phases["inference"].samples == 30 * calls
    assert not trial.phases["inference"].short_window and trial.unreliable_phases() == []
    assert trial.metrics["n_ratings"] == 900


@pytest.mark.slow
def test_image_objective_runs_with_a_worker_and_without_cache():
    obj = ImageFolderObjective(n_classes=2, images_per_class=6, size=16)
    trial = Trial(0, {"num_workers": 1, "cache": False, "epochs": 1, "image_size": 16,
                      "threads": 1, "backend": "polars"}, get_meter("estimate"))
    out = obj(trial)
    assert 0.0 <= out["accuracy"] <= 1.0
    assert trial.user_attrs["backend_ignored"] == "polars"
