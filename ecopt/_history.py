"""A study's state derived from its finished trials, kept up to date as trials finish.

``ask()`` and ``tell()`` must cost the same at the ten-thousandth trial as at
the tenth. What they need from the whole log is computed once and then
updated with each new record (amortised ``O(1)`` per trial in the log's
length):

* :class:`SamplerHistory`: the records the sampler learns from (pruned trials
  at the final values their pruning judged), rebuilt only when the step that
  counts as "final" grows (at most once per new longest learning curve);
* :class:`FrontCache`: the study's Pareto front (``O(front)`` per new record).

Both follow the study's list of records and start over when it is replaced
(a re-opened or re-read study).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ecopt._types import Params
from ecopt.objective import Constraint, Objective
from ecopt.trial import TrialRecord, TrialState, with_state

if TYPE_CHECKING:
    from ecopt.pruners._curves import ObjectiveView

__all__ = ["SamplerHistory", "FrontCache"]


class SamplerHistory:
    """What the sampler learns from: the records, pruned trials at their judged values.

    Samplers model complete trials only. A pruned trial left out would look
    as promising as before it was stopped, and be proposed again and again;
    so the sampler sees it as complete, at the final values its pruning
    judged (:func:`ecopt.pruners._curves.imputed_final`: the pruner's
    prediction, else its last report with energy carried on linearly to the
    last step of the complete trials). The trial log keeps it ``pruned``.
    Where that is not possible (an objective never reported, or constraints
    to satisfy) it is passed as pending instead, so at least it is not
    proposed again.

    Args:
        objectives: The study's objectives.
        constraints: The study's constraints.
        energy_objective: The pruner's energy objective (``"auto"``: found by name).
    """

    def __init__(self, objectives: Sequence[Objective], constraints: Sequence[Constraint],
                 energy_objective: str | None = "auto") -> None:
        self.objectives = list(objectives)
        self.constraints = list(constraints)
        self.energy_objective = energy_objective
        self._source: list[TrialRecord] | None = None
        self._n = 0
        self._final_step: int | None = None
        self._any_pruned = False
        self._seen: list[TrialRecord] = []
        self._pending: list[Params] = []
        self._view: ObjectiveView | None = None  # built on the first pruned trial

    def update(self, records: list[TrialRecord]) -> tuple[Sequence[TrialRecord], list[Params]]:
        """The sampler's view of ``records`` (the study's list, appended to since the last call).

        Returns:
            ``(records the sampler sees, extra pending params)``. Both are this
            object's own lists: read them, do not change them.
        """
        if records is not self._source or len(records) < self._n:
            self._source, self._n, self._final_step, self._any_pruned = records, 0, None, False
            self._seen, self._pending = [], []
        new = records[self._n:]
        grew = False
        for r in new:
            if r.state is TrialState.COMPLETE and r.intermediate:
                step = r.intermediate[-1].step
                if self._final_step is None or step > self._final_step:
                    self._final_step, grew = step, True
            if r.state is TrialState.PRUNED and not self._any_pruned:
                self._any_pruned, grew = True, True
        self._n = len(records)
        if not self._any_pruned:
            return records, []  # nothing to change: the study's own records
        if grew:  # the final step moved (or the first pruned trial came): judge them all again
            self._seen, self._pending = [], []
            new = records
        for r in new:
            self._add(r)
        return self._seen, self._pending

    def _add(self, r: TrialRecord) -> None:
        if r.state is not TrialState.PRUNED:
            self._seen.append(r)
            return
        from ecopt.pruners._curves import ObjectiveView, imputed_final

        if self._view is None:
            self._view = ObjectiveView.of(self.objectives, self.energy_objective)
        vals = None if self.constraints else imputed_final(r, self._view, self._final_step)
        if vals is None:
            self._pending.append(r.params)
        else:
            self._seen.append(with_state(r, state=TrialState.COMPLETE, values=vals,
                                         feasible=True))


class FrontCache:
    """The Pareto front of a growing list of records (:func:`ecopt.pareto.front_records`'s rule).

    A new complete, feasible record joins the front unless a front member
    dominates it, and drops the members it dominates; duplicates are all kept;
    the front keeps the records' order.

    Args:
        objectives: The study's objectives.
    """

    def __init__(self, objectives: Sequence[Objective]) -> None:
        self.names = [o.name for o in objectives]
        self.signs = np.array([1.0 if o.direction == "max" else -1.0 for o in objectives])
        self._source: list[TrialRecord] | None = None
        self._n = 0
        self._front: list[TrialRecord] = []
        self._Z = np.empty((0, len(self.names)))  # the front, maximised

    def update(self, records: list[TrialRecord]) -> list[TrialRecord]:
        """The front of ``records`` (this object's list: read it, do not change it)."""
        if records is not self._source or len(records) < self._n:
            self._source, self._n = records, 0
            self._front, self._Z = [], np.empty((0, len(self.names)))
        for r in records[self._n:]:
            if r.state is TrialState.COMPLETE and r.feasible and not r.unreliable:
                self._add(r)
        self._n = len(records)
        return self._front

    def _add(self, r: TrialRecord) -> None:
        z = np.array([r.values[k] for k in self.names], dtype=float) * self.signs
        if np.isnan(z).any():
            return
        Z = self._Z
        if Z.shape[0]:
            if bool(np.any(np.all(Z >= z, axis=1) & np.any(Z > z, axis=1))):
                return  # dominated
            keep = ~(np.all(z >= Z, axis=1) & np.any(z > Z, axis=1))
            if not keep.all():
                self._front = [f for f, k in zip(self._front, keep) if k]
                Z = Z[keep]
        self._front.append(r)
        self._Z = np.vstack([Z, z[None, :]])
