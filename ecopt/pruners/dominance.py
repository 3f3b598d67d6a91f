"""Model-based multi-objective pruning: stop a trial whose final point will likely be dominated.

The model, per objective, at a trial's latest report (step ``s``; the trials'
full length ``S``):

1. **Point prediction.** The trial's curve so far is extrapolated to ``S``
   (:mod:`ecopt.pruners._extrapolate`): the study's energy objective linearly
   in steps (energy spent so far, carried on at its recent rate); any other
   objective either by its last value or by a saturating learning curve
   (power law or exponential, least squares on fixed grids), whichever
   predicted the finished trials better (below).
2. **Calibration.** The same predictor is applied to every complete trial's
   curve cut at step ``s``; its errors ``final value - prediction`` tell how
   the finished curves moved between step ``s`` and their end. The errors are
   regressed on each curve's *drift* (its last step-to-step slope times the
   steps left), so a trial still climbing fast is expected to move more than
   one that has settled; with fewer than 4 calibration trials, or drifts all
   alike, the regression is the mean error. The predictor whose calibrated
   residuals are smallest is used (for objectives other than energy).
3. **Predictive distribution.** ``final ~ prediction + fitted error + sd * t(dof)``,
   independent per objective, where ``sd`` is the regression's residual sd
   widened by the uncertainty of its line (the usual prediction interval),
   and at least the residual sd of the trial's own curve fit; ``dof = k - 2``
   (``k - 1`` for the mean) with ``k`` calibration trials.
4. **Decision.** ``p = P(final point dominated by the current front)`` by
   Monte Carlo (``n_samples`` draws, seeded by trial and step); the trial
   stops when ``p >= threshold``.

Warm-up: no decision before the trial reported at step ``n_warmup_steps`` or
later, before the trials' full length is known (``max_step``, or a complete
trial with a curve), before ``n_warmup_trials`` complete trials with curves
past step ``s`` can calibrate the model, or while the front is empty. A
report that lacks an objective (other than the energy objective, which ecopt
fills in) is never judged.

The calibration trials are the ones that ran to the end, so under pruning
they are those the model did not stop: the errors it learns from are of
curves it judged promising. Constraints are not predicted; the front is the
study's (complete trials within the constraints).

Example:
    >>> study = ecopt.Study(space, objectives, pruner=ecopt.pruners.DominancePruner(
    ...     threshold=0.9))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ecopt import pareto
from ecopt.pruners._curves import (
    ObjectiveView,
    complete_with_curves,
    last_step_of_complete,
    resolve_energy_objective,
)
from ecopt.pruners._extrapolate import predict
from ecopt.pruners.base import Decision, Pruner, check_int

if TYPE_CHECKING:
    from ecopt.objective import Constraint, Objective
    from ecopt.trial import Trial, TrialRecord

__all__ = ["DominancePruner"]


class DominancePruner(Pruner):
    """Stops a trial when its predicted final point is dominated by the front with probability >= ``threshold``.

    Args:
        threshold: Probability of being dominated at which a trial stops
            (default 0.9; higher stops fewer trials).
        max_step: The step a full trial ends at, or ``"auto"`` (default): the
            largest last step of any complete trial.
        n_warmup_steps: No decision before the trial reported at this step
            or later (default 3).
        n_warmup_trials: Complete trials with curves needed to calibrate the
            model at a step (default 5).
        energy_objective: The objective that is the trial's energy
            (extrapolated linearly; filled in from the energy ecopt measured
            when not reported): ``"auto"`` (an objective named ``energy_j``),
            a name, or ``None``.
        n_samples: Monte Carlo draws per decision (default 1024).
        seed: Seed of those draws (with the trial number and step).

    Raises:
        ValueError: for a setting outside its range.
    """

    name = "dominance"

    def __init__(self, threshold: float = 0.9, max_step: int | str = "auto",
                 n_warmup_steps: int = 3, n_warmup_trials: int = 5,
                 energy_objective: str | None = "auto", n_samples: int = 1024,
                 seed: int = 0) -> None:
        super().__init__()
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
        if max_step != "auto":
            check_int("max_step", max_step, 1)
        check_int("n_warmup_steps", n_warmup_steps, 0)
        check_int("n_warmup_trials", n_warmup_trials, 2)
        check_int("n_samples", n_samples, 16)
        check_int("seed", seed, 0)
        self.threshold = float(threshold)
        self.max_step = max_step
        self.n_warmup_steps = int(n_warmup_steps)
        self.n_warmup_trials = int(n_warmup_trials)
        self.energy_objective = energy_objective
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        # (trial number, step, final step, objective index, predictor) -> (error, drift) or None.
        self._errors: dict[tuple[int, int, int, int, str], tuple[float, float] | None] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_errors"] = {}  # a cache: not worth sending to a worker process
        return state

    def bind(self, objectives: Sequence[Objective], constraints: Sequence[Constraint] = ()
             ) -> None:
        """Take the study's objectives; checks ``energy_objective`` against them.

        Raises:
            ValueError: when ``energy_objective`` names no objective of the study.
        """
        resolve_energy_objective(objectives, self.energy_objective)
        super().bind(objectives, constraints)

    def decide(self, trial: Trial, history: Sequence[TrialRecord]) -> Decision:
        curve = trial.intermediate
        step = curve[-1].step
        info: dict[str, Any] = {"step": step, "threshold": self.threshold}
        S = int(self.max_step) if self.max_step != "auto" else \
            last_step_of_complete(history)  # type: ignore[arg-type]
        if S is None:
            return Decision(False, "warm-up: the full length of a trial is not known yet "
                                   "(no complete trial reported a curve; or pass max_step)", info)
        info["final_step"] = S
        if step >= S:
            return Decision(False, "the trial is at its final step", info)
        if step < self.n_warmup_steps:
            return Decision(False, f"warm-up: step {step} < n_warmup_steps="
                                   f"{self.n_warmup_steps}", info)
        view = ObjectiveView.of(self.objectives, self.energy_objective)
        steps, Y = view.curve(curve)
        if np.isnan(Y[-1]).any():
            missing = [n for n, v in zip(view.names, Y[-1]) if math.isnan(v)]
            return Decision(False, f"objective(s) {missing} missing from the latest report: "
                                   "no prediction", info)
        front = pareto.front_records(history, self.objectives)
        if not front:
            return Decision(False, "no front yet", info)
        F = pareto.objective_matrix(front, self.objectives) * view.signs
        calib = [r for r in complete_with_curves(history)
                 if r.number != trial.number and r.intermediate[-1].step > step
                 and r.intermediate[0].step <= step]
        mu = np.empty(view.m)
        sd = np.empty(view.m)
        dof = np.empty(view.m)
        per_obj: dict[str, Any] = {}
        for j, name in enumerate(view.names):
            got = self._objective(j, name == view.energy, steps, Y[:, j], step, S, calib, view)
            if got is None:
                return Decision(False, f"warm-up: fewer than {self.n_warmup_trials} complete "
                                       f"trials with curves past step {step} to calibrate "
                                       f"{name!r}", info)
            kind, pred, bias, s, nu, k = got
            mu[j], sd[j], dof[j] = pred + bias, s, nu
            per_obj[name] = {"model": kind, "predicted": float(mu[j]), "sd": s, "bias": bias,
                             "n_calibration": k}
        rng = np.random.default_rng((self.seed, trial.number, step))
        draws = (mu + sd * rng.standard_t(dof, size=(self.n_samples, view.m))) * view.signs
        dominated = np.zeros(self.n_samples, dtype=bool)
        for f in F:
            dominated |= np.all(f >= draws, axis=1) & np.any(f > draws, axis=1)
        p = float(dominated.mean())
        info.update(p_dominated=p, front_size=int(F.shape[0]), objectives=per_obj)
        if p >= self.threshold:
            pretty = ", ".join(f"{n}={v['predicted']:.4g}±{v['sd']:.2g}" for n, v in per_obj.items())
            return Decision(True, f"predicted final point ({pretty}) at step {S} is dominated by "
                                  f"the front with probability {p:.3f} >= {self.threshold:g}",
                            info)
        return Decision(False, "", info)

    def _objective(self, j: int, is_energy: bool, steps: np.ndarray, y: np.ndarray, step: int,
                   S: int, calib: Sequence[TrialRecord], view: ObjectiveView
                   ) -> tuple[str, float, float, float, int, int] | None:
        """``(predictor, prediction, bias, sd, dof, k)`` for objective ``j`` (``k``
        calibration trials), or ``None`` (warm-up)."""
        best: tuple[float, str, float, float, float, int, int] | None = None
        for kind in (("linear",) if is_energy else ("last", "saturating")):
            mine = predict(kind, steps, y, S)
            if mine is None:
                continue
            rows = [e for r in calib if (e := self._error(r, j, kind, step, S, view)) is not None]
            if len(rows) < self.n_warmup_trials:
                continue
            got = _calibrate(np.array(rows), _drift(steps, y, S))
            bias, sd, resid_sd, dof = got
            sd = max(sd, mine[1])
            if best is None or resid_sd < best[0]:
                best = (resid_sd, kind, mine[0], bias, sd, dof, len(rows))
        if best is None:
            return None
        return best[1:]

    def _error(self, record: TrialRecord, j: int, kind: str, step: int, S: int,
               view: ObjectiveView) -> tuple[float, float] | None:
        """``(final - prediction, drift)`` from a complete trial's curve cut at ``step`` (cached)."""
        key = (record.number, step, S, j, kind)
        if key in self._errors:
            return self._errors[key]
        out: tuple[float, float] | None = None
        final = view.final(record)
        if final is not None:
            cut = [p for p in record.intermediate if p.step <= step]
            steps, Y = view.curve(cut)
            got = predict(kind, steps, Y[:, j], S)
            if got is not None:
                out = (float(final[j] - got[0]), _drift(steps, Y[:, j], S))
        self._errors[key] = out
        return out


def _drift(steps: np.ndarray, y: np.ndarray, S: float) -> float:
    """The last step-to-step slope carried to the final step (0 with one point)."""
    if y.size < 2 or steps[-1] <= steps[-2]:
        return 0.0
    return float((y[-1] - y[-2]) / (steps[-1] - steps[-2]) * (S - steps[-1]))


def _calibrate(rows: np.ndarray, drift: float) -> tuple[float, float, float, int]:
    """Regress the finished trials' errors on their drift; predict for this trial.

    Args:
        rows: ``(k, 2)``: each calibration trial's ``(final - prediction, drift)``.
        drift: This trial's drift (:func:`_drift`).

    Returns:
        ``(bias, predictive sd, residual sd, dof)``: the expected error for
        this trial, the sd of a new error (residual sd widened by the
        uncertainty of the fitted line), the residual sd alone and the
        degrees of freedom of the Student t. Without spread in the drifts
        (or with fewer than 4 trials) the line is a constant: the mean error.
    """
    err, d = rows[:, 0], rows[:, 1]
    k = err.size
    X = np.column_stack([np.ones(k), d])
    x0 = np.array([1.0, drift])
    if k < 4 or float(np.ptp(d)) <= 1e-12 * max(1.0, float(np.abs(d).max())):
        X, x0 = X[:, :1], x0[:1]
    XtX_inv = np.linalg.pinv(X.T @ X)
    b = XtX_inv @ (X.T @ err)
    resid = err - X @ b
    dof = max(k - X.shape[1], 1)
    s = float(np.sqrt(resid @ resid / dof))
    lev = float(x0 @ XtX_inv @ x0)
    return float(x0 @ b), s * float(np.sqrt(1.0 + lev)), s, dof
