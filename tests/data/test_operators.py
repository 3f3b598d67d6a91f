"""Per-operator traces: the five operators give the same data with every backend."""

from __future__ import annotations

import pytest

from ecopt.data.datasets import (
    write_insurance,
    write_movielens,
    write_movielens_side_files,
)
from ecopt.data.operators import OPERATORS, operator_plan, trace_operators


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    ratings = write_movielens(d / "ml-1m" / "ratings.dat", 40, 60, 1000, seed=1)
    write_movielens_side_files(d / "ml-1m", ratings, seed=1)
    return {"movielens": ratings, "insurance": write_insurance(d / "ins.csv", 200, 0, 0.1)}


@pytest.mark.parametrize("dataset", ["movielens", "insurance"])
def test_backends_agree_operator_by_operator(files, dataset):
    outs = {}
    for backend in ("pandas", "polars", "dask"):
        state: dict = {}
        outs[backend] = [fn(state) for _, fn in operator_plan(dataset, backend, files[dataset])]
        names = [n for n, _ in operator_plan(dataset, backend, files[dataset])]
        assert sorted(names) == sorted(OPERATORS)
    x = {b: o[-1][0] for b, o in outs.items()}  # to_tensor's first tensor
    y = {b: o[-1][1] for b, o in outs.items()}
    n = len(y["pandas"])
    assert n == (1000 if dataset == "movielens" else 200)
    for b in ("polars", "dask"):
        assert x[b].shape == x["pandas"].shape
        # Row order may differ after a join; the multiset of targets may not.
        assert sorted(y[b].tolist()) == pytest.approx(sorted(y["pandas"].tolist()))
        assert float(x[b].float().sum()) == pytest.approx(float(x["pandas"].float().sum()),
                                                          rel=1e-4)


def test_trace_reports_each_operator_with_provenance(files):
    traces = trace_operators("movielens", "polars", files["movielens"], meter="estimate")
    assert [t.name for t in traces] == list(OPERATORS)
    assert all(t.duration_s >= 0 and t.measured is False and "estimate" in t.source
               for t in traces)
    assert traces[1].rows == 1000  # the inner join keeps every rating (all ids have rows)
    with pytest.raises(FileNotFoundError, match="users.dat"):
        operator_plan("movielens", "pandas", files["insurance"])
    with pytest.raises(ValueError, match="backend must be one of"):
        operator_plan("insurance", "spark", files["insurance"])
