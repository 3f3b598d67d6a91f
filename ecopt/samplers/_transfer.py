"""Transfer from earlier studies inside the qLogNEHVI loop.

Which sources are used is decided by ranking, in the spirit of RGPE (Feurer,
Letham, Hutter, Bakshy, "Practical transfer learning for Bayesian
optimization"); the model that uses them is a multi-task GP:

0. **Self-consistency.** A source whose own trials do not predict each other is
   never used. For each shared objective, the source's GP (below) predicts each
   of its trials from the others (leave-one-out, closed form); the share of
   concordant pairs against what they observed gives ``max(0, 2 * score - 1)``,
   and the source's ``self_trust`` is the mean over objectives. Below
   :data:`TRUST_MIN` the source gets trust 0 from the start: values that look like
   noise (a wrong directory, shuffled or mislabelled metrics) cannot steer the
   initial design either, and with no other source the study proposes exactly
   what a cold study with the same seed proposes. Sources of fewer than
   :data:`SELF_CHECK_MIN` trials are not checked (a leave-one-out ranking of a
   handful of noisy trials says too little).
1. **Trust.** For each source and each shared objective a GP is fitted once on
   the source's trials (BoTorch ``SingleTaskGP``). Its posterior mean at the
   target's complete trials is compared with what they observed: the share of
   concordant pairs (ties count half) is the ranking score, and the objective's
   trust is ``max(0, 2 * score - 1)`` (Kendall's tau clipped at 0: a source
   that ranks no better than chance gets 0). A source's trust is the mean over
   its objectives. Until :data:`MIN_JUDGED` target trials are complete, a source
   is trusted (``trust=None``, "not judged yet").
2. **Initial design.** While a source is trusted (``trust is None`` or
   ``>= TRUST_MIN``), the initial design takes its Pareto set mapped into the
   new space (sources in order, each front sorted by its first objective),
   instead of Sobol points; once every source falls below ``TRUST_MIN``, the
   rest of the initial design is Sobol, as a cold start.
3. **Model.** Which sources' trials enter the model (:meth:`TransferModel.in_model`):
   a source that passed its own check clearly (``self_trust >= SELF_TRUST_STRONG``)
   from the first model-based proposal, whatever its trust; one that passed it
   (``self_trust >= TRUST_MIN``) while it is trusted (not judged yet, or trust >=
   ``TRUST_MIN``); a source too small to be checked only once its trust is
   significant on the new study's trials: at least :func:`pool_threshold` of the
   ``n`` trials it was judged on, the one-sided 5% level of Kendall's tau between
   unrelated rankings (the source's GP never saw the new study's values, so this
   null is exact; no trust reaches it before 4 judged trials: 0.81 at 4, 0.67 at 5,
   0.47 at 8, 0.3 from 17). Shuffled sources' leave-one-out rankings are optimistic
   (the GP's hyperparameters were fitted on the value it predicts), so a shuffled
   source passes ``TRUST_MIN`` now and then and ``SELF_TRUST_STRONG`` rarely, while
   most real ones reach it (measured on the Zeus traces:
   ``docs/results/transfer/2026-12-07-source-check``).
   A source in the model is one task of a multi-task GP per objective, the new
   study's trials another (:mod:`ecopt.samplers._multitask`): the fit learns how
   far the source's trials inform the new study's, and positive minimised values
   (energy, time) are modelled as logs, since across GPUs they change by a
   factor. While a source is trusted but none is in the model, its Pareto set has
   stood in for the Sobol design and the single-task model of the new trials
   proposes from 2 complete trials. With no source trusted or in the model, the
   study proposes what a study without sources does (its Sobol design up to
   ``n_init``, then the single-task model with economy proposals by
   ``proposal_share``), so an unrelated source costs what a cold start costs after
   the first trials that judge it. Outcome constraints are modelled beside the
   multi-task objectives by single-task GPs of the new study's trials.

Every proposal of a study with sources records ``proposal["transfer"]``: per
source its id, trust (per objective too), whether its trials entered the model,
and for initial-design points which source point it was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ecopt.objective import Objective
from ecopt.pareto import non_dominated
from ecopt.space import SearchSpace
from ecopt.record import TrialRecord, TrialState

__all__ = ["MIN_JUDGED", "POOL_Z", "SELF_CHECK_MIN", "SELF_TRUST_STRONG", "TRUST_MIN",
           "TransferModel", "pool_threshold"]

#: Complete target trials needed before a source's trust is judged.
MIN_JUDGED = 3
#: Trust below which a source is left out of the initial design and the model.
TRUST_MIN = 0.3
#: Trials a source needs before its self-consistency (``self_trust``) is checked.
SELF_CHECK_MIN = 8
#: ``self_trust`` from which a source is pooled on ``trust >= TRUST_MIN`` alone (below,
#: its trust must also be significant, :func:`pool_threshold`).
SELF_TRUST_STRONG = 0.5
#: One-sided normal quantile of the pooling test (p <= 0.05, see :func:`pool_threshold`).
POOL_Z = 1.645


def pool_threshold(n: int) -> float:
    """The trust a source judged on ``n`` of the new study's trials needs to be pooled.

    ``max(TRUST_MIN, POOL_Z * sd)``, ``sd`` the standard deviation of Kendall's tau
    between two unrelated rankings of ``n`` items, ``sqrt(2 (2n + 5) / (9 n (n - 1)))``:
    a source that ranks the trials no better than chance reaches it one time in
    twenty at most. ``inf`` below 2 trials (no pair to rank).

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"pool_threshold needs a number of judged trials >= 0, got {n}")
    if n < 2:
        return math.inf
    sd = math.sqrt(2.0 * (2 * n + 5) / (9.0 * n * (n - 1)))
    return max(TRUST_MIN, POOL_Z * sd)


def concordance(pred: np.ndarray, obs: np.ndarray) -> float:
    """Share of pairs of ``obs`` that ``pred`` orders the same way (ties count half)."""
    n = len(obs)
    good, total = 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            do = obs[i] - obs[j]
            if do == 0:
                continue
            dp = pred[i] - pred[j]
            total += 1
            good += 1.0 if dp * do > 0 else 0.5 if dp == 0 else 0.0
    return good / total if total else 0.5


@dataclass
class _Fitted:
    """A source's GP per objective (fitted once: the source does not change)."""

    models: dict[str, Any] = field(default_factory=dict)


class TransferModel:
    """The sources of one study, their fitted GPs and the trust rule.

    Args:
        sources: :class:`~ecopt.transfer.SourceStudy` list (already mapped).
        space: The new study's space.
        objectives: The new study's objectives.
    """

    def __init__(self, sources: Sequence[Any], space: SearchSpace,
                 objectives: Sequence[Objective]) -> None:
        self.sources = list(sources)
        self.space = space
        self.objectives = list(objectives)
        self._fitted: dict[int, _Fitted] = {}
        self._self: dict[int, float | None] = {}

    # -- trust ---------------------------------------------------------------
    def _gp(self, k: int, name: str) -> Any:
        fitted = self._fitted.setdefault(k, _Fitted())
        if name not in fitted.models:
            import torch
            from botorch.fit import fit_gpytorch_mll
            from botorch.models import SingleTaskGP
            from botorch.models.transforms import Normalize, Standardize
            from gpytorch.mlls import ExactMarginalLogLikelihood

            recs = self.sources[k].records
            X = torch.tensor(np.array([self.space.encode(r.params) for r in recs]),
                             dtype=torch.double).reshape(len(recs), self.space.dim)
            Y = torch.tensor([[r.values[name]] for r in recs], dtype=torch.double)
            if len(recs) < 2 or float(Y.std()) == 0.0:
                fitted.models[name] = None
                return None
            with torch.random.fork_rng():
                torch.manual_seed(0)
                gp = SingleTaskGP(X, Y, input_transform=Normalize(d=self.space.dim,
                                                                  bounds=_unit(self.space.dim)),
                                  outcome_transform=Standardize(m=1))
                fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
            fitted.models[name] = gp
        return fitted.models[name]

    def predict(self, k: int, name: str, params: Sequence[dict[str, Any]]) -> np.ndarray | None:
        """Source ``k``'s GP mean of objective ``name`` at ``params`` (``None``: no model)."""
        gp = self._gp(k, name)
        if gp is None or not params:
            return None
        import torch

        X = torch.tensor(np.array([self.space.encode(p) for p in params]), dtype=torch.double)
        with torch.no_grad():
            return gp.posterior(X.reshape(len(params), self.space.dim)).mean.squeeze(-1).numpy()

    def self_trust(self, k: int) -> float | None:
        """How well source ``k``'s trials predict each other (see the module; ``None``:
        fewer than :data:`SELF_CHECK_MIN` trials, not checked)."""
        if k in self._self:
            return self._self[k]
        from ecopt.samplers._models import loo_predictions

        src = self.sources[k]
        value: float | None = None
        if len(src.records) >= SELF_CHECK_MIN:
            per = []
            for name in src.objectives:
                gp = self._gp(k, name)
                loo = None if gp is None else loo_predictions(gp)
                if loo is None:
                    per.append(0.0)
                    continue
                y, mu, _ = loo
                per.append(max(0.0, 2.0 * concordance(mu.numpy(), y.numpy()) - 1.0))
            value = round(float(np.mean(per)), 4) if per else 0.0
        self._self[k] = value
        return value

    def trust(self, complete: Sequence[TrialRecord]) -> list[dict[str, Any]]:
        """Each source's trust given the target's complete trials (see the module)."""
        ok = [r for r in complete if r.state is TrialState.COMPLETE and r.feasible
              and not r.unreliable]
        out = []
        for k, src in enumerate(self.sources):
            entry: dict[str, Any] = {"source": src.label, "study_id": src.study_id}
            own = self.self_trust(k)
            if own is not None:
                entry["self_trust"] = own
                if own < TRUST_MIN:
                    entry.update(trust=0.0, judged_on=len(ok))
                    out.append(entry)
                    continue
            if len(ok) < MIN_JUDGED or not src.records:
                entry.update(trust=None if src.records else 0.0, judged_on=len(ok))
                out.append(entry)
                continue
            per: dict[str, float] = {}
            judged = len(ok)
            for name in src.objectives:
                rows = [r for r in ok if name in r.values and math.isfinite(r.values[name])]
                pred = self.predict(k, name, [r.params for r in rows])
                if pred is None or len(rows) < MIN_JUDGED:
                    per[name] = 0.0
                    continue
                obs = np.array([r.values[name] for r in rows])
                per[name] = round(max(0.0, 2.0 * concordance(pred, obs) - 1.0), 4)
                judged = min(judged, len(rows))
            t = round(float(np.mean(list(per.values()))) if per else 0.0, 4)
            strong = own is not None and own >= SELF_TRUST_STRONG
            bar = TRUST_MIN if strong else pool_threshold(judged)
            entry.update(trust=t, per_objective=per, judged_on=len(ok),
                         pool_at=round(bar, 4) if math.isfinite(bar) else None,
                         poolable=t >= bar)
            out.append(entry)
        return out

    # -- initial design ------------------------------------------------------
    def design_points(self, trust: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
        """The trusted sources' Pareto sets, mapped: ``[(source index, params)]``."""
        out = []
        for k, src in enumerate(self.sources):
            t = trust[k].get("trust")
            if not src.records or (t is not None and t < TRUST_MIN):
                continue
            objs = [o for o in self.objectives if o.name in src.objectives]
            Y = np.array([[r.values[o.name] for o in objs] for r in src.records])
            mask = non_dominated(Y, [o.direction for o in objs])
            front = [r for r, m in zip(src.records, mask) if m]
            sign = objs[0].sign
            front.sort(key=lambda r: -sign * r.values[objs[0].name])
            out += [(k, dict(r.params)) for r in front]
        return out

    # -- model ---------------------------------------------------------------
    def in_model(self, trust: Sequence[dict[str, Any]]) -> list[int]:
        """The sources whose trials enter the model now: a clearly self-consistent one
        (``self_trust >= SELF_TRUST_STRONG``) whatever its trust; one that passed its
        self-check (``self_trust >= TRUST_MIN``) while it is trusted (not judged yet, or
        trust >= ``TRUST_MIN``); one too small to be checked once its trust is significant
        (at least :func:`pool_threshold`, ``poolable``)."""
        def used(e: dict[str, Any]) -> bool:
            own, t = e.get("self_trust"), e.get("trust")
            if own is None:  # too small to be checked
                return bool(e.get("poolable"))
            return own >= SELF_TRUST_STRONG or (own >= TRUST_MIN
                                                and (t is None or t >= TRUST_MIN))

        return [k for k, src in enumerate(self.sources) if src.records and used(trust[k])]


def _unit(d: int) -> Any:
    import torch

    return torch.stack([torch.zeros(d, dtype=torch.double), torch.ones(d, dtype=torch.double)])


def public(trust: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trust entries without the private fitted lines (what a proposal records)."""
    return [{k: v for k, v in e.items() if not k.startswith("_")} for e in trust]
