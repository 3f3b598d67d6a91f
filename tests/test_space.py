"""Search space: validation messages and unit-cube encoding round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ecopt
from ecopt.space import parameter_from_dict


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ecopt.Float(1.0, 1.0), r"low < high must hold, got low=1.0, high=1.0"),
        (lambda: ecopt.Float(2.0, 1.0), r"low < high"),
        (lambda: ecopt.Float(0.0, 1.0, log=True), r"log-scale dimension needs low > 0, got low=0.0"),
        (lambda: ecopt.Float(float("nan"), 1.0), r"finite"),
        (lambda: ecopt.Int(5, 5), r"low < high must hold, got low=5, high=5"),
        (lambda: ecopt.Int(0, 10, log=True), r"low > 0, got low=0"),
        (lambda: ecopt.Int(1, 10, step=0), r"step >= 1 must hold, got step=0"),
        (lambda: ecopt.Int(1.5, 10), r"must be an integer"),
        (lambda: ecopt.Categorical([]), r"choices must not be empty"),
        (lambda: ecopt.Categorical(["a", "a"]), r"distinct, got duplicate 'a'"),
        (lambda: ecopt.Categorical(["a", ""]), r"empty string"),
        (lambda: ecopt.Categorical([object()]), r"JSON-able"),
        (lambda: ecopt.Categorical("abc"), r"list of values"),
        (lambda: ecopt.Fixed([1, 2]), r"JSON-able"),
        (lambda: ecopt.SearchSpace({}), r"at least one parameter"),
        (lambda: ecopt.SearchSpace({"": ecopt.Fixed(1)}), r"non-empty strings"),
        (lambda: ecopt.SearchSpace({"x": 3}), r"must be a Float, Int, Categorical or Fixed"),
    ],
)
def test_bad_definitions_name_the_rule(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_validate_params_unknown_missing_and_out_of_range():
    space = ecopt.SearchSpace({"lr": ecopt.Float(1e-4, 1e-1, log=True), "d": ecopt.Int(1, 4),
                               "b": ecopt.Categorical(["pandas", "polars"]), "e": ecopt.Fixed(3)})
    ok = space.validate({"lr": 0.01, "d": 2, "b": "polars", "e": 3})
    assert ok == {"lr": 0.01, "d": 2, "b": "polars", "e": 3}
    with pytest.raises(ValueError, match=r"unknown parameter name\(s\) \['zz'\]"):
        space.validate({"lr": 0.01, "d": 2, "b": "polars", "e": 3, "zz": 1})
    with pytest.raises(ValueError, match=r"missing parameter\(s\) \['b'\]"):
        space.validate({"lr": 0.01, "d": 2, "e": 3})
    with pytest.raises(ValueError, match=r"lr must lie in \[0.0001, 0.1\], got 0.5"):
        space.validate({"lr": 0.5, "d": 2, "b": "polars", "e": 3})
    with pytest.raises(ValueError, match=r"b must be one of \['pandas', 'polars'\], got 'dask'"):
        space.validate({"lr": 0.01, "d": 2, "b": "dask", "e": 3})
    with pytest.raises(ValueError, match=r"e is fixed to 3, got 4"):
        space.validate({"lr": 0.01, "d": 2, "b": "polars", "e": 4})
    with pytest.raises(ValueError, match=r"d must be an integer, got 2.5"):
        space.validate({"lr": 0.01, "d": 2.5, "b": "polars", "e": 3})


def test_dims_and_categorical_columns():
    space = ecopt.SearchSpace({"a": ecopt.Float(0, 1), "e": ecopt.Fixed("x"),
                               "c": ecopt.Categorical(["u", "v", "w"]),
                               "o": ecopt.Categorical([1, 2, 4], ordered=True)})
    assert space.dim == 3
    assert space.searched_names == ["a", "c", "o"]
    assert space.categorical_columns == {1: 3}


def test_to_dict_round_trip_is_plain_json():
    import json

    space = ecopt.SearchSpace({"lr": ecopt.Float(1e-4, 1e-1, log=True),
                               "bs": ecopt.Int(8, 1024, log=True), "k": ecopt.Int(0, 10, step=2),
                               "b": ecopt.Categorical(["pandas", "polars", "dask"]),
                               "flag": ecopt.Categorical([True, False]), "e": ecopt.Fixed(3)})
    data = json.loads(json.dumps(space.to_dict()))
    assert ecopt.SearchSpace.from_dict(data) == space
    with pytest.raises(ValueError, match="unknown parameter type"):
        parameter_from_dict({"type": "weird"})


params_st = st.fixed_dictionaries({
    "f": st.floats(-3.0, 7.0),
    "lf": st.floats(1e-4, 1e-1),
    "i": st.integers(-5, 20),
    "li": st.integers(8, 1024),
    "si": st.sampled_from(list(range(0, 21, 4))),
    "c": st.sampled_from(["pandas", "polars", "dask"]),
    "o": st.sampled_from([1, 2, 4, 8]),
})

SPACE = ecopt.SearchSpace({
    "f": ecopt.Float(-3.0, 7.0),
    "lf": ecopt.Float(1e-4, 1e-1, log=True),
    "i": ecopt.Int(-5, 20),
    "li": ecopt.Int(8, 1024, log=True),
    "si": ecopt.Int(0, 20, step=4),
    "c": ecopt.Categorical(["pandas", "polars", "dask"]),
    "o": ecopt.Categorical([1, 2, 4, 8], ordered=True),
    "fx": ecopt.Fixed(3),
})


@settings(max_examples=300, deadline=None)
@given(params_st)
def test_encode_decode_round_trip(params):
    params = {**params, "fx": 3}
    x = SPACE.encode(params)
    assert x.shape == (SPACE.dim,)
    assert np.all((x >= 0) & (x <= 1))
    back = SPACE.decode(x)
    assert back["i"] == params["i"] and back["li"] == params["li"] and back["si"] == params["si"]
    assert back["c"] == params["c"] and back["o"] == params["o"] and back["fx"] == 3
    assert math.isclose(back["f"], params["f"], rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(back["lf"], params["lf"], rel_tol=1e-9)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7))
def test_decode_always_gives_valid_params(u):
    params = SPACE.decode(u)
    assert SPACE.validate(params) == params


def test_grid_uses_values_and_all_discrete_points():
    space = ecopt.SearchSpace({"bs": ecopt.Int(1, 4), "c": ecopt.Categorical(["a", "b"]),
                               "x": ecopt.Float(0, 1), "e": ecopt.Fixed(1)})
    grid = space.grid(n_points=3)
    # Int(1, 4) has more values than n_points: three evenly spaced ones.
    assert len(grid) == 3 * 2 * 3
    assert {g["bs"] for g in grid} == {1, 2, 4} or {g["bs"] for g in grid} == {1, 3, 4}
    assert {g["x"] for g in grid} == {0.0, 0.5, 1.0}
    assert all(isinstance(g["x"], float) for g in grid)
    assert len(space.grid(n_points=4)) == 4 * 2 * 4
    grid2 = space.grid(values={"bs": [1, 3]}, n_points=2)
    assert {g["bs"] for g in grid2} == {1, 3} and len(grid2) == 2 * 2 * 2
    with pytest.raises(ValueError, match="bs must lie in"):
        space.grid(values={"bs": [9]})
