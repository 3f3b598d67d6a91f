"""The three-objective box decomposition against exact hypervolume improvements."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
from botorch.acquisition.multi_objective.monte_carlo import qNoisyExpectedHypervolumeImprovement
from botorch.models import SingleTaskGP
from botorch.sampling.normal import SobolQMCNormalSampler
from botorch.utils.multi_objective.box_decompositions.non_dominated import (
    FastNondominatedPartitioning,
)

from ecopt.pareto import hypervolume
from ecopt.samplers._boxes import SweepPartitioning, nondominated_boxes_3d
from ecopt.samplers._botorch_compat import fast_acquisition_class


def _improvement(lower, upper, y):
    lo = torch.as_tensor(lower, dtype=torch.double).reshape(-1, 3)
    up = torch.as_tensor(upper, dtype=torch.double).reshape(-1, 3)
    return float((torch.minimum(up, y) - lo).clamp_min(0).prod(-1).sum())


@pytest.mark.parametrize("case", range(60))
def test_boxes_give_the_exact_hypervolume_improvement(case):
    rng = np.random.default_rng(case)
    Y = rng.random((int(rng.integers(0, 30)), 3))
    if case % 3 == 0:  # ties in every coordinate
        Y = np.round(Y * 4) / 4
    if case % 4 == 0 and len(Y):  # duplicates, and points at the reference point
        Y = np.vstack([Y, Y[:3], [[0.1, 0.5, 0.5]]])
    ref = [0.1, 0.05, 0.0]
    lower, upper = nondominated_boxes_3d(Y.tolist(), ref)
    before = hypervolume(Y, ref) if len(Y) else 0.0
    for _ in range(6):
        y = rng.random(3) * 1.3
        exact = hypervolume(np.vstack([Y, y]) if len(Y) else y[None], ref) - before
        assert _improvement(lower, upper, torch.tensor(y)) == pytest.approx(exact, abs=1e-12)
    # No more boxes than BoTorch's decomposition of the same region (2k + 1 for k front points).
    fast = FastNondominatedPartitioning(torch.tensor(ref, dtype=torch.double),
                                        torch.tensor(Y, dtype=torch.double).reshape(-1, 3))
    assert len(lower) <= fast.get_hypercell_bounds().shape[-2] + 2


def test_partitioning_module_and_bad_shapes():
    Y = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], dtype=torch.double)
    ref = torch.zeros(3, dtype=torch.double)
    p = SweepPartitioning(ref_point=ref, Y=Y)
    assert p.get_hypercell_bounds().shape == (2, 5, 3)
    assert float(p.compute_hypervolume()) == pytest.approx(hypervolume(Y.numpy(), [0, 0, 0]))
    empty = SweepPartitioning(ref_point=ref, Y=-Y)  # nothing better than the reference
    assert empty.get_hypercell_bounds().shape == (2, 1, 3)  # the whole region, one box
    # An infinite coordinate is a value like any other (no crash, still exact).
    lower, upper = nondominated_boxes_3d([[float("inf"), 1.0, 1.0], [2.0, 2.0, 0.5]], [0, 0, 0])
    y = torch.tensor([3.0, 1.5, 2.0], dtype=torch.double)
    # [0, y] is 9; the points dominate 3 + 1.5 - 1 (overlap) of it.
    assert _improvement(lower, upper, y) == pytest.approx(9.0 - 3.5)
    with pytest.raises(ValueError, match="3 objectives"):
        SweepPartitioning(ref_point=torch.zeros(2), Y=Y[:, :2])


@pytest.mark.parametrize("log", [True, False])
def test_acquisition_values_match_botorch_at_three_objectives(log):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(25, 4, generator=g, dtype=torch.double)
    Y = torch.stack([X[:, 0] + X[:, 1], 1 - X[:, 0] + X[:, 2] ** 2, X[:, 3] - X[:, 1]], -1)
    model = SingleTaskGP(X, Y)
    model.eval()
    ref = [0.2, 0.3, -0.5]
    Xt = torch.rand(16, 1, 4, generator=g, dtype=torch.double)
    values = []
    base = qLogNoisyExpectedHypervolumeImprovement if log else qNoisyExpectedHypervolumeImprovement
    for cls in (base, fast_acquisition_class(base, sweep=True, dense=False)):
        acqf = cls(model=model, ref_point=ref, X_baseline=X, prune_baseline=False,
                   sampler=SobolQMCNormalSampler(torch.Size([32]), seed=1))
        with torch.no_grad():
            values.append(acqf(Xt))
    assert isinstance(acqf.partitioning.box_decompositions[0], SweepPartitioning)
    assert values[0].abs().min() > 0
    # qNEHVI is exact, so equal up to rounding; qLogNEHVI smooths the max/min over
    # box bounds, so another (equally exact) decomposition moves it by ~1e-6.
    torch.testing.assert_close(values[0], values[1], rtol=1e-5 if log else 1e-9, atol=0)
