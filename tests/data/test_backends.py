"""The three backends produce the same tensors, and fail with messages naming file/column/value."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ecopt.data import (
    INSURANCE,
    INSURANCE_CLASSIFICATION,
    MOVIELENS,
    BackendUnavailableError,
    TablePipeline,
    get_backend,
    write_insurance,
    write_movielens,
)

BACKENDS = ("pandas", "polars", "dask")


def _assert_same(tables: dict) -> None:
    ref = tables["pandas"]
    for name, t in tables.items():
        assert t.feature_names == ref.feature_names, name
        assert t.features.dtype == ref.features.dtype and t.target.dtype == ref.target.dtype
        np.testing.assert_allclose(t.features.numpy(), ref.features.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=name)
        np.testing.assert_array_equal(t.codes.numpy(), ref.codes.numpy(), err_msg=name)
        np.testing.assert_allclose(t.target.numpy(), ref.target.numpy(), rtol=1e-6, err_msg=name)
        assert t.cardinalities == ref.cardinalities
        for c, a in ref.passthrough.items():
            np.testing.assert_array_equal(t.passthrough[c], a)


@pytest.fixture(scope="module")
def insurance_missing(tmp_path_factory):
    d = tmp_path_factory.mktemp("ins")
    return write_insurance(d / "insurance.csv", n_rows=300, seed=3, missing_frac=0.15)


@pytest.mark.parametrize("schema", [INSURANCE, INSURANCE_CLASSIFICATION], ids=["reg", "cls"])
def test_backends_equal_on_insurance_with_missing_values(insurance_missing, schema):
    tables = {b: TablePipeline(insurance_missing, schema, b).run() for b in BACKENDS}
    _assert_same(tables)
    t = tables["pandas"]
    # Missing categories became their own one-hot column; numerics are z-scored.
    assert "region=missing" in t.feature_names and "sex=missing" in t.feature_names
    feats = t.features.numpy()
    n_num = len(schema.numeric)
    np.testing.assert_allclose(feats[:, :n_num].mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(feats[:, :n_num].std(0), 1, atol=1e-4)
    onehot = feats[:, n_num:]
    assert set(np.unique(onehot)) <= {0.0, 1.0}
    assert not np.isnan(feats).any()
    if schema.task == "classification":
        assert t.target_classes == ["no", "yes"]


def test_imputation_and_encoding_values_by_hand(tmp_path):
    # A tiny table whose preprocessing is checkable on paper.
    p = tmp_path / "tiny.csv"
    p.write_text("age,sex,bmi,children,smoker,region,charges\n"
                 "20,male,,0,no,south,100\n"
                 ",female,30,2,yes,,300\n"
                 "40,male,20,,no,north,\n"       # no target: dropped
                 "60,,40,1,yes,north,200\n")
    tables = {b: TablePipeline(p, INSURANCE, b).run() for b in BACKENDS}
    _assert_same(tables)
    t = tables["polars"]
    assert len(t) == 3
    assert t.feature_names == ["age", "bmi", "children", "sex=female", "sex=male", "sex=missing",
                               "smoker=no", "smoker=yes", "region=missing", "region=north",
                               "region=south"]
    # age: mean of (20, 60) = 40 fills the gap -> (20, 40, 60) -> z = (-1.2247, 0, 1.2247)
    np.testing.assert_allclose(t.features[:, 0].numpy(), [-1.2247449, 0.0, 1.2247449], atol=1e-5)
    np.testing.assert_allclose(t.target.numpy(), [100, 300, 200])
    assert t.stats["impute_means"]["bmi"] == pytest.approx(35.0)
    np.testing.assert_array_equal(t.features[:, 3:6].numpy(), [[0, 1, 0], [1, 0, 0], [0, 0, 1]])


def test_backends_equal_on_parquet_and_movielens(tmp_path):
    pq = write_insurance(tmp_path / "ins.parquet", n_rows=120, seed=1, missing_frac=0.1)
    _assert_same({b: TablePipeline(pq, INSURANCE, b).run() for b in BACKENDS})
    ml = write_movielens(tmp_path / "ratings.dat", n_users=25, n_movies=40, n_ratings=600)
    tables = {b: TablePipeline(ml, MOVIELENS, b).run() for b in BACKENDS}
    _assert_same(tables)
    t = tables["pandas"]
    assert t.codes.shape == (600, 2) and t.cardinalities == [25, 40]
    assert t.features.shape == (600, 0)
    assert t.codes.min() == 0 and t.codes[:, 1].max() == 39


def test_dask_partitions_give_the_same_tensors(insurance_missing):
    one = TablePipeline(insurance_missing, INSURANCE, "pandas").run()
    many = TablePipeline(insurance_missing, INSURANCE, "dask", npartitions=4).run()
    _assert_same({"pandas": one, "dask": many})


def test_polars_target_reaches_torch_without_copy(insurance_missing):
    # The regression target is one float32 column without nulls: polars hands out a
    # read-only view of its Arrow buffer, and the tensor shares that memory.
    from ecopt.data.backends.base import feature_names
    from ecopt.data.backends.polars_backend import PolarsBackend
    from ecopt.data.schema import build_tensor_table

    b = PolarsBackend()
    stats: dict = {}
    frame = b.normalise(b.encode(b.impute(b.read(insurance_missing, INSURANCE), INSURANCE, stats),
                                 INSURANCE, stats), INSURANCE, stats)
    arrays = b.to_arrays(frame, INSURANCE, stats)
    target = arrays["target"]
    assert target.dtype == np.float32 and not target.flags.owndata
    table = build_tensor_table(arrays, INSURANCE, feature_names(INSURANCE, stats["categories"]),
                               stats)
    assert table.target.data_ptr() == target.ctypes.data


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_file_names_the_path(tmp_path, backend):
    missing = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        TablePipeline(missing, INSURANCE, backend).run()


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_separator_is_named(tmp_path, backend):
    p = tmp_path / "semi.csv"
    p.write_text("age;sex;bmi;children;smoker;region;charges\n19;female;27.9;0;yes;southwest;16884.9\n")
    with pytest.raises(ValueError, match=r"semi\.csv.*';'-separated"):
        TablePipeline(p, INSURANCE, backend).run()
    r = tmp_path / "ratings.dat"
    r.write_text("1,1193,5,978300760\n1,661,3,978302109\n")
    with pytest.raises(ValueError, match=r"ratings\.dat.*'::'.*looks ','-separated"):
        TablePipeline(r, MOVIELENS, backend).run()


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_column_is_named(tmp_path, backend):
    p = tmp_path / "nobmi.csv"
    p.write_text("age,sex,children,smoker,region,charges\n19,female,0,yes,southwest,16884.9\n")
    with pytest.raises(ValueError, match=r"nobmi\.csv.*column 'bmi'"):
        TablePipeline(p, INSURANCE, backend).run()


def test_backend_not_installed_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)  # makes `import polars` fail
    with pytest.raises(BackendUnavailableError, match=r"'polars' is not installed.*pip install polars"):
        get_backend("polars")
    with pytest.raises(ValueError, match=r"unknown dataframe backend 'spark'"):
        get_backend("spark")
