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

__all__ = ["PREDICTORS", "predict", "fit_saturating", "fit_saturating_many",
           "MIN_POINTS_SATURATING"]

PREDICTORS = ("last", "linear", "saturating")
#: A 3-parameter family needs at least one residual degree of freedom.
MIN_POINTS_SATURATING = 4

_ALPHAS = np.geomspace(0.05, 3.0, 24)
_BETAS = np.geomspace(0.3, 20.0, 24)


def _family(kind: int, rates: np.ndarray, steps: np.ndarray, final_step: float) -> np.ndarray:
    """Values of family ``kind`` (0 power law, 1 exponential): shape ``rates.shape + (n,)``."""
    s = np.asarray(steps, dtype=float)
    r = np.asarray(rates, dtype=float)[..., None]
    if kind == 0:
        return (1.0 + np.maximum(s, 0.0)) ** -r
    return np.exp(-r * s / max(final_step, 1.0))


def _least_squares(B: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Y[h] = c + a * B[h, g]`` for every curve ``h`` and grid row ``g``: ``(c, a, sse)``, each ``(H, G)``.

    Args:
        B: ``(G, n)`` (shared by every curve) or ``(H, G, n)``.
        Y: ``(H, n)``.
    """
    Bm = B.mean(axis=-1, keepdims=True)
    Bc = B - Bm
    ym = Y.mean(axis=1, keepdims=True)
    Yc = Y - ym
    if B.ndim == 2:
        sbb = np.einsum("gn,gn->g", Bc, Bc)[None, :]
        sby = Yc @ Bc.T
        bm = Bm[None, :, 0]
    else:
        sbb = np.einsum("hgn,hgn->hg", Bc, Bc)
        sby = np.einsum("hgn,hn->hg", Bc, Yc)
        bm = Bm[..., 0]
    ok = sbb > 1e-300
    a = np.where(ok, sby / np.where(ok, sbb, 1.0), 0.0)
    sse = np.where(ok, np.einsum("hn,hn->h", Yc, Yc)[:, None] - a * sby, np.inf)
    return ym - a * bm, a, sse


def fit_saturating_many(steps: np.ndarray, Y: np.ndarray, final_step: float
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Fit both families to several curves reported at the same steps.

    Each family's rate is searched on a coarse geometric grid, then on a fine
    grid between the best point's neighbours; the family with the smaller
    error wins.

    Args:
        steps: ``(n,)`` steps, increasing, ``n >= MIN_POINTS_SATURATING``.
        Y: ``(H, n)`` values of ``H`` curves.
        final_step: Where to predict.

    Returns:
        ``(predictions (H,), residual sds (H,))``: each best fit's value at
        ``final_step`` (capped, see the module docstring) and
        ``sqrt(SSE / (n - 3))``.
    """
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    H = Y.shape[0]
    rows = np.arange(H)
    best_sse = np.full(H, np.inf)
    pred = np.zeros(H)
    end = np.array([float(final_step)])
    for kind, grid in ((0, _ALPHAS), (1, _BETAS)):
        c, a, sse = _least_squares(_family(kind, grid, steps, final_step), Y)
        g = np.argmin(sse, axis=1)
        fine = np.geomspace(grid[np.maximum(g - 1, 0)], grid[np.minimum(g + 1, grid.size - 1)],
                            17, axis=1)  # (H, 17)
        c2, a2, sse2 = _least_squares(_family(kind, fine, steps, final_step), Y)
        g2 = np.argmin(sse2, axis=1)
        use_fine = sse2[rows, g2] <= sse[rows, g]
        rate = np.where(use_fine, fine[rows, g2], grid[g])
        cc = np.where(use_fine, c2[rows, g2], c[rows, g])
        aa = np.where(use_fine, a2[rows, g2], a[rows, g])
        ss = np.where(use_fine, sse2[rows, g2], sse[rows, g])
        at_end = _family(kind, rate, end, final_step)[:, 0]
        better = ss < best_sse
        best_sse = np.where(better, ss, best_sse)
        pred = np.where(better, cc + aa * at_end, pred)
    span = Y.max(axis=1) - Y.min(axis=1)
    pred = np.clip(pred, Y[:, -1] - 2.0 * span, Y[:, -1] + 2.0 * span)
    dof = max(Y.shape[1] - 3, 1)
    return pred, np.sqrt(np.maximum(best_sse, 0.0) / dof)


def fit_saturating(steps: np.ndarray, y: np.ndarray, final_step: float
                   ) -> tuple[float, float]:
    """:func:`fit_saturating_many` for one curve: ``(prediction, residual sd)``."""
    p, sd = fit_saturating_many(steps, np.asarray(y, dtype=float)[None, :], final_step)
    return float(p[0]), float(sd[0])


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
