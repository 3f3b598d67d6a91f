"""The stopping rule: stop when the GPs say more trials cannot move the front beyond noise.

:class:`StoppingRule` holds the settings; :class:`Termination` is one
evaluation of it; :class:`ConvergenceTracker` keeps a study's streak. The rule,
per evaluation (one for each new set of finished trials):

* ``U``, an upper bound on the hypervolume improvement still possible, and
  ``N``, the hypervolume change one noise standard deviation makes, both
  relative to the current front's hypervolume, from the sampler's GPs
  (:mod:`ecopt.samplers._regret` states them exactly);
* the evaluation is *below* when ``U <= max(N, noise_floor)``;
* the study has converged when the last ``patience`` evaluations in a row were
  below (and at least ``min_trials`` trials completed; pruned trials, which
  the sampler sees at their judged values, do not count towards it).

Each evaluation is recorded in the notes of the trial proposed right after it
(``trial.proposal["convergence"]``) and, for the one that stops
``optimize(stop_when_converged=True)``, in ``study.json`` (the optimize call's
``convergence``), so a re-opened study carries on its streak.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ecopt.errors import EcoptError
from ecopt.trial import TrialRecord, TrialState

__all__ = ["StoppingRule", "Termination", "ConvergenceTracker", "NOTES_KEY", "describe",
           "latest_line"]

#: Key of the evaluation in a trial's proposal notes and in an optimize call's summary.
NOTES_KEY = "convergence"


@dataclass(frozen=True)
class StoppingRule:
    """When :meth:`ecopt.Study.should_terminate` says a study has converged.

    Args:
        patience: Evaluations in a row (one per new set of finished trials, so
            one per proposal in a sequential study) whose bound is at or below
            the noise level.
        min_trials: Complete trials (pruned ones not counted) before the rule
            is evaluated at all (20, as
            Optuna's terminator: with fewer, the GPs' noise and lengthscales are
            too uncertain for the bound to mean much).
        beta: The optimistic point is ``mean + sqrt(beta) * sd`` per objective;
            ``None``: GP-UCB's schedule ``2 log(d n^2 pi^2 / (6 delta)) / 5``
            (as Optuna's terminator), ``n`` complete trials, ``d`` dimensions.
        delta: Confidence parameter of that schedule.
        noise_floor: The noise level is at least this (a relative hypervolume
            change, e.g. ``0.01``: improvements under 1% do not count).
        n_candidates: Sobol candidates at which the bound is evaluated.

    Example:
        >>> study.optimize(objective, n_trials=200,
        ...                stop_when_converged=ecopt.StoppingRule(patience=5))
    """

    patience: int = 3
    min_trials: int = 20
    beta: float | None = None
    delta: float = 0.1
    noise_floor: float = 0.0
    n_candidates: int = 1024

    def __post_init__(self) -> None:
        for what, v, low in (("patience", self.patience, 1), ("min_trials", self.min_trials, 2),
                             ("n_candidates", self.n_candidates, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"stopping rule: {what} >= {low} must hold (an integer), "
                                 f"got {what}={v!r}")
        if self.beta is not None and not (_number(self.beta) and self.beta > 0):
            raise ValueError(f"stopping rule: beta > 0 (or None) must hold, got beta={self.beta!r}")
        if not (_number(self.delta) and 0 < self.delta < 1):
            raise ValueError(f"stopping rule: 0 < delta < 1 must hold, got delta={self.delta!r}")
        if not (_number(self.noise_floor) and self.noise_floor >= 0):
            raise ValueError(f"stopping rule: noise_floor >= 0 must hold, "
                             f"got noise_floor={self.noise_floor!r}")

    @classmethod
    def of(cls, value: Any, current: StoppingRule | None = None) -> StoppingRule | None:
        """``optimize``'s ``stop_when_converged``: ``False``/``None`` (off), ``True``
        (``current``: the study's rule, restored when it was re-opened; else the
        defaults) or a rule.

        Raises:
            ValueError: for anything else.
        """
        if value is None or value is False:
            return None
        if value is True:
            return current if current is not None else cls()
        if isinstance(value, cls):
            return value
        raise ValueError(f"stop_when_converged must be True, False or an ecopt.StoppingRule, "
                         f"got {value!r}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _g(x: float | None) -> str:
    from ecopt.fmt import fmt_number  # one home for number formatting

    return "n/a" if x is None else fmt_number(x)


@dataclass(frozen=True)
class Termination:
    """One evaluation of the stopping rule.

    Attributes:
        converged: The last ``patience`` evaluations were all below the noise.
        upper_bound: ``U``, relative to the front's hypervolume (``None``: not evaluated).
        noise: The noise level compared with: ``max(N, noise_floor)``.
        below: Evaluations in a row (this one included) with ``U <= noise``.
        patience: The rule's patience.
        n_records: Finished trials the evaluation saw (its key: the streak
            counts one evaluation per set of finished trials).
        reason: Why it is (not) converged, in words.
        details: ``beta``, the raw ``noise_relative`` ``N``, ``noise_sd`` and
            ``noise_source`` per objective, ``hypervolume``, ``n_candidates``,
            ``n_observations``, the rule's settings.
    """

    converged: bool
    upper_bound: float | None
    noise: float | None
    below: int
    patience: int
    n_records: int
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able notes (infinite bounds as ``None``)."""
        d = asdict(self)
        for k in ("upper_bound", "noise"):
            if d[k] is not None and not math.isfinite(d[k]):
                d[k] = None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Termination | None:
        """From :meth:`to_dict` output (``None`` when it is not one)."""
        try:
            return cls(bool(d["converged"]), d.get("upper_bound"), d.get("noise"),
                       int(d["below"]), int(d["patience"]), int(d["n_records"]),
                       str(d.get("reason", "")), dict(d.get("details") or {}))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        """One line for ``ecopt show`` and the report."""
        return describe(self.to_dict())


def describe(d: Mapping[str, Any]) -> str:
    """The line of a recorded evaluation (:meth:`Termination.to_dict` output)."""
    nums = f"(bound {_g(d.get('upper_bound'))}, noise {_g(d.get('noise'))})"
    below, patience = d.get("below", 0), d.get("patience", "?")
    if d.get("converged"):
        return (f"converged: remaining HV improvement <= noise for {below} proposals {nums}")
    if d.get("upper_bound") is None and d.get("noise") is None:
        return f"not converged: {d.get('reason', '')}"
    return (f"not converged: remaining HV improvement <= noise for {below} of {patience} "
            f"proposals {nums}")


def latest_line(records: Sequence[TrialRecord], calls: Sequence[Any]) -> str | None:
    """The line of the last recorded evaluation (``None``: the rule never ran)."""
    t = ConvergenceTracker.recorded(records, calls)
    return None if t is None else t.describe()


class ConvergenceTracker:
    """A study's streak of evaluations.

    Args:
        latest: The last recorded evaluation (from the trial log or
            ``study.json``), so that a re-opened study carries on its streak.
    """

    def __init__(self, latest: Termination | None = None) -> None:
        self.latest = latest
        # The streak before ``latest`` (to redo that evaluation under another rule).
        self._before: int = max(latest.below - 1, 0) if latest is not None else 0

    def rule(self) -> StoppingRule | None:
        """The rule of the latest evaluation, when it recorded a valid one."""
        kept = self.latest.details.get("rule") if self.latest is not None else None
        try:
            return StoppingRule(**kept) if isinstance(kept, dict) else None
        except (TypeError, ValueError):
            return None

    @staticmethod
    def recorded(records: Sequence[TrialRecord], calls: Sequence[Any]) -> Termination | None:
        """The last evaluation kept in trial notes or in optimize-call summaries."""
        found: list[Termination] = []
        for r in records:
            notes = r.proposal.get(NOTES_KEY) if isinstance(r.proposal, dict) else None
            t = Termination.from_dict(notes) if isinstance(notes, dict) else None
            if t is not None:
                found.append(t)
        for c in calls:
            notes = c.get(NOTES_KEY) if isinstance(c, dict) else None
            t = Termination.from_dict(notes) if isinstance(notes, dict) else None
            if t is not None:
                found.append(t)
        return max(found, key=lambda t: t.n_records) if found else None

    def cached(self, rule: StoppingRule, n_records: int) -> Termination | None:
        """The latest evaluation when it was made under ``rule`` at ``n_records`` finished trials."""
        last = self.latest
        if last is not None and last.n_records == n_records \
                and last.details.get("rule") == asdict(rule):
            return last
        return None

    def evaluate(self, rule: StoppingRule, records: Sequence[TrialRecord],
                 bound: Callable[[], Any] | None, *,
                 n_complete: int | None = None) -> Termination:
        """The rule at ``records`` (what the sampler sees).

        Args:
            rule: The settings.
            records: The finished trials as the sampler sees them.
            bound: Computes the :class:`~ecopt.samplers._regret.Bound`, or
                ``None`` when the sampler has no model.
            n_complete: Trials that truly completed, compared with
                ``rule.min_trials`` (default: the complete ones in ``records``;
                the study passes its own count, as the sampler sees pruned
                trials as complete at their judged values).

        Raises:
            EcoptError: when the sampler has no model (``bound`` is ``None``).
        """
        n = len(records)
        if bound is None:
            raise EcoptError("the stopping rule needs a model-based sampler ('qlognehvi' or "
                             "'qnehvi'): it bounds the hypervolume still to gain with the "
                             "sampler's GPs; use one, or stop with n_trials, timeout_s or "
                             "energy_budget_j")
        last = self.cached(rule, n)
        if last is not None:
            return last
        last = self.latest
        before = self._before if last is not None and last.n_records == n else \
            (last.below if last is not None and last.n_records < n else 0)
        settings = {"rule": asdict(rule)}
        if n_complete is None:
            n_complete = sum(r.state is TrialState.COMPLETE for r in records)
        if n_complete < rule.min_trials:
            t = Termination(False, None, None, 0, rule.patience, n,
                            f"{n_complete} complete trial(s); the rule is evaluated from "
                            f"min_trials={rule.min_trials}", settings)
            before = 0
        else:
            try:
                b = bound()
            except Exception as exc:  # noqa: BLE001 - a failed fit never stops a study
                t = Termination(False, None, None, 0, rule.patience, n,
                                f"the bound could not be computed: {type(exc).__name__}: {exc}",
                                settings)
            else:
                noise = max(b.noise, rule.noise_floor)
                below = before + 1 if b.upper_bound <= noise else 0
                converged = below >= rule.patience
                t = Termination(
                    converged, b.upper_bound, noise, below, rule.patience, n,
                    "remaining hypervolume improvement <= noise" if converged else
                    "remaining hypervolume improvement above the noise"
                    if below == 0 else f"below the noise {below} of {rule.patience} times",
                    {**settings, "beta": b.beta, "noise_relative": b.noise,
                     "noise_sd": b.noise_sd, "noise_source": b.noise_source,
                     "hypervolume": b.hypervolume, "n_candidates": b.n_candidates,
                     "n_observations": b.n_observations})
        self._before, self.latest = before, t
        return t
