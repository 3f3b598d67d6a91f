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
   regressed on each curve's *drift* (its slope over the second half of its
   steps so far, times the steps left), so a trial still climbing fast is expected to move more than
   one that has settled; with fewer than 4 calibration trials, or drifts all
   alike, the regression is the mean error. The predictor whose calibrated
   residuals are smallest is used (for objectives other than energy).
3. **Predictive distribution.** ``final ~ prediction + fitted error + sd * t(dof)``,
   independent per objective, where ``sd`` is the regression's residual sd
   widened by the uncertainty of its line (the usual prediction interval),
   and at least the residual sd of the trial's own curve fit; ``dof = k - 2`` (``k - 1`` for the mean) with ``k``
   calibration trials, plus one: the residual variance has a weak prior, one
   pseudo-trial whose error sd is 5% of the range of the finished trials'
   final values (a few trials that all ended exactly as predicted, common
   with metrics reported at coarse levels, do not make a prediction certain).
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
    CurvePruner,
    ObjectiveView,
    complete_with_curves,
    last_step_of_complete,
)
from ecopt.pruners._extrapolate import (
    MIN_POINTS_SATURATING,
    fit_saturating_many,
    predict,
)
from ecopt.pruners.base import Decision, check_int

if TYPE_CHECKING:
    from ecopt.objective import Constraint, Objective
    from ecopt.trial import Trial, TrialRecord

__all__ = ["DominancePruner"]

#: The residual variance's prior: this many pseudo-trials with an error sd of
#: ``PRIOR_SD_FRACTION`` times the range of the finished trials' final values.
PRIOR_DOF = 1
PRIOR_SD_FRACTION = 0.05


class DominancePruner(CurvePruner):
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
        self._finals: dict[int, np.ndarray | None] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_errors"], state["_finals"] = {}, {}  # caches: not worth sending to a worker
        return state

    def bind(self, objectives: Sequence[Objective], constraints: Sequence[Constraint] = ()
             ) -> None:
        super().bind(objectives, constraints)
        self._errors, self._finals = {}, {}  # another study: trial numbers mean other trials

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
        view = self.view()
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
        finals = [f[j] for r in calib if (f := self._final(r, view)) is not None]
        prior_sd = PRIOR_SD_FRACTION * float(np.ptp(finals)) if finals else 0.0
        for kind in (("linear",) if is_energy else ("last", "saturating")):
            mine = predict(kind, steps, y, S)
            if mine is None:
                continue
            rows = [e for e in self._errors_at(calib, j, kind, step, S, view) if e is not None]
            if len(rows) < self.n_warmup_trials:
                continue
            drift = _drift(steps, y, S)
            bias, sd, resid_sd, dof = _calibrate(np.array(rows), drift, prior_sd)
            sd = max(sd, mine[1])
            if best is None or resid_sd < best[0]:
                best = (resid_sd, kind, mine[0], bias, sd, dof, len(rows))
        if best is None:
            return None
        return best[1:]

    def _final(self, record: TrialRecord, view: ObjectiveView) -> np.ndarray | None:
        """A complete trial's final objective values (cached)."""
        if record.number not in self._finals:
            self._finals[record.number] = view.final(record)
        return self._finals[record.number]

    def _errors_at(self, records: Sequence[TrialRecord], j: int, kind: str, step: int, S: int,
                   view: ObjectiveView) -> list[tuple[float, float] | None]:
        """``(final - prediction, drift)`` of each complete trial's curve cut at ``step``.

        Cached per trial; saturating fits of curves cut at the same steps run
        as one batch.
        """
        todo: dict[tuple[float, ...], list[tuple[tuple[int, int, int, int, str], float,
                                                   np.ndarray]]] = {}
        for r in records:
            key = (r.number, step, S, j, kind)
            if key in self._errors:
                continue
            self._errors[key] = None
            final = self._final(r, view)
            if final is None:
                continue
            steps, Y = view.curve([p for p in r.intermediate if p.step <= step])
            y = Y[:, j]
            if kind == "saturating":
                if y.size >= MIN_POINTS_SATURATING and not np.isnan(y).any():
                    todo.setdefault(tuple(steps), []).append((key, float(final[j]), y))
                continue
            got = predict(kind, steps, y, S)
            if got is not None:
                self._errors[key] = (float(final[j] - got[0]), _drift(steps, y, S))
        for steps_t, items in todo.items():
            steps = np.asarray(steps_t)
            Yb = np.array([y for _, _, y in items])
            preds, _ = fit_saturating_many(steps, Yb, S)
            for (key, fin, y), pred in zip(items, preds):
                self._errors[key] = (fin - float(pred), _drift(steps, y, S))
        return [self._errors[(r.number, step, S, j, kind)] for r in records]


def _drift(steps: np.ndarray, y: np.ndarray, S: float) -> float:
    """The curve's recent trend carried to the final step (0 with one point).

    The slope is taken over the second half of the steps so far (from the
    first report at or past half the last step), so a curve that moves in
    jumps (a metric reported at coarse levels) shows its trend too.
    """
    if y.size < 2:
        return 0.0
    i = int(np.searchsorted(steps, steps[-1] / 2.0))
    i = min(i, y.size - 2)
    if steps[-1] <= steps[i]:
        return 0.0
    return float((y[-1] - y[i]) / (steps[-1] - steps[i]) * (S - steps[-1]))


def _calibrate(rows: np.ndarray, drift: float, prior_sd: float = 0.0
               ) -> tuple[float, float, float, int]:
    """Regress the finished trials' errors on their drift; predict for this trial.

    The residual variance has a weak prior: one pseudo-observation of
    ``prior_sd ** 2`` (so a handful of finished trials that all ended exactly
    as predicted do not make a prediction certain).

    Args:
        rows: ``(k, 2)``: each calibration trial's ``(final - prediction, drift)``.
        drift: This trial's drift (:func:`_drift`).
        prior_sd: The prior's residual sd.

    Returns:
        ``(bias, predictive sd, residual sd, dof)``: the expected error for
        this trial (within the range of the errors seen), the sd of a new
        error (residual sd widened by the uncertainty of the fitted line), the residual sd alone and the
        degrees of freedom of the Student t. Without spread in the drifts
        (or with fewer than 4 trials) the line is a constant: the mean error.
    """
    err, d = rows[:, 0], rows[:, 1]
    k = err.size
    e_mean, d_mean = float(err.mean()), float(d.mean())
    sdd = float(((d - d_mean) ** 2).sum())
    if k >= 4 and sdd > 1e-24 * max(1.0, float(np.abs(d).max()) ** 2):
        slope = float(((d - d_mean) * (err - e_mean)).sum()) / sdd
        fitted = e_mean + slope * (drift - d_mean)
        resid = err - (e_mean + slope * (d - d_mean))
        lev = 1.0 / k + (drift - d_mean) ** 2 / sdd
        n_par = 2
    else:
        fitted, resid, lev, n_par = e_mean, err - e_mean, 1.0 / k, 1
    dof = max(k - n_par, 0) + PRIOR_DOF
    s = float(np.sqrt((float(resid @ resid) + PRIOR_DOF * prior_sd ** 2) / dof))
    # A line fitted to a few trials must not predict an error none of them made.
    bias = float(np.clip(fitted, err.min(), err.max()))
    return bias, s * float(np.sqrt(1.0 + lev)), s, dof
