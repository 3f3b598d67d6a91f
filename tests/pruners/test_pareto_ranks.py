"""Non-dominated sorting ranks and hypervolume contributions (pareto helpers the pruners use)."""

from __future__ import annotations

import numpy as np
import pytest

from ecopt import pareto


def _brute_ranks(Z: np.ndarray) -> list[int]:
    n = len(Z)
    ranks = [-1] * n
    left = set(range(n))
    k = 0
    while left:
        front = {i for i in left if not any(pareto.dominates(Z[j], Z[i]) for j in left if j != i)}
        for i in front:
            ranks[i] = k
        left -= front
        k += 1
    return ranks


@pytest.mark.parametrize("m", [2, 3])
def test_ranks_match_brute_force(m):
    rng = np.random.default_rng(m)
    for _ in range(20):
        Z = rng.integers(0, 5, size=(int(rng.integers(1, 25)), m)).astype(float)
        assert pareto.nondominated_ranks(Z).tolist() == _brute_ranks(Z)


def test_ranks_follow_directions_and_put_nan_last():
    Y = np.array([[1.0, 5.0], [2.0, 4.0], [3.0, 3.0], [np.nan, 0.0]])
    # min/min: row 0 is best in f1, row 2 worst; none dominates another.
    assert pareto.nondominated_ranks(Y, ["min", "min"]).tolist() == [0, 0, 0, 4]
    assert pareto.nondominated_ranks(Y, ["min", "max"]).tolist() == [0, 1, 2, 4]


@pytest.mark.parametrize("m", [2, 3])
def test_contributions_match_leave_one_out(m):
    rng = np.random.default_rng(10 + m)
    for _ in range(15):
        Z = rng.random((int(rng.integers(1, 12)), m))
        if rng.random() < 0.3:
            Z = np.vstack([Z, Z[:1]])  # a duplicate contributes nothing
        r = np.full(m, 0.1)
        got = pareto.hypervolume_contributions(Z, r)
        total = pareto.hypervolume(Z, r)
        want = [total - pareto.hypervolume(np.delete(Z, i, axis=0), r) for i in range(len(Z))]
        assert got == pytest.approx(np.maximum(want, 0.0), abs=1e-12)


def test_contributions_with_min_directions_and_outside_the_reference():
    Y = np.array([[1.0, 4.0], [2.0, 2.0], [4.0, 1.0], [3.0, 3.0], [6.0, 0.5]])
    c = pareto.hypervolume_contributions(Y, [5.0, 5.0], ["min", "min"])
    assert c[3] == 0.0  # dominated by row 1
    assert c[4] == 0.0  # worse than the reference point in f1
    # Row 1's box between its neighbours is 2 x 2; without it, row 3 still covers 1 x 1.
    assert c[1] == pytest.approx((4.0 - 2.0) * (4.0 - 2.0) - 1.0)
    assert c[0] == pytest.approx((2.0 - 1.0) * (5.0 - 4.0))
