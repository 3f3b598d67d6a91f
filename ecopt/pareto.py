"""Pareto fronts: non-dominated filtering, exact hypervolume, knee point.

Functions take ``Y`` as an ``(n, M)`` array and ``directions`` as a sequence of
``"max"``/``"min"`` (default: all ``"max"``). Nothing here needs torch.

Example:
    >>> import numpy as np
    >>> from ecopt import pareto
    >>> Y = np.array([[0.9, 10.0], [0.8, 20.0], [0.7, 5.0]])
    >>> pareto.non_dominated(Y, ["max", "max"])
    array([ True,  True, False])
    >>> pareto.hypervolume(Y, ref_point=[0.5, 0.0])
    5.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "to_maximization",
    "non_dominated",
    "hypervolume",
    "knee_point",
    "dominates",
    "infer_reference_point",
]


def _as_2d(Y: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    arr = np.asarray(Y, dtype=float)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1) if arr.size else arr.reshape(0, 0)
    if arr.ndim != 2:
        raise ValueError(f"Y must be an (n, M) array, got shape {arr.shape}")
    return arr


def to_maximization(Y: Sequence[Sequence[float]] | np.ndarray,
                    directions: Sequence[str] | None = None) -> np.ndarray:
    """Flip ``min`` columns so larger is better everywhere."""
    arr = _as_2d(Y)
    if directions is None:
        return arr.copy()
    if arr.size and len(directions) != arr.shape[1]:
        raise ValueError(f"got {len(directions)} directions for {arr.shape[1]} objectives")
    bad = [d for d in directions if d not in ("max", "min")]
    if bad:
        raise ValueError(f"directions must be 'max' or 'min', got {bad}")
    signs = np.array([1.0 if d == "max" else -1.0 for d in directions])
    return arr * signs if arr.size else arr.copy()


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` (maximisation)."""
    return bool(np.all(a >= b) and np.any(a > b))


def non_dominated(Y: Sequence[Sequence[float]] | np.ndarray,
                  directions: Sequence[str] | None = None) -> np.ndarray:
    """Mask of the non-dominated rows of ``Y``.

    Duplicated points are all kept (none dominates the other). Rows with NaN are
    never on the front.

    Returns:
        An ``(n,)`` bool array.
    """
    Z = to_maximization(Y, directions)
    n = Z.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    valid = ~np.isnan(Z).any(axis=1)
    mask = valid.copy()
    idx = np.flatnonzero(valid)
    # Sort by the first objective descending so dominators tend to come first.
    order = idx[np.argsort(-Z[idx, 0], kind="stable")]
    for i in order:
        if not mask[i]:
            continue
        zi = Z[i]
        others = mask.copy()
        others[i] = False
        cand = np.flatnonzero(others)
        if cand.size == 0:
            continue
        dominated = np.all(zi >= Z[cand], axis=1) & np.any(zi > Z[cand], axis=1)
        mask[cand[dominated]] = False
    return mask


def _hv_2d(P: np.ndarray, r: np.ndarray) -> float:
    P = P[np.argsort(-P[:, 0], kind="stable")]
    hv = 0.0
    best_y = r[1]
    for x, y in P:
        if y > best_y:
            hv += (x - r[0]) * (y - best_y)
            best_y = y
    return float(hv)


def _hv_rec(P: np.ndarray, r: np.ndarray) -> float:
    """Exact hypervolume by slicing along the last objective (HSO)."""
    m = P.shape[1]
    if P.shape[0] == 0:
        return 0.0
    if m == 1:
        return float(P[:, 0].max() - r[0])
    if m == 2:
        return _hv_2d(P, r)
    P = P[np.argsort(-P[:, -1], kind="stable")]
    hv = 0.0
    for k in range(P.shape[0]):
        upper = P[k, -1]
        lower = P[k + 1, -1] if k + 1 < P.shape[0] else r[-1]
        depth = upper - lower
        if depth <= 0:
            continue
        sl = P[: k + 1, :-1]
        sl = sl[non_dominated(sl)]
        hv += depth * _hv_rec(sl, r[:-1])
    return float(hv)


def hypervolume(Y: Sequence[Sequence[float]] | np.ndarray, ref_point: Sequence[float],
                directions: Sequence[str] | None = None) -> float:
    """Exact hypervolume dominated by ``Y`` and bounded by ``ref_point``.

    Args:
        Y: ``(n, M)`` objective values (any rows; dominated ones are dropped).
        ref_point: ``(M,)`` reference point in the same units and directions as ``Y``.
        directions: ``"max"``/``"min"`` per objective (default all ``"max"``).

    Returns:
        The hypervolume (0 when no point is better than the reference point in
        every objective).
    """
    Z = to_maximization(Y, directions)
    r = to_maximization(np.asarray(ref_point, dtype=float).reshape(1, -1), directions)[0]
    if Z.shape[0] == 0:
        return 0.0
    if Z.shape[1] != r.shape[0]:
        raise ValueError(f"ref_point has {r.shape[0]} values for {Z.shape[1]} objectives")
    Z = Z[~np.isnan(Z).any(axis=1)]
    Z = Z[np.all(Z > r, axis=1)]
    if Z.shape[0] == 0:
        return 0.0
    Z = np.unique(Z[non_dominated(Z)], axis=0)
    return _hv_rec(Z, r)


def knee_point(Y: Sequence[Sequence[float]] | np.ndarray,
               directions: Sequence[str] | None = None) -> int:
    """Index (into ``Y``) of the front's knee: the front point nearest the ideal
    point after scaling each objective's front range to ``[0, 1]``.

    Raises:
        ValueError: when ``Y`` has no valid row.
    """
    Z = to_maximization(Y, directions)
    mask = non_dominated(Z)
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        raise ValueError("knee_point needs at least one valid point, got none")
    F = Z[idx]
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = (F - lo) / span
    dist = np.linalg.norm(1.0 - scaled, axis=1)
    return int(idx[int(np.argmin(dist))])


def infer_reference_point(Y: Sequence[Sequence[float]] | np.ndarray, scale: float = 0.1,
                          directions: Sequence[str] | None = None) -> np.ndarray:
    """A reference point just worse than the front's nadir (BoTorch's rule).

    ``nadir - scale * (ideal - nadir)`` over the non-dominated points; with a
    single point the range is ``|nadir|`` (1 where that is 0).

    Returns:
        ``(M,)`` array in the same directions as ``Y``.

    Raises:
        ValueError: when ``Y`` has no valid row.
    """
    Z = to_maximization(Y, directions)
    Z = Z[~np.isnan(Z).any(axis=1)] if Z.size else Z
    if Z.shape[0] == 0:
        raise ValueError("cannot infer a reference point from no observations")
    F = Z[non_dominated(Z)]
    nadir, ideal = F.min(axis=0), F.max(axis=0)
    if F.shape[0] == 1:
        rng = np.abs(nadir)
        rng = np.where(rng == 0, 1.0, rng)
    else:
        rng = ideal - nadir
        rng = np.where(rng == 0, np.where(np.abs(nadir) > 0, np.abs(nadir), 1.0), rng)
    ref = nadir - scale * rng
    return to_maximization(ref.reshape(1, -1), directions)[0]
