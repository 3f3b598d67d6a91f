"""The inference phase of the tabular and ratings workloads: held-out rows read from the file
through the backend, preprocessed with the training split's constants (no refit), batched by
the library."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ecopt.data import INSURANCE, INSURANCE_CLASSIFICATION, MOVIELENS, TablePipeline
from ecopt.data import write_insurance, write_movielens
from ecopt.data.backends import get_backend
from ecopt.meters import get_meter
from ecopt.trial import Trial, run_objective
from ecopt.workloads.classic import ClassicTabularObjective, MatrixFactorizationObjective
from ecopt.workloads.ncf import NCFObjective, hit_rate, sample_negatives
from ecopt.workloads.tabular import TabularObjective

BACKENDS = ("pandas", "polars", "dask")


@pytest.fixture(scope="module")
def insurance(tmp_path_factory):
    d = tmp_path_factory.mktemp("ins")
    return write_insurance(d / "insurance.csv", n_rows=300, seed=5, missing_frac=0.1)


def _held_out(path, schema, backend, batch_size=32):
    pipe = TablePipeline(path, schema, backend)
    frame = pipe.read()
    labelled = pipe.labelled_rows(frame)
    tr, te = labelled[labelled % 3 != 0], labelled[labelled % 3 == 0]
    table = pipe.preprocess(frame, rows=tr)
    batches = list(pipe.held_out_batches(table.stats, te, batch_size))
    return table, te, batches


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_out_rows_get_the_training_constants_not_their_own(insurance, backend):
    table, te, batches = _held_out(insurance, INSURANCE, backend)
    raw = pd.read_csv(insurance)
    tr_raw = raw.drop(index=te)
    feats = np.concatenate([b.features.numpy() for b in batches])
    assert len(feats) == len(te)
    for j, c in enumerate(INSURANCE.numeric):
        # Imputed with the training mean, then z-scored with the training mean and std.
        imputed = tr_raw[c].astype(float).fillna(tr_raw[c].mean())
        mu, sd = imputed.mean(), imputed.std(ddof=0)
        want = (raw[c].iloc[te].astype(float).fillna(tr_raw[c].mean()) - mu) / sd
        np.testing.assert_allclose(feats[:, j], want.to_numpy(), rtol=1e-5, atol=1e-5)
        held_sd = raw[c].iloc[te].astype(float).std(ddof=0)
        assert abs(feats[:, j].std() - 1.0) > 1e-3 or abs(held_sd - sd) < 1e-9  # not refitted
    assert table.stats["means"] == pytest.approx(
        {c: tr_raw[c].astype(float).fillna(tr_raw[c].mean()).mean() for c in INSURANCE.numeric})
    np.testing.assert_allclose(np.concatenate([b.target.numpy() for b in batches]),
                               raw["charges"].iloc[te].to_numpy(), rtol=1e-6)


@pytest.mark.parametrize("schema", [INSURANCE, INSURANCE_CLASSIFICATION], ids=["reg", "cls"])
def test_backends_give_the_same_held_out_batches(insurance, schema):
    out = {b: _held_out(insurance, schema, b, batch_size=16) for b in BACKENDS}
    ref = out["pandas"][2]
    assert [len(b) for b in ref][:-1] == [16] * (len(ref) - 1)  # the library slices bs rows
    assert [len(b) for b in out["polars"][2]] == [len(b) for b in ref]
    assert len(out["dask"][2]) == len(ref)  # ceil(n / bs) partitions of about bs rows
    for name, (_, _, batches) in out.items():
        for what in ("features", "target"):
            np.testing.assert_allclose(
                np.concatenate([getattr(b, what).numpy() for b in batches]),
                np.concatenate([getattr(b, what).numpy() for b in ref]), rtol=1e-5, atol=1e-6,
                err_msg=f"{name} {what}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_category_unseen_in_training_is_an_all_zero_block_and_an_unseen_code_fails(
        tmp_path, backend):
    df = pd.read_csv(write_insurance(tmp_path / "a.csv", n_rows=60, seed=1))
    df.loc[50:, "region"] = "atlantis"  # only in the held-out rows
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    pipe = TablePipeline(path, INSURANCE, backend)
    table = pipe.preprocess(pipe.read(), rows=np.arange(50))
    (batch,) = pipe.held_out_batches(table.stats, np.arange(50, 60), 64)
    region = [i for i, n in enumerate(batch.feature_names) if n.startswith("region=")]
    assert batch.features.numpy()[:, region].sum() == 0
    # An ordinal code (an embedding row) cannot be made up: the error names the value.
    ratings = write_movielens(tmp_path / "ml" / "ratings.dat", 20, 30, 400, seed=0)
    ml = TablePipeline(ratings, MOVIELENS, backend)
    frame = ml.read()
    users = pd.read_csv(ratings, sep="::", engine="python", header=None)[0].to_numpy()
    first = np.flatnonzero(users != users.max())
    t = ml.preprocess(frame, rows=first)
    with pytest.raises(ValueError, match="not among the categories"):
        list(ml.held_out_batches(t.stats, np.flatnonzero(users == users.max()), 64))


def test_transform_refuses_stats_without_fitted_constants(insurance):
    pipe = TablePipeline(insurance, INSURANCE, "pandas")
    with pytest.raises(ValueError, match="stats lacks"):
        pipe.transform(pipe.read(), {"categories": {}})
    with pytest.raises(ValueError, match="increasing"):
        pipe.preprocess(pipe.read(), rows=[3, 1])
    with pytest.raises(ValueError, match="batch_size"):
        list(pipe.held_out_batches(pipe.run().stats, [0, 1], 0))


def _run(obj, params):
    trial = Trial(0, params, get_meter("estimate"))
    out = run_objective(obj, trial)
    assert out.error is None, out.error
    return out, trial


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_reads_the_file_through_the_backend_after_training(tmp_path, monkeypatch,
                                                                     backend):
    path = write_insurance(tmp_path / "insurance.csv", n_rows=200, seed=2)
    params = {"backend": backend, "epochs": 3, "threads": 1}
    base, _ = _run(TabularObjective(data=str(path)), params)

    cls = type(get_backend(backend))
    real_read = cls.read
    calls: list[bool] = []
    holder: dict = {}

    def spy(self, p, schema):
        trained = "train" in holder["trial"].phases
        if trained and not any(calls):  # first read after training: the file changes now
            df = pd.read_csv(path)
            df["smoker"] = "yes"
            df.to_csv(path, index=False)
        calls.append(trained)
        return real_read(self, p, schema)

    monkeypatch.setattr(cls, "read", spy)
    trial = Trial(0, params, get_meter("estimate"))
    holder["trial"] = trial
    out = run_objective(TabularObjective(data=str(path)), trial)
    assert out.error is None, out.error
    # One read in load, then one per inference call, every one after training.
    n_inf = int(out.metrics["inference_calls"])
    assert calls == [False] + [True] * n_inf
    # The model is the same (same data, seed, constants); the held-out rows it saw were not.
    assert out.returned["rmse"] != pytest.approx(base.returned["rmse"], rel=1e-3)


def test_ratings_workloads_agree_across_backends():
    ncf = {b: _run(NCFObjective(n_users=40, n_movies=60, n_ratings=1500),
                   {"backend": b, "epochs": 1, "batch_size": 16, "threads": 1})[0]
           for b in BACKENDS}
    mf = {b: _run(MatrixFactorizationObjective(n_users=40, n_movies=60, n_ratings=1500,
                                               defaults={"epochs": 3, "batch_size": 16}),
                  {"backend": b})[0] for b in BACKENDS}
    for b in BACKENDS:
        # Batches cut differently (dask: partitions) score the same fixed candidates.
        assert ncf[b].returned["hit_rate"] == pytest.approx(ncf["pandas"].returned["hit_rate"],
                                                            abs=1e-6)
        assert mf[b].returned["rmse"] == pytest.approx(mf["pandas"].returned["rmse"], rel=1e-5)
        assert ncf[b].phases["inference"].samples == 40 * ncf[b].metrics["inference_calls"]


def test_tabular_workloads_agree_across_backends():
    mlp = {b: _run(TabularObjective(n_rows=200), {"backend": b, "epochs": 2, "threads": 1,
                                                  "batch_size": 16})[0] for b in BACKENDS}
    svr = {b: _run(ClassicTabularObjective("svr", n_rows=200, defaults={"batch_size": 16}),
                   {"backend": b})[0] for b in BACKENDS}
    for b in BACKENDS:
        assert mlp[b].returned["rmse"] == pytest.approx(mlp["pandas"].returned["rmse"], rel=1e-4)
        assert svr[b].returned["rmse"] == pytest.approx(svr["pandas"].returned["rmse"], rel=1e-6)
        assert mlp[b].phases["inference"].samples == 40 * mlp[b].metrics["inference_calls"]


def test_hit_rate_with_fixed_negatives_equals_drawing_them():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Module()
    emb = torch.nn.Embedding(50, 4)
    model.forward = lambda u, i: (emb(u) * emb(i)).sum(1)  # type: ignore[method-assign]
    users, items = np.arange(10), np.arange(10, 20)
    rated = np.sort(users * 50 + items)
    neg = sample_negatives(users, 50, 20, rated, np.random.default_rng(7))
    drawn = hit_rate(model, users, items, 50, rated, np.random.default_rng(7), n_negatives=20)
    fixed = hit_rate(model, users, items, 50, rated, None, negatives=neg)
    assert fixed == drawn
    with pytest.raises(ValueError, match="neither"):
        hit_rate(model, users, items, 50, rated, None)
    with pytest.raises(ValueError, match="len\\(test_users\\)"):
        hit_rate(model, users, items, 50, rated, None, negatives=neg[:3])
