"""Optimising the acquisition function: continuous, mixed, or every configuration.

The last stage of a qLogNEHVI proposal. A continuous space goes to BoTorch's
``optimize_acqf`` (L-BFGS-B from ``num_restarts`` starts chosen among
``raw_samples`` random points, optionally with BoTorch's ``sample_around_best``
perturbations of the modelled Pareto set among them); a space with integer or
categorical columns to ``optimize_acqf_mixed_alternating``; a fully discrete
space small enough to enumerate to :mod:`ecopt.samplers._discrete` (every
configuration scored, none proposed twice). Sequential greedy for ``q > 1``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecopt._types import Params
from ecopt.samplers import _discrete
from ecopt.samplers._encoding import Encoding, grid, seen_keys, to_unit
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

__all__ = ["Settings", "optimize"]


@dataclass(frozen=True)
class Settings:
    """The optimiser's settings (see :class:`~ecopt.samplers.QLogNEHVISampler`)."""

    num_restarts: int
    raw_samples: int
    maxiter: int
    sample_around_best: bool
    allow_repeats: bool


def _bounds(d: int, enc: Encoding) -> Any:
    import torch

    bounds = torch.zeros(2, d, dtype=torch.double)
    bounds[1] = 1.0
    for i, k in enc.cat.items():
        bounds[1, i] = float(k - 1)
    for i, vals in enc.discrete.items():  # the mixed optimiser needs the exact range
        bounds[0, i], bounds[1, i] = min(vals), max(vals)
    return bounds


def _local(acqf: Any, d: int, enc: Encoding, q: int, s: Settings) -> Any:
    from botorch.optim import optimize_acqf
    from botorch.optim.optimize_mixed import optimize_acqf_mixed_alternating

    bounds = _bounds(d, enc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if enc.cat or enc.discrete:
            cand, _ = optimize_acqf_mixed_alternating(
                acq_function=acqf, bounds=bounds,
                discrete_dims={i: v for i, v in enc.discrete.items()} or None,
                cat_dims={i: [float(j) for j in range(k)] for i, k in enc.cat.items()} or None,
                q=q, num_restarts=s.num_restarts, raw_samples=s.raw_samples,
                options={"maxiter_continuous": s.maxiter}, sequential=True)
        else:
            opts: dict[str, bool | float | int | str] = {"maxiter": s.maxiter}
            if s.sample_around_best:
                opts["sample_around_best"] = True
            cand, _ = optimize_acqf(acqf, bounds=bounds, q=q, num_restarts=s.num_restarts,
                                    raw_samples=s.raw_samples, options=opts, sequential=True)
    return cand


def optimize(acqf: Any, space: SearchSpace, enc: Encoding, records: Sequence[TrialRecord],
             pending: Sequence[Params], q: int, s: Settings) -> tuple[np.ndarray, dict[str, Any]]:
    """The ``q`` best points of ``acqf``.

    Returns:
        ``(U (q, d) unit-cube points, notes)``: the notes say which optimiser ran
        (and, for an enumerated space, how many configurations it had and how
        many were new).
    """
    import torch

    cols = grid(space, enc)
    if cols is None:
        cand = _local(acqf, space.dim, enc, q, s)
        mixed = bool(enc.cat or enc.discrete)
        how: dict[str, Any] = {"optimiser": "mixed" if mixed else "continuous"}
        if not mixed:
            how["sample_around_best"] = s.sample_around_best
    else:
        choices = _discrete.enumerate_grid(cols)
        seen = seen_keys(space, records, pending)
        unseen = np.array([_discrete.config_key(u) not in seen for u in to_unit(choices, enc)],
                          dtype=bool)
        fresh = np.ones_like(unseen) if s.allow_repeats else unseen
        cand, repeats = _discrete.optimize_discrete(
            acqf, torch.tensor(choices, dtype=torch.double), torch.tensor(fresh), q)
        how = {"optimiser": "enumerate", "n_configs": len(choices),
               "n_unseen": int(unseen.sum()), "n_repeats": repeats}
    return to_unit(cand.detach().cpu().numpy().reshape(q, -1), enc), how
