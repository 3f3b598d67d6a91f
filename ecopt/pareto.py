"""Pareto fronts: non-dominated filtering, exact hypervolume, knee point, reference point.

Functions take ``Y`` as an ``(n, M)`` array and ``directions`` as a sequence of
``"max"``/``"min"`` (default: all ``"max"``). Nothing here needs torch.

This module is the one home of the study-level rules too: which trials form
the front (:func:`front_records`) and which reference point a study uses
(:func:`study_reference_point`); the study, every report and the samplers call
these.

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
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ecopt.objective import Objective
    from ecopt.record import TrialRecord

__all__ = [
    "to_maximization",
    "non_dominated",
    "nondominated_ranks",
    "hypervolume",
    "hypervolume_contributions",
    "knee_point",
    "dominates",
    "infer_reference_point",
    "feasible_complete",
    "objective_matrix",
    "front_records",
    "study_reference_point",
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
    never on the front. Two objectives take one sort (``O(n log n)``); more
    compare each candidate with the front found so far (``O(n * front)``).

    Returns:
        An ``(n,)`` bool array.
    """
    Z = to_maximization(Y, directions)
    n = Z.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    valid = ~np.isnan(Z).any(axis=1)
    idx = np.flatnonzero(valid)
    mask = np.zeros(n, dtype=bool)
    if idx.size == 0:
        return mask
    if Z.shape[1] == 1:
        mask[idx] = Z[idx, 0] == Z[idx, 0].max()
        return mask
    if Z.shape[1] == 2:
        mask[idx[_front_2d(Z[idx])]] = True
        return mask
    # Lexicographic descending order: no row is dominated by a row after it.
    sub = Z[idx]
    order = np.lexsort(tuple(-sub[:, j] for j in range(sub.shape[1] - 1, -1, -1)))
    front: list[int] = []
    F = np.empty((0, sub.shape[1]))
    for i in order:
        z = sub[i]
        if F.shape[0] and bool(np.any(np.all(F >= z, axis=1) & np.any(F > z, axis=1))):
            continue
        front.append(i)
        F = sub[front]
    mask[idx[np.asarray(front, dtype=int)]] = True
    return mask


def _front_2d(Z: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of a NaN-free ``(n, 2)`` maximisation array."""
    order = np.lexsort((-Z[:, 1], -Z[:, 0]))  # x descending, then y descending
    keep = np.zeros(Z.shape[0], dtype=bool)
    best_y = -np.inf
    k = 0
    n = order.size
    while k < n:
        # Rows with the same x: the group's best y survives (with its duplicates)
        # when it beats every y seen at a larger x.
        j = k
        x = Z[order[k], 0]
        while j < n and Z[order[j], 0] == x:
            j += 1
        top = Z[order[k], 1]
        if top > best_y:
            for t in range(k, j):
                if Z[order[t], 1] == top:
                    keep[order[t]] = True
            best_y = top
        k = j
    return np.flatnonzero(keep)


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
        if sl.shape[1] > 2:  # the 2-D sweep skips dominated points by itself
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


def nondominated_ranks(Y: Sequence[Sequence[float]] | np.ndarray,
                       directions: Sequence[str] | None = None) -> np.ndarray:
    """Non-dominated sorting: the front index of every row (0 = the Pareto front).

    Rank ``k`` rows are non-dominated once the rows of ranks ``< k`` are
    removed (NSGA-II's sorting). Rows with NaN get rank ``n`` (after every
    real front).

    Returns:
        An ``(n,)`` int array.
    """
    Z = to_maximization(Y, directions)
    n = Z.shape[0]
    ranks = np.full(n, n, dtype=int)
    if n == 0:
        return ranks
    left = np.flatnonzero(~np.isnan(Z).any(axis=1))
    k = 0
    while left.size:
        mask = non_dominated(Z[left])
        ranks[left[mask]] = k
        left = left[~mask]
        k += 1
    return ranks


def hypervolume_contributions(Y: Sequence[Sequence[float]] | np.ndarray,
                              ref_point: Sequence[float] | np.ndarray,
                              directions: Sequence[str] | None = None) -> np.ndarray:
    """Each row's exclusive hypervolume: what the set loses without that row.

    ``HV(Y) - HV(Y without row i)``. Dominated rows, rows with NaN and rows not
    better than ``ref_point`` in every objective contribute 0; so do exact
    duplicates (each covers the other).

    Args:
        Y: ``(n, M)`` objective values.
        ref_point: ``(M,)`` reference point in the same units and directions.
        directions: ``"max"``/``"min"`` per objective (default all ``"max"``).

    Returns:
        An ``(n,)`` float array, ``>= 0``.
    """
    Z = to_maximization(Y, directions)
    r = to_maximization(np.asarray(ref_point, dtype=float).reshape(1, -1), directions)[0]
    n = Z.shape[0]
    out = np.zeros(n)
    if n == 0:
        return out
    if Z.shape[1] != r.shape[0]:
        raise ValueError(f"ref_point has {r.shape[0]} values for {Z.shape[1]} objectives")
    ok = ~np.isnan(Z).any(axis=1) & np.all(Z > r, axis=1)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return out
    front = idx[non_dominated(Z[idx])]
    F = Z[front]
    if front.size < idx.size:
        # Without a front point, rows it dominated may fill part of its box:
        # count what really goes (leave one out over every valid row).
        V = Z[idx]
        total = hypervolume(V, r)
        for i in front:
            out[i] = max(total - hypervolume(V[idx != i], r), 0.0)
        return out
    if F.shape[1] == 2:
        # Sorted by the first objective (descending), each point's exclusive box
        # reaches to its neighbours; duplicates share theirs and keep 0.
        order = np.lexsort((-F[:, 1], -F[:, 0]))
        P = F[order]
        for k in range(P.shape[0]):
            x_lo = P[k + 1, 0] if k + 1 < P.shape[0] else r[0]
            y_lo = P[k - 1, 1] if k > 0 else r[1]
            out[front[order[k]]] = max(P[k, 0] - x_lo, 0.0) * max(P[k, 1] - y_lo, 0.0)
        return out
    total = _hv_rec(np.unique(F, axis=0), r)
    for j, i in enumerate(front):
        rest = np.delete(F, j, axis=0)
        rest = np.unique(rest[non_dominated(rest)], axis=0) if rest.shape[0] else rest
        out[i] = max(total - (_hv_rec(rest, r) if rest.shape[0] else 0.0), 0.0)
    return out


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
                          directions: Sequence[str] | None = None, *,
                          front_only: bool = True) -> np.ndarray:
    """A reference point just worse than the front's nadir (BoTorch's rule).

    ``nadir - scale * (ideal - nadir)`` over the non-dominated points; with a
    single point the range is ``|nadir|`` (1 where that is 0).

    Args:
        Y: ``(n, M)`` objective values.
        scale: Fraction of the range to step beyond the nadir.
        directions: ``"max"``/``"min"`` per objective (default all ``"max"``).
        front_only: Use only the non-dominated rows of ``Y`` (default). ``False``
            uses every row: for several studies' fronts pooled together, so that
            the point sits below the worst front point of any of them.

    Returns:
        ``(M,)`` array in the same directions as ``Y``.

    Raises:
        ValueError: when ``Y`` has no valid row.
    """
    Z = to_maximization(Y, directions)
    Z = Z[~np.isnan(Z).any(axis=1)] if Z.size else Z
    if Z.shape[0] == 0:
        raise ValueError("cannot infer a reference point from no observations")
    F = Z[non_dominated(Z)] if front_only else Z
    nadir, ideal = F.min(axis=0), F.max(axis=0)
    if F.shape[0] == 1:
        rng = np.abs(nadir)
        rng = np.where(rng == 0, 1.0, rng)
    else:
        rng = ideal - nadir
        rng = np.where(rng == 0, np.where(np.abs(nadir) > 0, np.abs(nadir), 1.0), rng)
    ref = nadir - scale * rng
    return to_maximization(ref.reshape(1, -1), directions)[0]


# ---------------------------------------------------------------------------
# study-level rules (records and objectives)
# ---------------------------------------------------------------------------


def feasible_complete(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The complete trials within every constraint whose figures are not meter noise.

    The only ones a front, a knee, a best-of or a reference point may use: a
    trial whose returned figures came from a window too short for its meter
    (:attr:`~ecopt.TrialRecord.unreliable`) is left out
    (:func:`ecopt.record.excluded_reason` says why).
    """
    from ecopt.record import TrialState

    return [r for r in records if r.state is TrialState.COMPLETE and r.feasible
            and not r.unreliable]


def objective_matrix(records: Sequence[TrialRecord], objectives: Sequence[Objective]) -> np.ndarray:
    """``(n, M)`` objective values of ``records``, in the objectives' units and directions."""
    names = [o.name for o in objectives]
    return np.array([[r.values[k] for k in names] for r in records], dtype=float).reshape(
        len(records), len(names))


def front_records(records: Sequence[TrialRecord], objectives: Sequence[Objective]
                  ) -> list[TrialRecord]:
    """The study's Pareto front: non-dominated complete trials within the constraints.

    Returns:
        Those records, in the order given.
    """
    ok = feasible_complete(records)
    if not ok:
        return []
    mask = non_dominated(objective_matrix(ok, objectives), [o.direction for o in objectives])
    return [r for r, m in zip(ok, mask) if m]


def study_reference_point(records: Sequence[TrialRecord], objectives: Sequence[Objective]
                          ) -> tuple[float, ...] | None:
    """The reference point of a study: each objective's threshold, inferred where none is set.

    Missing thresholds come from :func:`infer_reference_point` over the
    complete, constraint-satisfying trials.

    Returns:
        One value per objective, or ``None`` when a threshold is missing and no
        trial completed within the constraints.
    """
    thr = [o.threshold for o in objectives]
    if all(t is not None for t in thr):
        return tuple(float(t) for t in thr)  # type: ignore[arg-type]
    ok = feasible_complete(records)
    if not ok:
        return None
    inferred = infer_reference_point(objective_matrix(ok, objectives),
                                     directions=[o.direction for o in objectives])
    return tuple(float(t) if t is not None else float(v) for t, v in zip(thr, inferred))
