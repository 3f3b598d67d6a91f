"""Pareto module against brute force on random point sets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecopt import pareto


def brute_non_dominated(Z):
    n = len(Z)
    return np.array([not any(np.all(Z[j] >= Z[i]) and np.any(Z[j] > Z[i])
                             for j in range(n) if j != i) for i in range(n)], dtype=bool)


def brute_hv(Z, r):
    """Inclusion-exclusion over subsets: exact for small n (maximisation)."""
    Z = [z for z in Z if np.all(z > r)]
    total = 0.0
    for k in range(1, len(Z) + 1):
        for sub in itertools.combinations(Z, k):
            corner = np.min(np.array(sub), axis=0)
            total += (-1) ** (k + 1) * float(np.prod(corner - r))
    return total


points = st.integers(1, 7).flatmap(lambda n: st.integers(2, 3).flatmap(
    lambda m: st.lists(st.lists(st.integers(0, 6).map(float), min_size=m, max_size=m),
                       min_size=n, max_size=n)))


@settings(max_examples=200, deadline=None)
@given(points)
def test_non_dominated_matches_brute_force(pts):
    Z = np.array(pts)
    assert np.array_equal(pareto.non_dominated(Z), brute_non_dominated(Z))


@settings(max_examples=200, deadline=None)
@given(points)
def test_hypervolume_matches_inclusion_exclusion(pts):
    Z = np.array(pts)
    r = np.full(Z.shape[1], -0.5)
    assert pareto.hypervolume(Z, r) == pytest.approx(brute_hv(list(Z), r), rel=1e-9, abs=1e-9)


def test_mixed_directions_and_nan_rows():
    Y = np.array([[0.9, 10.0], [0.8, 5.0], [0.7, 20.0], [np.nan, 1.0]])
    # accuracy max, energy min: (0.8, 5) and (0.9, 10) are on the front; 0.7 @ 20 J is not.
    assert pareto.non_dominated(Y, ["max", "min"]).tolist() == [True, True, False, False]
    hv = pareto.hypervolume(Y, [0.5, 30.0], ["max", "min"])
    assert hv == pytest.approx((0.9 - 0.5) * (30 - 10) + (0.8 - 0.5) * (10 - 5))


def test_hypervolume_4d_matches_brute_force():
    rng = np.random.default_rng(3)
    Z = rng.random((6, 4))
    assert pareto.hypervolume(Z, np.zeros(4)) == pytest.approx(brute_hv(list(Z), np.zeros(4)))


def test_knee_point_and_reference_point():
    Y = np.array([[0.0, 1.0], [0.6, 0.6], [1.0, 0.0], [0.2, 0.2]])
    assert pareto.knee_point(Y) == 1
    ref = pareto.infer_reference_point(Y)
    assert ref.tolist() == pytest.approx([-0.1, -0.1])
    ref_min = pareto.infer_reference_point(Y, directions=["min", "min"])
    # As minimisation, (0, 1), (0.2, 0.2) and (1, 0) form the front; nadir (1, 1).
    assert ref_min.tolist() == pytest.approx([1.1, 1.1])
    with pytest.raises(ValueError, match="at least one valid point"):
        pareto.knee_point(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="directions must be 'max' or 'min'"):
        pareto.non_dominated(Y, ["max", "up"])
