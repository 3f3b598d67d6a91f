"""From trial records to model tensors: column encoding, training data, reference point.

The first stage of a qLogNEHVI proposal (BoTorch's own layout: encoding, models
and fitting, acquisition, optimisation). Search-space columns live in the unit
cube (:meth:`ecopt.SearchSpace.encode`); the model sees the same columns except
unordered categoricals, which become category indices for
:class:`~botorch.models.MixedSingleTaskGP` (a categorical kernel, not a
continuous axis). Integer and ordered columns stay in the cube and are discrete
dimensions for the mixed optimiser. Objectives are flipped to maximisation;
constraint metrics are modelled in their own units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ecopt import pareto
from ecopt._failures import tells_nothing
from ecopt._types import Params
from ecopt.objective import Constraint, Objective
from ecopt.samplers import _discrete
from ecopt.space import Categorical, Int, SearchSpace
from ecopt.trial import TrialRecord

__all__ = [
    "REF_POINT_RULES",
    "Encoding",
    "TrainingData",
    "encoding",
    "grid",
    "seen_keys",
    "to_model",
    "to_unit",
    "training_data",
]

#: How a missing threshold is inferred (see :func:`training_data`): ``"front"``, from the
#: observed Pareto front only, or ``"observed"``, from every feasible observation.
REF_POINT_RULES = ("front", "observed")

#: Integer axes with more values than this are optimised continuously and rounded.
MAX_DISCRETE_VALUES = 4096


@dataclass(frozen=True)
class Encoding:
    """How search-space columns map to model columns."""

    cat: dict[int, int]  # column -> number of categories (index-encoded)
    discrete: dict[int, list[float]]  # column -> allowed unit-cube values


def encoding(space: SearchSpace) -> Encoding:
    """The model encoding of ``space``'s searched columns."""
    cat: dict[int, int] = {}
    discrete: dict[int, list[float]] = {}
    for i, name in enumerate(space.searched_names):
        p = space[name]
        if isinstance(p, Categorical):
            if p.ordered:
                discrete[i] = [p.encode(c) for c in p.choices]
            else:
                cat[i] = len(p.choices)
        elif isinstance(p, Int) and len(p.values) <= MAX_DISCRETE_VALUES:
            discrete[i] = sorted({p.encode(v) for v in p.values})
    return Encoding(cat, discrete)


def grid(space: SearchSpace, enc: Encoding) -> list[list[float]] | None:
    """Per-column model-space values of a fully discrete space small enough to enumerate
    (else ``None``)."""
    cols: list[list[float]] = []
    for i in range(space.dim):
        if i in enc.cat:
            cols.append([float(j) for j in range(enc.cat[i])])
        elif i in enc.discrete:
            cols.append([float(v) for v in enc.discrete[i]])
        else:
            return None
    return cols if math.prod(len(c) for c in cols) <= _discrete.MAX_ENUMERATE else None


def seen_keys(space: SearchSpace, records: Sequence[TrialRecord],
              pending: Sequence[Params]) -> set[tuple[float, ...]]:
    """Keys of every configuration with a trial (complete, infeasible, failed) or running.

    A trial interrupted by a crash, kill or lost worker, or never started (a budget
    or a stopped call), tells nothing about its configuration and does not count
    (as in :class:`~ecopt.samplers.GridSampler`).
    """
    keys: set[tuple[float, ...]] = set()
    for params in [r.params for r in records if not tells_nothing(r)] + list(pending):
        try:
            keys.add(_discrete.config_key(space.encode(params)))
        except (KeyError, TypeError, ValueError):  # a trial from an older, different space
            continue
    return keys


def to_model(U: np.ndarray, enc: Encoding) -> np.ndarray:
    """Unit-cube rows ``(n, d)`` to model rows (categorical columns as indices)."""
    X = U.copy()
    for i, n in enc.cat.items():
        X[:, i] = np.minimum(np.floor(U[:, i] * n), n - 1)
    return X


def to_unit(X: np.ndarray, enc: Encoding) -> np.ndarray:
    """Model rows back to unit-cube rows (categories to their cells' centres)."""
    U = X.copy()
    for i, n in enc.cat.items():
        U[:, i] = (np.clip(np.round(X[:, i]), 0, n - 1) + 0.5) / n
    return np.clip(U, 0.0, 1.0)


@dataclass(frozen=True)
class TrainingData:
    """What the models are fitted to.

    Attributes:
        U: ``(n, d)`` unit-cube inputs of the complete trials with every metric.
        Y: ``(n, M + C)`` objectives (maximisation form), then constraint metrics.
        Yvar: ``(n, M + C)`` observed noise variances (NaN in columns without
            one), or ``None`` when no metric has observed noise.
        names: Column names of ``Y``.
        noisy: Names of the columns with observed noise.
        ref: ``(M,)`` reference point (maximisation form).
        ref_inferred: Per objective: inferred (no threshold)?
    """

    U: np.ndarray
    Y: np.ndarray
    Yvar: np.ndarray | None
    names: list[str]
    noisy: list[str]
    ref: list[float]
    ref_inferred: list[bool]


def training_data(space: SearchSpace, complete: Sequence[TrialRecord],
                  objectives: Sequence[Objective],
                  constraints: Sequence[Constraint], ref_point_rule: str = "front",
                  min_trials: int = 2) -> TrainingData:
    """Model inputs and outcomes of the complete trials, and the reference point.

    A column gets observed noise when every kept trial reported that metric's
    standard deviation (e.g. repeats of an inference phase); other columns keep
    an inferred noise level. The reference point is the objectives' thresholds;
    where one is missing it is inferred from the feasible trials by
    :func:`ecopt.pareto.infer_reference_point`: with ``ref_point_rule="front"``
    from their Pareto front only (BoTorch's rule: the front's nadir minus 10% of
    the front's range), with ``"observed"`` from all of them (the worst observed
    value minus 10% of the observed range, Optuna's ``GPSampler`` rule up to the
    margin). A front-based point gives no improvement to a point beyond the
    current front's extent (e.g. more accurate but costlier than the most
    accurate trial so far), and it moves inwards whenever the front's extreme
    point is dominated, so the search can stay confined to one part of the
    front (docs/benchmarks.md, "Energy-aware search").

    ``min_trials``: the complete trials needed (2; 1 when transfer sources' trials
    enter the model beside them).

    Raises:
        ValueError: when fewer than ``min_trials`` complete trials have every metric,
            or for an unknown ``ref_point_rule``.
    """
    if ref_point_rule not in REF_POINT_RULES:
        raise ValueError(f"ref_point_rule must be one of {list(REF_POINT_RULES)}, "
                         f"got {ref_point_rule!r}")
    M = len(objectives)
    U = np.array([space.encode(r.params) for r in complete]).reshape(len(complete), space.dim)
    Y = np.array([[o.sign * r.values[o.name] for o in objectives]
                  + [r.metrics.get(c.name, r.values.get(c.name, math.nan)) for c in constraints]
                  for r in complete], dtype=float).reshape(len(complete), -1)
    keep = ~np.isnan(Y).any(axis=1)
    U, Y = U[keep], Y[keep]
    if U.shape[0] < min_trials:
        raise ValueError(f"fewer than {min_trials} complete trial(s) with every metric")
    names = [o.name for o in objectives] + [c.name for c in constraints]
    kept = [r for r, k in zip(complete, keep) if k]
    noisy = [m for m in names if all(m in r.noise for r in kept)]
    Yvar = None
    if noisy:
        Yvar = np.array([[r.noise[m] ** 2 if m in noisy else np.nan for m in names]
                         for r in kept])
    thr = [None if o.threshold is None else o.sign * o.threshold for o in objectives]
    feasible = np.array([all(c.satisfied(v) for c, v in zip(constraints, y[M:])) for y in Y],
                        dtype=bool)
    base = Y[feasible, :M] if feasible.any() else Y[:, :M]
    inferred = pareto.infer_reference_point(base, front_only=ref_point_rule == "front")
    ref = [t if t is not None else float(v) for t, v in zip(thr, inferred)]
    return TrainingData(U, Y, Yvar, names, noisy, ref, [t is None for t in thr])
