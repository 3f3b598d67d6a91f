"""Optimising the acquisition function: continuous, mixed, or every configuration.

The last stage of a qLogNEHVI proposal. A continuous space goes to BoTorch's
``optimize_acqf`` (L-BFGS-B from ``num_restarts`` starts chosen among
``raw_samples`` random points, optionally with BoTorch's ``sample_around_best``
perturbations of the modelled Pareto set among them); a space with integer or
categorical columns to ``optimize_acqf_mixed_alternating``; a fully discrete
space small enough to enumerate to :mod:`ecopt.samplers._discrete` (every
configuration scored, none proposed twice). Sequential greedy for ``q > 1``.

No proposal repeats a configuration that failed (unless ``failures="ignore"``),
one that is running (pending) or one earlier in its own batch; without
``allow_repeats`` none repeats any trial's configuration either. The enumerated and scored paths choose among the others
only; the gradient paths' picks that land on one (a bound or a category the
optimiser keeps returning to) are replaced by the best of the scored candidates
that does not (:func:`_replace_repeats`; ``notes["replaced_repeats"]``).

An economy proposal (``Settings.score_only``) takes no gradient step: it scores
``raw_samples`` candidates in batched passes (scrambled Sobol points and, for
half of them, Gaussian perturbations of the observed Pareto set, each snapped
to a valid configuration) and keeps the best, as the enumerated path does.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ecopt._types import Params
from ecopt.samplers import _discrete
from ecopt.samplers._encoding import Encoding, grid, seen_keys, to_model, to_unit
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord

__all__ = ["Settings", "avoided", "optimize"]


@dataclass(frozen=True)
class Settings:
    """The optimiser's settings (see :class:`~ecopt.samplers.QLogNEHVISampler`)."""

    num_restarts: int
    raw_samples: int
    maxiter: int
    sample_around_best: bool
    allow_repeats: bool
    #: Score ``raw_samples`` candidates instead of optimising (an economy proposal).
    score_only: bool = False
    #: Never repeat a failed configuration (``False`` with ``failures="ignore"``).
    avoid_failed: bool = True


#: Standard deviation, in the unit cube, of the perturbations around the Pareto set.
AROUND_SD = 0.1


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


def candidates(space: SearchSpace, n: int, around: np.ndarray | None, seed: int) -> np.ndarray:
    """``n`` distinct valid unit-cube configurations to score (fewer if the space has fewer).

    Half are Gaussian perturbations (sd :data:`AROUND_SD`) of the rows of ``around``
    (the observed Pareto set) when it has any, the rest scrambled Sobol points;
    each is decoded and encoded again, so integers and categories are valid.
    Deterministic in its arguments.
    """
    from ecopt.samplers.random import sobol_points

    rng = np.random.default_rng(seed)
    near = np.empty((0, space.dim))
    if around is not None and len(around):
        k = n // 2
        base = around[rng.integers(0, len(around), size=k)]
        near = np.clip(base + rng.normal(0.0, AROUND_SD, size=base.shape), 0.0, 1.0)
    pts = np.vstack([near, sobol_points(space.dim, seed, 0, n - near.shape[0])])
    out: dict[tuple[float, ...], np.ndarray] = {}
    for x in pts:
        u = np.asarray(space.encode(space.decode(x)), dtype=float)
        out.setdefault(_discrete.config_key(u), u)
    return np.array(list(out.values()))


def avoided(space: SearchSpace, records: Sequence[TrialRecord], pending: Sequence[Params],
            allow_repeats: bool, failed: bool = True) -> set[tuple[float, ...]]:
    """Keys of the configurations a proposal must not repeat: running ones, failed ones
    (unless ``failed`` is false: ``failures="ignore"``, a failure teaches nothing), and
    (without ``allow_repeats``) every other one with a trial."""
    from ecopt.trial import TrialState

    kept = [r for r in records if (r.state is TrialState.FAILED and failed)
            or (r.state is not TrialState.FAILED and not allow_repeats)]
    return seen_keys(space, kept, pending)


def _key(space: SearchSpace, u: np.ndarray) -> tuple[float, ...]:
    """The key of the configuration a unit-cube row decodes to."""
    return _discrete.config_key(space.encode(space.decode(u)))


def _replace_repeats(acqf: Any, space: SearchSpace, enc: Encoding, U: np.ndarray,
                     avoid: set[tuple[float, ...]], s: Settings, around: np.ndarray | None,
                     seed: int) -> tuple[np.ndarray, int]:
    """``U`` with every row that repeats an avoided configuration or an earlier row
    replaced by the best-scoring of ``raw_samples`` candidates that repeats none
    (the kept rows pending while they are scored).

    Returns:
        ``(U, number replaced)``.
    """
    import torch

    taken = set(avoid)
    bad = []
    for i, u in enumerate(U):
        k = _key(space, u)
        if k in taken:
            bad.append(i)
        taken.add(k)
    if not bad:
        return U, 0
    pool = candidates(space, max(s.raw_samples, 64), around, seed)
    fresh = np.array([_discrete.config_key(u) not in taken for u in pool], dtype=bool)
    if fresh.sum() < len(bad):
        return U, 0  # nothing new left to propose: the acquisition's choice stands
    keep = np.array([i for i in range(len(U)) if i not in bad], dtype=int)
    base = acqf.X_pending
    if len(keep):
        kept = torch.tensor(to_model(U[keep], enc), dtype=torch.double)
        acqf.set_X_pending(kept if base is None else torch.cat([base, kept], dim=-2))
    try:
        new, _ = _discrete.optimize_discrete(
            acqf, torch.tensor(to_model(pool, enc), dtype=torch.double),
            torch.tensor(fresh), len(bad))
    finally:
        acqf.set_X_pending(base)
    out = U.copy()
    out[bad] = to_unit(new.detach().cpu().numpy().reshape(len(bad), -1), enc)
    return out, len(bad)


#: At most this many sets of ``raw_samples`` candidates an economy proposal draws when
#: fewer fresh ones than the batch asks for are among the first.
SCORED_ROUNDS = 8


def _scored(acqf: Any, space: SearchSpace, enc: Encoding, records: Sequence[TrialRecord],
            pending: Sequence[Params], q: int, s: Settings, around: np.ndarray | None,
            seed: int) -> tuple[Any, dict[str, Any]]:
    import torch

    avoid = avoided(space, records, pending, s.allow_repeats, s.avoid_failed)
    U = candidates(space, s.raw_samples, around, seed)
    keys = [_discrete.config_key(u) for u in U]
    for more in range(1, SCORED_ROUNDS):
        # a batch larger than the fresh candidates: draw more rather than repeat a trial
        # (or a point earlier in the batch); the candidates are distinct configurations
        if sum(k not in avoid for k in keys) >= q:
            break
        known = set(keys)
        extra = [(u, k) for u in candidates(space, s.raw_samples, around, seed + more)
                 for k in [_discrete.config_key(u)] if k not in known]
        if extra:
            U = np.vstack([U, [u for u, _ in extra]])
            keys += [k for _, k in extra]
    fresh = np.array([k not in avoid for k in keys], dtype=bool)
    never = avoided(space, records, pending, True, s.avoid_failed)  # failed or running
    allowed = np.array([k not in never for k in keys], dtype=bool)
    cand, repeats = _discrete.optimize_discrete(
        acqf, torch.tensor(to_model(U, enc), dtype=torch.double), torch.tensor(fresh), q,
        torch.tensor(allowed))
    return cand, {"optimiser": "scored", "n_candidates": len(U), "n_repeats": repeats}


def optimize(acqf: Any, space: SearchSpace, enc: Encoding, records: Sequence[TrialRecord],
             pending: Sequence[Params], q: int, s: Settings, around: np.ndarray | None = None,
             seed: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """The ``q`` best points of ``acqf``.

    Args:
        around: Unit-cube rows of the observed Pareto set (``score_only``'s
            perturbations start there).
        seed: Seeds ``score_only``'s candidates.

    Returns:
        ``(U (q, d) unit-cube points, notes)``: the notes say which optimiser ran
        (and, for an enumerated space, how many configurations it had and how
        many were new).
    """
    import torch

    cols = grid(space, enc)
    how: dict[str, Any]
    if cols is None and s.score_only:
        cand, how = _scored(acqf, space, enc, records, pending, q, s, around, seed)
    elif cols is None:
        cand = _local(acqf, space.dim, enc, q, s)
        mixed = bool(enc.cat or enc.discrete)
        how = {"optimiser": "mixed" if mixed else "continuous"}
        if not mixed:
            how["sample_around_best"] = s.sample_around_best
        U, replaced = _replace_repeats(
            acqf, space, enc, to_unit(cand.detach().cpu().numpy().reshape(q, -1), enc),
            avoided(space, records, pending, s.allow_repeats, s.avoid_failed), s, around, seed)
        if replaced:
            how["replaced_repeats"] = replaced
        return U, how
    else:
        choices = _discrete.enumerate_grid(cols)
        keys = [_discrete.config_key(u) for u in to_unit(choices, enc)]
        seen = seen_keys(space, records, pending)
        unseen = np.array([k not in seen for k in keys], dtype=bool)
        avoid = avoided(space, records, pending, True, s.avoid_failed)
        allowed = np.array([k not in avoid for k in keys], dtype=bool)  # not failed, not running
        fresh = unseen if not s.allow_repeats else allowed
        cand, repeats = _discrete.optimize_discrete(
            acqf, torch.tensor(choices, dtype=torch.double), torch.tensor(fresh), q,
            torch.tensor(allowed))
        how = {"optimiser": "enumerate", "n_configs": len(choices),
               "n_unseen": int(unseen.sum()), "n_repeats": repeats}
    return to_unit(cand.detach().cpu().numpy().reshape(q, -1), enc), how
