"""Learning-curve extrapolation: where one objective's curve ends, from its first steps.

Three predictors of a curve's value at a later step ``S`` from its points up
to step ``s``:

* ``"last"``: the last value (the curve has settled);
* ``"linear"``: the recent rate carried on, ``y_n + (y_n - y_1) / (s_n - s_1) * (S - s_n)``
  (cumulative quantities such as the energy spent so far);
* ``"saturating"``: the best least-squares fit among two saturating
  families, ``y = c + a * (1 + s) ** -alpha`` (power law) and
  ``y = c + a * exp(-beta * s / S)`` (exponential), with ``alpha`` and
  ``beta`` on fixed grids and ``(c, a)`` solved in closed form for each, so a
  fit is a few array operations (no iterative optimiser, no failure to
  converge). The change it predicts is capped at twice the curve's range so
  far (a fit to noise does not run away).

Every predictor returns a point value; the uncertainty comes from calibration
against finished trials (see :mod:`ecopt.pruners.dominance`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PREDICTORS", "predict", "fit_saturating", "MIN_POINTS_SATURATING"]

PREDICTORS = ("last", "linear", "saturating")
#: A 3-parameter family needs at least one residual degree of freedom.
MIN_POINTS_SATURATING = 4

_ALPHAS = np.geomspace(0.05, 3.0, 24)
_BETAS = np.geomspace(0.3, 20.0, 24)


def _family(kind: int, rates: np.ndarray, steps: np.ndarray, final_step: float) -> np.ndarray:
    """``(G, n)`` values of family ``kind`` (0 power law, 1 exponential) at ``steps``."""
    s = np.asarray(steps, dtype=float)
    if kind == 0:
        return (1.0 + np.maximum(s, 0.0))[None, :] ** -rates[:, None]
    return np.exp(-rates[:, None] * s[None, :] / max(final_step, 1.0))


def _best(B: np.ndarray, y: np.ndarray) -> tuple[int, float, float, float]:
    """Least squares of ``y = c + a * B[g]`` for every row ``g``: ``(g, c, a, sse)`` of the best."""
    Bc = B - B.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sbb = np.einsum("gn,gn->g", Bc, Bc)
    sby = Bc @ yc
    ok = sbb > 1e-300
    a = np.where(ok, sby / np.where(ok, sbb, 1.0), 0.0)
    sse = np.where(ok, float(yc @ yc) - a * sby, np.inf)
    g = int(np.argmin(sse))
    return g, float(y.mean() - a[g] * B[g].mean()), float(a[g]), float(sse[g])


def fit_saturating(steps: np.ndarray, y: np.ndarray, final_step: float
                   ) -> tuple[float, float]:
    """Fit both families and return ``(prediction at final_step, residual sd)``.

    Each family's rate is searched on a coarse geometric grid, then on a fine
    grid between the best point's neighbours.

    Args:
        steps: ``(n,)`` steps, increasing, ``n >= MIN_POINTS_SATURATING``.
        y: ``(n,)`` values.
        final_step: Where to predict.

    Returns:
        The best fit's value at ``final_step`` (capped, see the module
        docstring) and ``sqrt(SSE / (n - 3))``.
    """
    best: tuple[float, float, float, int, float] | None = None  # sse, c, a, kind, rate
    for kind, grid in ((0, _ALPHAS), (1, _BETAS)):
        g, c, a, sse = _best(_family(kind, grid, steps, final_step), y)
        lo, hi = grid[max(g - 1, 0)], grid[min(g + 1, grid.size - 1)]
        fine = np.geomspace(lo, hi, 17)
        g2, c2, a2, sse2 = _best(_family(kind, fine, steps, final_step), y)
        if sse2 <= sse:
            c, a, sse, rate = c2, a2, sse2, float(fine[g2])
        else:
            rate = float(grid[g])
        if best is None or sse < best[0]:
            best = (sse, c, a, kind, rate)
    assert best is not None
    sse, c, a, kind, rate = best
    at_end = _family(kind, np.array([rate]), np.array([final_step]), final_step)[0, 0]
    pred = float(c + a * at_end)
    span = float(y.max() - y.min())
    pred = float(np.clip(pred, y[-1] - 2.0 * span, y[-1] + 2.0 * span))
    dof = max(len(y) - 3, 1)
    return pred, float(np.sqrt(max(sse, 0.0) / dof))


def predict(kind: str, steps: np.ndarray, y: np.ndarray, final_step: float
            ) -> tuple[float, float] | None:
    """One predictor's ``(value at final_step, residual sd of its fit)``.

    Returns:
        ``None`` when the predictor cannot be used on these points (too few,
        or a NaN among them).
    """
    if y.size == 0 or np.isnan(y).any():
        return None
    if kind == "last":
        return float(y[-1]), 0.0
    if kind == "linear":
        if y.size >= 2 and steps[-1] > steps[0]:
            rate = (y[-1] - y[0]) / (steps[-1] - steps[0])
        elif steps[-1] > 0:
            rate = y[-1] / steps[-1]
        else:
            return None
        return float(y[-1] + rate * (final_step - steps[-1])), 0.0
    if kind == "saturating":
        if y.size < MIN_POINTS_SATURATING:
            return None
        return fit_saturating(steps, y, final_step)
    raise ValueError(f"predictor must be one of {PREDICTORS}, got {kind!r}")
