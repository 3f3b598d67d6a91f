"""Objective vectors from learning curves: what both pruners read from the reports.

A report (:class:`~ecopt.trial.Intermediate`) holds the metrics a trial could
observe at a step plus the joules it had spent by then. A pruner compares
trials in *maximisation form* (``min`` objectives negated), one value per
study objective. The study's energy objective, when it has one, may be left
out of the reports: ecopt knows the energy spent so far and fills it in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ecopt.pruners.base import Pruner

if TYPE_CHECKING:
    from ecopt.objective import Constraint, Objective
    from ecopt.trial import Intermediate, TrialRecord

__all__ = ["ObjectiveView", "CurvePruner", "resolve_energy_objective", "imputed_final",
           "ENERGY_NAMES"]

#: Objective names ``energy_objective="auto"`` takes for the trial's own energy.
ENERGY_NAMES = ("energy_j",)


def resolve_energy_objective(objectives: Sequence[Objective], spec: str | None) -> str | None:
    """The name of the objective that is the trial's energy, or ``None``.

    Args:
        objectives: The study's objectives.
        spec: ``"auto"`` (an objective named ``energy_j``), an objective name,
            or ``None`` (no objective is the trial's energy).

    Raises:
        ValueError: for a name that is not one of the objectives.
    """
    names = [o.name for o in objectives]
    if spec is None:
        return None
    if spec == "auto":
        return next((n for n in names if n in ENERGY_NAMES), None)
    if spec not in names:
        raise ValueError(f"energy_objective must be 'auto', None or one of the study's "
                         f"objectives {names}, got {spec!r}")
    return spec


@dataclass(frozen=True)
class ObjectiveView:
    """How a pruner reads objective values from reports and records.

    Attributes:
        names: Objective names, in the study's order.
        signs: ``+1`` for ``max``, ``-1`` for ``min`` (multiply to maximise).
        energy: The objective that is the trial's energy (filled in from the
            report's ``energy_j`` when the trial did not report it), or ``None``.
    """

    names: tuple[str, ...]
    signs: np.ndarray
    energy: str | None

    @classmethod
    def of(cls, objectives: Sequence[Objective], energy_spec: str | None) -> ObjectiveView:
        return cls(tuple(o.name for o in objectives),
                   np.array([1.0 if o.direction == "max" else -1.0 for o in objectives]),
                   resolve_energy_objective(objectives, energy_spec))

    @property
    def m(self) -> int:
        return len(self.names)

    def raw(self, point: Intermediate) -> np.ndarray:
        """The objective values of one report in their own units (NaN where missing)."""
        out = np.full(self.m, np.nan)
        for j, name in enumerate(self.names):
            v = point.values.get(name)
            if v is None and name == self.energy:
                v = point.energy_j
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[j] = float(v)
        return out

    def point(self, point: Intermediate) -> np.ndarray | None:
        """One report in maximisation form, or ``None`` when an objective is missing."""
        y = self.raw(point)
        return None if np.isnan(y).any() else y * self.signs

    def curve(self, points: Sequence[Intermediate]) -> tuple[np.ndarray, np.ndarray]:
        """``(steps (n,), values (n, M))`` of a learning curve, raw units, NaN where missing."""
        steps = np.array([p.step for p in points], dtype=float)
        Y = np.array([self.raw(p) for p in points]).reshape(len(points), self.m)
        return steps, Y

    def final(self, record: TrialRecord) -> np.ndarray | None:
        """A complete trial's final objective values in raw units (``None`` if one is missing)."""
        out = np.full(self.m, np.nan)
        for j, name in enumerate(self.names):
            v = record.values.get(name)
            if v is None and name == self.energy and record.phases:
                v = record.energy_j
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[j] = float(v)
        return None if np.isnan(out).any() else out


class CurvePruner(Pruner):
    """A pruner that reads objective vectors from learning curves (both built-in ones).

    Subclasses set :attr:`energy_objective` in ``__init__``.
    """

    energy_objective: str | None = "auto"

    def bind(self, objectives: Sequence[Objective], constraints: Sequence[Constraint] = ()
             ) -> None:
        """Take the study's objectives; checks ``energy_objective`` against them.

        Raises:
            ValueError: when ``energy_objective`` names no objective of the study.
        """
        resolve_energy_objective(objectives, self.energy_objective)
        super().bind(objectives, constraints)

    def view(self) -> ObjectiveView:
        """How this pruner reads the study's objectives from reports."""
        return ObjectiveView.of(self.objectives, self.energy_objective)


def first_at_or_after(points: Sequence[Intermediate], step: float) -> Intermediate | None:
    """The first report at ``step`` or later (the value a trial had on reaching a rung)."""
    for p in points:
        if p.step >= step:
            return p
    return None


def complete_with_curves(history: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Complete trials that reported a learning curve."""
    from ecopt.trial import TrialState

    return [r for r in history if r.state is TrialState.COMPLETE and r.intermediate]


def last_step_of_complete(history: Sequence[TrialRecord]) -> int | None:
    """The largest last reported step of any complete trial (the full length), or ``None``."""
    steps = [r.intermediate[-1].step for r in complete_with_curves(history)]
    return max(steps) if steps else None


def imputed_final(record: TrialRecord, view: ObjectiveView, final_step: int | None
                  ) -> dict[str, float] | None:
    """A pruned trial's final objective values as its pruning judged them, for a sampler.

    Per objective: the pruner's prediction when it recorded one
    (``user_attrs["pruning"]["objectives"][name]["predicted"]``, as
    :class:`~ecopt.pruners.DominancePruner` does); else the last reported value,
    the energy objective carried on linearly to ``final_step``. A quality that
    was still rising is under-estimated: the direction the pruner judged it in.

    Returns:
        Objective name -> value, or ``None`` when one is unknown.
    """
    from ecopt.pruners._extrapolate import predict

    if not record.intermediate:
        return None
    info = record.user_attrs.get("pruning") if isinstance(record.user_attrs, dict) else None
    preds = info.get("objectives") if isinstance(info, dict) else None
    steps, Y = view.curve(record.intermediate)
    out: dict[str, float] = {}
    for j, name in enumerate(view.names):
        p = preds.get(name) if isinstance(preds, dict) else None
        v = p.get("predicted") if isinstance(p, dict) else None
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            v = Y[-1, j]
            if name == view.energy and final_step is not None and final_step > steps[-1]:
                got = predict("linear", steps, Y[:, j], final_step)
                v = got[0] if got is not None else v
        if not math.isfinite(float(v)):
            return None
        out[name] = float(v)
    return out
