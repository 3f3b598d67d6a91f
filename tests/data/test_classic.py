"""Classic models behind every dataframe backend: tree ensembles, SVR, TabNet, matrix factorisation."""

from __future__ import annotations

import math

import pytest

from ecopt.meters import get_meter
from ecopt.trial import Trial, run_objective
from ecopt.workloads.classic import (
    CLASSIC_MODELS,
    ClassicTabularObjective,
    MatrixFactorizationObjective,
    build_classic_model,
)

TINY = {"random_forest": {"n_estimators": 5}, "svr": {}, "xgboost": {"n_estimators": 5},
        "tabnet": {"max_epochs": 1}}


def _run(obj, params):
    trial = Trial(0, params, get_meter("estimate"))
    out = run_objective(obj, trial)
    assert out.error is None, out.error
    return out


@pytest.mark.parametrize("model", sorted(CLASSIC_MODELS))
def test_each_model_trains_with_phases_and_estimated_energy(model):
    pytest.importorskip({"xgboost": "xgboost", "tabnet": "pytorch_tabnet"}.get(model, "sklearn"))
    out = _run(ClassicTabularObjective(model, n_rows=150, defaults=TINY[model]),
               {"backend": "polars"})
    assert set(out.phases) == {"load", "preprocess", "train", "inference"}
    assert math.isfinite(out.returned["rmse"]) and out.returned["train_rows_per_joule"] > 0
    assert not any(p.measurement.measured for p in out.phases.values())
    assert out.user_attrs["model"] == model


def test_backends_give_the_same_model():
    # Identical preprocessed features -> the seeded forest is the same whatever the backend.
    rmse = {b: _run(ClassicTabularObjective("random_forest", n_rows=150,
                                            defaults=TINY["random_forest"]),
                    {"backend": b}).returned["rmse"] for b in ("pandas", "polars", "dask")}
    assert rmse["polars"] == pytest.approx(rmse["pandas"], rel=1e-6)
    assert rmse["dask"] == pytest.approx(rmse["pandas"], rel=1e-6)


def test_seed_param_seeds_the_model_and_is_no_model_option():
    """The dataframe study asks every backend of one repeat with the same ``seed`` param: the
    forest is seeded by it (and SVR, which takes no seed, does not receive it as an option)."""
    obj = ClassicTabularObjective("random_forest", n_rows=150, defaults=TINY["random_forest"])
    a = _run(obj, {"backend": "pandas", "seed": 3}).returned["rmse"]
    b = _run(obj, {"backend": "dask", "seed": 3}).returned["rmse"]
    c = _run(obj, {"backend": "pandas", "seed": 4}).returned["rmse"]
    assert a == pytest.approx(b, rel=1e-6) and c != a
    assert math.isfinite(_run(ClassicTabularObjective("svr", n_rows=150),
                              {"backend": "polars", "seed": 3}).returned["rmse"])


@pytest.mark.parametrize("backend", ["pandas", "polars", "dask"])
def test_matrix_factorisation_learns_the_ratings(backend):
    obj = MatrixFactorizationObjective(n_users=60, n_movies=80, n_ratings=3000,
                                       defaults={"epochs": 8})
    out = _run(obj, {"backend": backend})
    # Ratings 1-5 with a per-user mean: predicting the global mean gives ~1.1 RMSE here.
    assert 0.3 < out.returned["rmse"] < 1.0
    assert 0 <= out.metrics["hit_rate"] <= 1


def test_bad_model_names():
    with pytest.raises(ValueError, match="model must be one of"):
        ClassicTabularObjective("lasso")
    with pytest.raises(ValueError, match="model must be one of"):
        build_classic_model("lasso")
