"""Cost-aware proposals: a GP on log energy, and the acquisition per predicted joule.

An option of :class:`~ecopt.samplers.QLogNEHVISampler` (``cost_aware=True``).
The cost of a trial is its total energy (``TrialRecord.energy_j``, every
phase). A GP (the objectives' kind: ``SingleTaskGP`` or ``MixedSingleTaskGP``,
``Standardize``, inferred noise, fitted like them) models ``log(energy_j)``
over the same model inputs; the predicted cost of a point is
``exp(posterior mean)``, the median of the log-normal the GP implies (not its
mean, which the posterior variance would inflate far from the data). The
acquisition becomes BoTorch's :class:`~botorch.acquisition.cost_aware.
InverseCostWeightedUtility` of it: for qLogNEHVI (log space)
``log EHVI(x) - cost_exponent * log c(x)``, i.e. expected hypervolume
improvement per predicted joule (``cost_exponent = 1``); for qNEHVI
``EHVI(x) / c(x)**cost_exponent``. (BoTorch releases whose utility has no
``log`` argument get the log form computed here by the same rule, from the
cost model's public posterior.) A q-batch costs the sum of its points' costs
(each point to the power ``cost_exponent``); sequential greedy scores one point
at a time.

Which trials: complete ones with energy; a pruned trial (shown to the sampler
as complete, see :meth:`ecopt.Study.ask`) at its energy scaled linearly to the
full length (its last step against the largest last step of a complete trial;
left out while no complete trial reported steps), as the study's energy
objective is carried on for it. Failed and infeasible trials are left out
(their energy is of a run that did not finish). With fewer than
:data:`MIN_TRIALS` energies, when the cost model cannot be fitted, or when
the weighted acquisition fails (its check in :func:`weighted`, or in the
optimiser on BoTorch's public path too; see :mod:`ecopt.samplers._proposal`),
the proposal is made without cost and its notes say why.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecopt.samplers._encoding import Encoding, to_model
from ecopt.space import SearchSpace
from ecopt.trial import TrialRecord, TrialState

__all__ = ["MIN_TRIALS", "MODEL", "CostModel", "check_exponent", "cost_data", "fit_cost",
           "fit_or_why", "notes", "weighted"]

#: Fewest trials with energy before the cost model is used.
MIN_TRIALS = 3
#: What the proposal notes call the model.
MODEL = "GP on log(energy_j), predicted cost exp(posterior mean)"
#: Name under which the cost model's hyperparameters are recorded (``gp_state``).
COST = "__energy_j__"


def check_exponent(cost_exponent: Any) -> float:
    """``cost_exponent`` as a float in [0, 1].

    Raises:
        ValueError: for a non-number or a value outside [0, 1].
    """
    if isinstance(cost_exponent, bool) or not isinstance(cost_exponent, (int, float)) \
            or not 0 <= cost_exponent <= 1:
        raise ValueError(f"0 <= cost_exponent <= 1 must hold (a number), "
                         f"got cost_exponent={cost_exponent!r}")
    return float(cost_exponent)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _pruned(r: TrialRecord) -> bool:
    return r.state is TrialState.PRUNED or (r.error is not None
                                            and r.error.type == "TrialPruned")


def cost_data(space: SearchSpace, records: Sequence[TrialRecord]
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """The trials' unit-cube inputs and energies (see the module notes for which).

    Returns:
        ``(U (n, d), energy_j (n,), how many of them were pruned and scaled)``.
    """
    steps = [r.intermediate[-1].step for r in records
             if r.state is TrialState.COMPLETE and not _pruned(r) and r.intermediate]
    full = max(steps) if steps else None
    rows: list[list[float]] = []
    energies: list[float] = []
    n_pruned = 0
    for r in records:
        if r.state not in (TrialState.COMPLETE, TrialState.PRUNED) or r.interrupted:
            continue
        e = r.energy_j
        if _pruned(r):
            last = r.intermediate[-1].step if r.intermediate else None
            if full is None or last is None or last <= 0:
                continue
            e *= max(1.0, full / last)
        if not (math.isfinite(e) and e > 0):
            continue
        try:
            u = space.encode(r.params)
        except (KeyError, TypeError, ValueError):  # a trial from an older, different space
            continue
        rows.append(list(u))
        energies.append(e)
        n_pruned += _pruned(r)
    return np.array(rows, dtype=float).reshape(len(rows), space.dim), np.array(energies), n_pruned


@dataclass
class CostModel:
    """A fitted cost model.

    Attributes:
        model: The GP on ``log(energy_j)`` (model inputs as the objectives' GPs).
        exponent: ``cost_exponent``.
        n_trials: Trials it was fitted to; n_pruned: of them, pruned and scaled.
        state: Its fitted hyperparameters (JSON-able).
        fast_path_off: Fast paths its fit could not use -> why (as
            :attr:`ecopt.samplers._models.Fitted.fast_path_off`).
        priors: The lengthscale prior its fit kept, under :data:`COST`
            (``lengthscale_prior="auto"``; as
            :attr:`ecopt.samplers._models.Fitted.priors`).
    """

    model: Any
    exponent: float
    n_trials: int
    n_pruned: int
    state: dict[str, Any]
    fast_path_off: dict[str, str] = field(default_factory=dict)
    priors: dict[str, str] = field(default_factory=dict)

    def predict_energy_j(self, X: Any) -> np.ndarray:
        """Predicted joules ``exp(posterior mean)`` at model inputs ``X (n, d)``."""
        import torch

        with torch.no_grad():
            return self.model.posterior(X).mean.reshape(-1).exp().cpu().numpy()

    def weight(self, acqf: Any, log: bool) -> Any:
        """``acqf`` per predicted joule (see the module notes)."""
        return _PerJoule(acqf, self, log)

    def notes(self, X: Any) -> dict[str, Any]:
        """What each proposal at model inputs ``X (q, d)`` records (one entry per point)."""
        return {"active": True, "model": MODEL, "cost_exponent": self.exponent,
                "n_trials": self.n_trials, "n_pruned_scaled": self.n_pruned,
                "predicted_energy_j": [float(v) for v in self.predict_energy_j(X)]}


def fit_cost(space: SearchSpace, enc: Encoding, records: Sequence[TrialRecord],
             exponent: float, fit_kw: dict[str, Any]) -> CostModel | str:
    """The cost model of ``records``, or why there is none (too few energies).

    ``fit_kw`` are :func:`ecopt.samplers._models.fit_outputs`'s settings (the
    objectives' own); a warm start is taken from ``fit_kw["warm"]`` under
    :data:`COST`. A failed fit raises.
    """
    import torch

    from ecopt.samplers import _models

    U, energy_j, n_pruned = cost_data(space, records)
    if len(energy_j) < MIN_TRIALS:
        return (f"{len(energy_j)} trial(s) with energy, fewer than {MIN_TRIALS}: "
                "proposed without cost")
    X = torch.tensor(to_model(U, enc), dtype=torch.double)
    y = torch.tensor(np.log(energy_j), dtype=torch.double).reshape(-1, 1)
    fitted = _models.fit_outputs(X, y, None, names=[COST], **{**fit_kw, "stacked": False})
    return CostModel(fitted.models[0], exponent, len(energy_j), n_pruned, fitted.states,
                     dict(fitted.fast_path_off), dict(fitted.priors))


def fit_or_why(space: SearchSpace, enc: Encoding, records: Sequence[TrialRecord],
               sampler: Any, fit_kw: dict[str, Any]) -> CostModel | str:
    """:func:`fit_cost` for ``sampler``'s ``cost_exponent``; a failure is a reason."""
    try:
        return fit_cost(space, enc, records, sampler.cost_exponent, fit_kw)
    except Exception as exc:  # noqa: BLE001 - no cost model: propose without cost
        return f"cost model failed, proposed without cost: {_why(exc)}"


def weighted(acqf: Any, cost: CostModel | str | None, log: bool, X: Any
             ) -> tuple[Any, CostModel | str | None]:
    """``acqf`` per predicted joule when there is a cost model, checked on ``X[:1]``.

    Returns:
        ``(acquisition to optimise, the cost model or why there is none)``: a
        weighting that fails its check leaves ``acqf`` as it was. A check on one
        point cannot catch every failure: the caller falls back further when the
        weighted acquisition fails in the optimiser.
    """
    if not isinstance(cost, CostModel):
        return acqf, cost
    try:
        out = cost.weight(acqf, log)
        value = out(X[:1].unsqueeze(-2))
        if bool(value.isnan().any()):
            raise ValueError("the weighted acquisition is NaN at an observed point")
        return out, cost
    except Exception as exc:  # noqa: BLE001 - propose without cost, and say so
        return acqf, f"cost weighting failed, proposed without cost: {_why(exc)}"


def notes(cost: CostModel | str, X: Any) -> dict[str, Any]:
    """``proposal["cost"]`` for proposals at model inputs ``X (q, d)``."""
    if isinstance(cost, CostModel):
        return cost.notes(X)
    return {"active": False, "model": MODEL, "why": cost}


@functools.cache
def _utility_has_log() -> bool:
    """Whether BoTorch's ``InverseCostWeightedUtility`` takes ``log`` (added after 0.15)."""
    import inspect

    from botorch.acquisition.cost_aware import InverseCostWeightedUtility

    return "log" in inspect.signature(InverseCostWeightedUtility.__init__).parameters



@functools.cache
def _per_joule_class() -> type:
    from botorch.acquisition.cost_aware import InverseCostWeightedUtility
    from botorch.acquisition.objective import GenericMCObjective

    from ecopt.samplers._acquisition import wrapper_base

    class PerJoule(wrapper_base()):  # type: ignore[misc]
        """``utility(X, acqf(X))``: BoTorch's inverse-cost weighting of the acquisition
        (the wrapped one's pending points, baseline, objective and constraints)."""

        def __init__(self, acqf: Any, cost: CostModel, log: bool) -> None:
            super().__init__(acqf)
            a = cost.exponent

            def joules(Y: Any, X: Any = None) -> Any:  # log joules -> joules ** a
                return (a * Y[..., 0]).exp()

            self.cost_model, self.joules, self.log = cost.model, joules, log
            self.utility = None
            if log and not _utility_has_log():
                return  # an older BoTorch: no log form; forward() weights as it does
            kw = {"log": log} if _utility_has_log() else {}
            self.utility = InverseCostWeightedUtility(
                cost.model, use_mean=True, cost_objective=GenericMCObjective(joules), **kw)

        def forward(self, X: Any) -> Any:
            if self.utility is not None:
                return self.utility(X, self.acqf(X))
            # InverseCostWeightedUtility(log=True)'s rule, from its public parts: the cost of
            # a q-batch is the sum of its points' costs at the posterior mean, and the log
            # acquisition minus its log.
            mean = self.cost_model.posterior(X).mean
            return self.acqf(X) - self.joules(mean, X).sum(dim=-1).log()

    return PerJoule


def _PerJoule(acqf: Any, cost: CostModel, log: bool) -> Any:
    return _per_joule_class()(acqf, cost, log)
