"""Multi-objective Hyperband: asynchronous successive halving ranked by Pareto dominance.

Successive halving (Jamieson & Talwalkar 2016) trains many configurations for
a little while and lets only the best fraction ``1/eta`` go on; Hyperband (Li
et al. 2018) hedges over how early the first cut comes by running several
such *brackets*. ASHA (Li et al. 2020) makes it asynchronous: a trial that
reaches a rung is compared with the trials that reached that rung before it,
and goes on when it is in their top ``1/eta``. This pruner does the same with
several objectives: trials at a rung are ordered by non-dominated sorting,
then within a front by their exclusive hypervolume contribution (largest
first), instead of by one number.

Resource and rungs:
    The resource of a report is its ``step`` (epochs, evaluation rounds...).
    Bracket ``s`` has rungs at ``min_resource * reduction_factor ** (s + k)``
    for ``k = 0, 1, ...`` below ``max_resource``. A trial is judged at its
    first report at or past each rung (call :meth:`ecopt.Trial.should_stop`
    after every report); between rungs it always goes on.

Competitors:
    The study's finished trials (any state) of the same bracket that reached
    the rung, each with the values of its first report at or past the rung,
    plus the trial itself. With fewer than ``min_trials_at_rung`` of them the
    trial goes on. Running trials are not compared (they travel as a
    snapshot of the finished history, as in ASHA's promotion rule).

Brackets:
    Trials are spread over the brackets by a hash of the trial number,
    weighted as Hyperband allots configurations (``ceil(B * eta**s' / (s' + 1))``
    with ``s' = B - 1 - s``, as Optuna's ``HyperbandPruner`` does), so most
    trials meet the earliest cut and a few run to the end unjudged.

Example:
    >>> study = ecopt.Study(space, objectives, pruner=ecopt.pruners.HyperbandPruner(
    ...     min_resource=1, reduction_factor=3))
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ecopt import pareto
from ecopt.pruners._curves import CurvePruner, first_at_or_after, last_step_of_complete
from ecopt.pruners.base import Decision, check_int

if TYPE_CHECKING:
    from ecopt.trial import Trial, TrialRecord

__all__ = ["HyperbandPruner", "rank_order"]


def rank_order(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order points by non-dominated rank, then by hypervolume contribution in their front.

    Args:
        Z: ``(n, M)`` points in maximisation form, no NaN.

    Returns:
        ``(order, ranks, contributions)``: ``order`` lists row indices best
        first (ties keep the input order, so a row listed first wins a tie);
        ``ranks`` and ``contributions`` per row. Contributions are computed
        within each front against one reference point just below the worst
        point of all rows (:func:`ecopt.pareto.infer_reference_point`).
    """
    n = Z.shape[0]
    ranks = pareto.nondominated_ranks(Z)
    contrib = np.zeros(n)
    if n > 1:
        ref = pareto.infer_reference_point(Z, front_only=False)
        for k in np.unique(ranks):
            rows = np.flatnonzero(ranks == k)
            contrib[rows] = pareto.hypervolume_contributions(Z[rows], ref)
    order = np.array(sorted(range(n), key=lambda i: (ranks[i], -contrib[i], i)), dtype=int)
    return order, ranks, contrib


class HyperbandPruner(CurvePruner):
    """Asynchronous Hyperband whose rungs rank trials by Pareto fronts and hypervolume.

    Args:
        min_resource: The first rung of the most aggressive bracket, in steps
            (default 1: judge after the first step).
        max_resource: The full length of a trial in steps, or ``"auto"``
            (default): the largest last step of any complete trial. Nothing is
            pruned until it is known.
        reduction_factor: ``eta``: at each rung the top ``1/eta`` go on
            (default 3, as in Hyperband and ASHA).
        brackets: How many brackets, or ``"auto"`` (default):
            ``floor(log_eta(max_resource / min_resource)) + 1`` as in Hyperband;
            ``1`` is plain asynchronous successive halving.
        min_trials_at_rung: A trial goes on while fewer trials than this
            (itself included) reached its rung in its bracket (default:
            ``reduction_factor``, so a cut always keeps one in ``eta``).
        n_warmup_trials: No pruning before this many trials finished with a
            learning curve (default 3).
        energy_objective: The objective that is the trial's energy, filled in
            from the energy ecopt measured up to a report when the trial did
            not report it: ``"auto"`` (an objective named ``energy_j``), a
            name, or ``None``.

    Raises:
        ValueError: for a setting outside its range.
    """

    name = "hyperband"

    def __init__(self, min_resource: int = 1, max_resource: int | str = "auto",
                 reduction_factor: int = 3, brackets: int | str = "auto",
                 min_trials_at_rung: int | None = None, n_warmup_trials: int = 3,
                 energy_objective: str | None = "auto") -> None:
        super().__init__()
        check_int("min_resource", min_resource, 1)
        if max_resource != "auto":
            check_int("max_resource", max_resource, 1)
            if int(max_resource) <= min_resource:  # type: ignore[arg-type]
                raise ValueError(f"max_resource > min_resource must hold, got "
                                 f"max_resource={max_resource}, min_resource={min_resource}")
        check_int("reduction_factor", reduction_factor, 2)
        if brackets != "auto":
            check_int("brackets", brackets, 1)
        if min_trials_at_rung is not None:
            check_int("min_trials_at_rung", min_trials_at_rung, 1)
        check_int("n_warmup_trials", n_warmup_trials, 0)
        self.min_resource = int(min_resource)
        self.max_resource = max_resource
        self.reduction_factor = int(reduction_factor)
        self.brackets = brackets
        self.min_trials_at_rung = (int(min_trials_at_rung) if min_trials_at_rung is not None
                                   else self.reduction_factor)
        self.n_warmup_trials = int(n_warmup_trials)
        self.energy_objective = energy_objective

    # -- brackets ------------------------------------------------------------------
    def n_brackets(self, max_resource: int) -> int:
        """How many brackets for trials of ``max_resource`` steps."""
        ratio = max_resource / self.min_resource
        most = math.floor(math.log(ratio, self.reduction_factor) + 1e-9) + 1 if ratio > 1 else 1
        return most if self.brackets == "auto" else max(1, min(int(self.brackets), most))

    def bracket_of(self, number: int, n_brackets: int) -> int:
        """The bracket of trial ``number`` (Hyperband's allotment, by a hash of the number)."""
        eta = self.reduction_factor
        budgets = []
        for s in range(n_brackets):
            sp = n_brackets - 1 - s
            budgets.append(math.ceil(n_brackets * eta ** sp / (sp + 1)))
        h = zlib.crc32(f"trial-{number}".encode()) % sum(budgets)
        for s, b in enumerate(budgets):
            h -= b
            if h < 0:
                return s
        return n_brackets - 1  # pragma: no cover - the budgets sum covers every hash

    def rungs(self, bracket: int, max_resource: int) -> list[int]:
        """Rung resources (steps) of a bracket, ascending, each below ``max_resource``."""
        out: list[int] = []
        k = 0
        while True:
            r = self.min_resource * self.reduction_factor ** (bracket + k)
            if r >= max_resource:
                return out
            out.append(int(r))
            k += 1

    # -- deciding -------------------------------------------------------------------
    def decide(self, trial: Trial, history: Sequence[TrialRecord]) -> Decision:
        curve = trial.intermediate
        step = curve[-1].step
        R = self._max_resource(history)
        if R is None:
            return Decision(False, "warm-up: the full length of a trial is not known yet "
                                   "(no complete trial reported a curve)", {"step": step})
        with_curves = sum(1 for r in history if r.intermediate)
        if with_curves < self.n_warmup_trials:
            return Decision(False, f"warm-up: {with_curves} of {self.n_warmup_trials} trials "
                                   "finished with a learning curve", {"step": step})
        nb = self.n_brackets(R)
        bracket = self.bracket_of(trial.number, nb)
        prev = curve[-2].step if len(curve) > 1 else -math.inf
        crossed = [r for r in self.rungs(bracket, R) if prev < r <= step]
        info: dict[str, Any] = {"step": step, "bracket": bracket, "brackets": nb,
                                "max_resource": R}
        if not crossed:
            return Decision(False, "", info)
        view = self.view()
        me = view.point(curve[-1])
        if me is None:
            return Decision(False, "an objective is missing or not finite in the latest "
                                   "report: no ranking", info)
        mates = [r for r in history if r.number != trial.number and r.intermediate
                 and self.bracket_of(r.number, nb) == bracket]
        for rung in crossed:
            points = [me]
            for r in mates:
                p = first_at_or_after(r.intermediate, rung)
                z = view.point(p) if p is not None else None
                if z is not None:
                    points.append(z)
            n = len(points)
            keep = max(1, n // self.reduction_factor)
            info.update(rung=rung, n_competitors=n, promoted=keep)
            if n < self.min_trials_at_rung:
                info.update(position=0)
                continue
            order, ranks, contrib = rank_order(np.array(points))
            pos = int(np.flatnonzero(order == 0)[0])
            info.update(position=pos, front_rank=int(ranks[0]),
                        hv_contribution=float(contrib[0]))
            if pos >= keep:
                return Decision(True, f"rung {rung} (bracket {bracket}): position {pos + 1} of "
                                      f"{n} by Pareto rank {int(ranks[0])} and hypervolume "
                                      f"contribution; only the top {keep} go on", info)
        return Decision(False, "", info)

    def _max_resource(self, history: Sequence[TrialRecord]) -> int | None:
        if self.max_resource != "auto":
            return int(self.max_resource)  # type: ignore[arg-type]
        return last_step_of_complete(history)

