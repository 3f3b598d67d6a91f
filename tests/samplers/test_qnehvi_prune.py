"""The baseline pruning: BoTorch's rule, a vectorised non-domination test."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
from botorch.acquisition.multi_objective.utils import prune_inferior_points_multi_objective
from botorch.models import SingleTaskGP
from botorch.utils.multi_objective.pareto import is_non_dominated

from ecopt.samplers._pruning import pareto_mask as _pareto_mask
from ecopt.samplers._pruning import prune_baseline as _prune_baseline


@pytest.mark.parametrize("m", [2, 3, 4])
def test_pareto_mask_matches_botorch_with_ties_and_duplicates(m):
    g = torch.Generator().manual_seed(m)
    # Small integer values: many ties in single coordinates and exact duplicate points.
    Y = torch.randint(0, 4, (257, 23, m), generator=g).double()
    expected = is_non_dominated(Y, deduplicate=False)
    assert torch.equal(_pareto_mask(Y), expected)
    assert torch.equal(_pareto_mask(Y, max_elements=3 * 23 * 23 * m), expected)  # chunked
    Y = torch.randn(64, 57, m, generator=g, dtype=torch.double)
    assert torch.equal(_pareto_mask(Y), is_non_dominated(Y, deduplicate=False))


def test_pareto_mask_edge_shapes():
    assert _pareto_mask(torch.zeros(5, 0, 2)).shape == (5, 0)
    one = _pareto_mask(torch.randn(3, 1, 2, dtype=torch.double))
    assert one.all() and one.shape == (3, 1)
    # -inf is a value like any other (a sample can be very bad in one objective).
    Y = torch.tensor([[[1.0, -torch.inf], [0.0, 0.0], [1.0, 0.0]]])
    assert _pareto_mask(Y).tolist() == [[False, False, True]]
    alone = torch.tensor([[[1.0, -torch.inf]], [[-torch.inf, -torch.inf]]])
    assert _pareto_mask(alone).all()
    assert torch.equal(_pareto_mask(alone), is_non_dominated(alone, deduplicate=False))


@pytest.mark.parametrize("constrained", [False, True])
def test_prune_keeps_exactly_the_points_botorch_keeps(constrained):
    g = torch.Generator().manual_seed(1)
    X = torch.rand(70, 3, generator=g, dtype=torch.double)
    Y = torch.stack([X.sum(-1), X[:, 1] ** 2 - X[:, 0], X[:, 2]], dim=-1)
    Y = Y + 0.05 * torch.randn(Y.shape, generator=g, dtype=torch.double)
    model = SingleTaskGP(X, Y)
    model.eval()
    objective = IdentityMCMultiOutputObjective(outcomes=[0, 1])
    ref = torch.tensor([0.8, -0.6], dtype=torch.double)
    constraints = [lambda Z: Z[..., 2] - 0.5] if constrained else None
    torch.manual_seed(7)
    expected = prune_inferior_points_multi_objective(model, X, ref, objective, constraints)
    torch.manual_seed(7)
    got = _prune_baseline(model, X, ref, objective, constraints)
    assert 0 < got.shape[0] < X.shape[0]
    assert torch.equal(got, expected)
