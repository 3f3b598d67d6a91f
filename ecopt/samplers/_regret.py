"""How much hypervolume a search can still gain, by the sampler's GPs: the stopping rule's numbers.

The multi-objective analogue of Optuna's ``RegretBoundEvaluator`` (which bounds
a single objective's regret by ``max UCB - max LCB`` and stops when that falls
below the statistical error of the objective). Here, in the objectives'
maximisation form, against the sampler's reference point ``r`` and the
observed front ``P`` (complete, feasible trials) with hypervolume ``HV(P)``:

* **upper bound** ``U = max_x HVI(mu(x) + sqrt(beta) sd(x) | P) / HV(P)``: the
  largest hypervolume improvement of the optimistic point (posterior mean plus
  ``sqrt(beta)`` posterior standard deviations of the latent function, per
  objective) over the candidates ``x``: 1,024 scrambled Sobol points of the
  search space (integer and ordered columns snapped to their values), the
  observed configurations, or every configuration of a fully discrete space
  of at most 2,048. ``beta`` by default follows GP-UCB's schedule as Optuna
  does: ``2 log(d t^2 pi^2 / (6 delta)) / 5`` with ``t`` observations and
  ``delta = 0.1``.
* **noise level** ``N = max_p HVI(p + s | P) / HV(P)`` over the front's points
  ``p``: the improvement one observation on the front would show from one noise
  standard deviation ``s`` per objective alone (``s``: the GP likelihood's noise,
  fitted, or observed from repeats where every trial recorded one).

Both are ratios of hypervolumes, so they are the same in the sampler's
standardised objective space as in the objectives' own units. Constraints
are ignored (an upper bound only gets larger). BoTorch is used through its
public API only (models' ``posterior``, ``FastNondominatedPartitioning``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ecopt import pareto
from ecopt.samplers._encoding import encoding, grid, to_model, training_data
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from ecopt.samplers.qnehvi import QLogNEHVISampler

__all__ = ["Bound", "N_CANDIDATES", "default_beta", "improvement_bound"]

#: Sobol candidates at which the optimistic point is evaluated.
N_CANDIDATES = 1024


def default_beta(d: int, n: int, delta: float = 0.1) -> float:
    """GP-UCB's ``beta_t`` (Srinivas et al. 2010) scaled down by 5, as Optuna's terminator.

    Args:
        d: Search-space dimension; n: observations; delta: confidence parameter.
    """
    return 2.0 * math.log(max(d, 1) * max(n, 1) ** 2 * math.pi ** 2 / (6.0 * delta)) / 5.0


@dataclass(frozen=True)
class Bound:
    """The criterion's numbers at one set of complete trials.

    Attributes:
        upper_bound: ``U``, the largest relative hypervolume improvement of an
            optimistic point (``inf`` while the front has no hypervolume).
        noise: ``N``, the relative improvement one noise sd per objective gives.
        hypervolume: ``HV(P)`` in the objectives' units (maximisation form).
        beta: The UCB's ``beta`` (the point is ``mu + sqrt(beta) sd``).
        noise_sd: Per objective, the noise standard deviation in its units.
        noise_source: Per objective, ``"fitted"`` or ``"observed"`` (repeats).
        n_candidates: Candidate configurations evaluated.
        n_observations: Complete trials the GPs were fitted to.
    """

    upper_bound: float
    noise: float
    hypervolume: float
    beta: float
    noise_sd: list[float] = field(default_factory=list)
    noise_source: list[str] = field(default_factory=list)
    n_candidates: int = 0
    n_observations: int = 0


def _candidates(space: SearchSpace, U_obs: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Model-space rows ``(k, d)``: the enumerated grid, or Sobol points plus the observed."""
    from ecopt.samplers import _discrete
    from ecopt.samplers.random import sobol_points

    enc = encoding(space)
    cols = grid(space, enc)
    if cols is not None:
        return np.asarray(_discrete.enumerate_grid(cols), dtype=float)
    U = sobol_points(space.dim, seed, 0, n)
    for i, vals in enc.discrete.items():  # snap integer and ordered columns to their values
        v = np.asarray(vals, dtype=float)
        U[:, i] = v[np.abs(U[:, i][:, None] - v[None, :]).argmin(axis=1)]
    return to_model(np.vstack([U, U_obs]), enc)


def _noise_sd(model: Any) -> float:
    """One observation's noise sd in the outcome's units (the likelihood's, untransformed)."""
    noise = model.likelihood.noise.detach().reshape(-1)
    var = float(noise.mean())
    tf = getattr(model, "outcome_transform", None)
    stdvs = getattr(tf, "stdvs", None)
    if stdvs is not None:
        var *= float(stdvs.detach().reshape(-1)[0]) ** 2
    return math.sqrt(max(var, 0.0))


def _hvi(cells: Any, Y: Any) -> Any:
    """Hypervolume improvement of each row of ``Y`` ``(k, M)`` over the cells of the
    non-dominated region (``(2, c, M)``, BoTorch's ``get_hypercell_bounds``)."""
    lo, hi = cells[0], cells[1]
    edge = (Y.unsqueeze(-2).minimum(hi) - lo).clamp_min(0.0)  # (k, c, M)
    return edge.prod(-1).sum(-1)


def improvement_bound(sampler: QLogNEHVISampler, space: SearchSpace,
                      records: Sequence[TrialRecord], beta: float | None = None,
                      delta: float = 0.1, n_candidates: int = N_CANDIDATES) -> Bound:
    """:class:`Bound` of ``sampler``'s GPs fitted to the complete trials in ``records``.

    The GPs are fitted as the sampler's proposals fit them (one per objective,
    the same priors, tolerances and observed noise), on one thread.

    Raises:
        ValueError: with fewer than 2 complete trials with every objective.
    """
    import torch
    from botorch.utils.multi_objective.box_decompositions.non_dominated import (
        FastNondominatedPartitioning,
    )

    from ecopt.samplers import _models
    from ecopt.samplers._botorch_compat import UNAVAILABLE
    from ecopt.samplers._proposal import one_thread

    complete = [r for r in records if r.state is TrialState.COMPLETE]
    data = training_data(space, complete, sampler.objectives, sampler.constraints,
                         sampler.ref_point_rule)
    M = len(sampler.objectives)
    enc = encoding(space)
    n = int(data.U.shape[0])
    b = default_beta(space.dim, n, delta) if beta is None else float(beta)
    seed = int(sampler.seed or 0)
    dtype = torch.double
    with one_thread(seed * 1_000_003 + len(records)):
        X = torch.tensor(to_model(data.U, enc), dtype=dtype)
        Y = torch.tensor(data.Y[:, :M], dtype=dtype)
        Yvar = None if data.Yvar is None else torch.tensor(data.Yvar[:, :M], dtype=dtype)
        fitted = _models.fit_outputs(
            X, Y, Yvar, cat_dims=sorted(enc.cat), names=data.names[:M], warm=None,
            cold_check=False, warm_ftol=sampler.warm_ftol, cold_ftol=sampler.cold_ftol,
            closed_form="closed_form_fit" not in UNAVAILABLE, stacked=False,
            lengthscale_prior=sampler.lengthscale_prior)
        Xc = torch.tensor(_candidates(space, data.U, n_candidates, seed), dtype=dtype)
        with torch.no_grad():
            posts = [m.posterior(Xc) for m in fitted.models]  # one posterior per model
            mean = torch.stack([p.mean.reshape(-1) for p in posts], -1)
            sd = torch.stack([p.variance.reshape(-1) for p in posts], -1).clamp_min(0.0).sqrt()
        noise_sd = [_noise_sd(m) for m in fitted.models]
    feasible = np.array([all(c.satisfied(v) for c, v in zip(sampler.constraints, y[M:]))
                         for y in data.Y], dtype=bool)
    front = data.Y[feasible, :M]
    front = front[pareto.non_dominated(front) & (front > np.asarray(data.ref)).all(axis=1)]
    ref = torch.tensor(data.ref, dtype=dtype)
    hv = pareto.hypervolume(front, data.ref) if len(front) else 0.0
    sources = ["observed" if name in data.noisy else "fitted" for name in data.names[:M]]
    def bound(upper: float, noise: float) -> Bound:
        return Bound(upper, noise, hv, b, noise_sd, sources, int(Xc.shape[0]), n)

    if hv <= 0:
        return bound(math.inf, math.inf)
    F = torch.tensor(front, dtype=dtype)
    cells = FastNondominatedPartitioning(ref_point=ref, Y=F).get_hypercell_bounds()
    upper = float(_hvi(cells, mean + math.sqrt(b) * sd).max()) / hv
    noise = float(_hvi(cells, F + F.new_tensor(noise_sd)).max()) / hv
    return bound(upper, noise)
